package io.tileflight.spark;

import java.util.EnumSet;
import java.util.Map;
import java.util.Set;
import org.apache.spark.sql.connector.catalog.SupportsRead;
import org.apache.spark.sql.connector.catalog.SupportsWrite;
import org.apache.spark.sql.connector.write.LogicalWriteInfo;
import org.apache.spark.sql.connector.write.Write;
import org.apache.spark.sql.connector.write.WriteBuilder;
import org.apache.spark.sql.connector.catalog.TableCapability;
import org.apache.spark.sql.connector.read.ScanBuilder;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;

/** One array, read in batch and appended to (see TileflightWrite). */
final class TileflightTable implements SupportsRead, SupportsWrite {
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
    return EnumSet.of(TableCapability.BATCH_READ, TableCapability.BATCH_WRITE);
  }

  @Override
  public WriteBuilder newWriteBuilder(LogicalWriteInfo info) {
    Options o = new Options(info.options());
    StructType s = info.schema();
    return new WriteBuilder() {
      @Override
      public Write build() {
        return new TileflightWrite(o, s);
      }
    };
  }

  @Override
  public ScanBuilder newScanBuilder(CaseInsensitiveStringMap options) {
    return new TileflightScanBuilder(new Options(options), schema);
  }
}
