package io.tileflight.spark;

import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.util.Map;
import org.apache.spark.sql.connector.catalog.Table;
import org.apache.spark.sql.connector.catalog.TableProvider;
import org.apache.spark.sql.connector.expressions.Transform;
import org.apache.spark.sql.sources.DataSourceRegister;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;

/**
 * {@code spark.read.format("tileflight-jvm")} (or this class's name). The schema comes from
 * the daemon's GetSchema of the query the options make ({@code columns} narrows it); a
 * user-given schema ({@code spark.read.schema("v double")}) picks the columns by name and
 * must match the daemon's types.
 *
 * <p>The short name differs from the Python data source's ({@code "tileflight"}): Spark
 * refuses a format name that both a JVM source and a registered Python source answer to.
 */
public final class TileflightSource implements TableProvider, DataSourceRegister {
  /** The format name. */
  public static final String SHORT_NAME = "tileflight-jvm";

  @Override
  public String shortName() {
    return SHORT_NAME;
  }

  @Override
  public StructType inferSchema(CaseInsensitiveStringMap options) {
    Options o = new Options(options);
    ObjectNode q = o.baseQuery();
    if (o.columns != null) {
      ArrayNode cols = q.putArray("columns");
      o.columns.forEach(cols::add);
    }
    return ArrowTypes.sparkSchema(Flight.schema(o, q.toString()));
  }

  @Override
  public boolean supportsExternalMetadata() {
    return true;
  }

  @Override
  public Table getTable(StructType schema, Transform[] partitioning, Map<String, String> properties) {
    return new TileflightTable(schema, properties);
  }
}
