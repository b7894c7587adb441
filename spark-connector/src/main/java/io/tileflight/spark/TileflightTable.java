package io.tileflight.spark;

import java.util.EnumSet;
import java.util.Map;
import java.util.Set;
import org.apache.spark.sql.connector.catalog.SupportsRead;
import org.apache.spark.sql.connector.catalog.TableCapability;
import org.apache.spark.sql.connector.read.ScanBuilder;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;

/** One array, read in batch. */
final class TileflightTable implements SupportsRead {
  private final StructType schema;
  private final Map<String, String> properties;

  TileflightTable(StructType schema, Map<String, String> properties) {
    this.schema = schema;
    this.properties = properties;
  }

  @Override
  public String name() {
    String a = new CaseInsensitiveStringMap(properties).get("array");
    return "tileflight:" + (a == null ? new CaseInsensitiveStringMap(properties).get("path") : a);
  }

  @Override
  @SuppressWarnings("deprecation")
  public StructType schema() {
    return schema;
  }

  @Override
  public Set<TableCapability> capabilities() {
    return EnumSet.of(TableCapability.BATCH_READ);
  }

  @Override
  public ScanBuilder newScanBuilder(CaseInsensitiveStringMap options) {
    return new TileflightScanBuilder(new Options(options), schema);
  }
}
