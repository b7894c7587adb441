package io.tileflight.spark;

import com.fasterxml.jackson.databind.node.ObjectNode;
import java.util.ArrayList;
import java.util.List;
import org.apache.arrow.flight.FlightEndpoint;
import org.apache.arrow.flight.FlightInfo;
import org.apache.arrow.flight.Location;
import org.apache.spark.sql.connector.read.Batch;
import org.apache.spark.sql.connector.read.InputPartition;
import org.apache.spark.sql.connector.read.PartitionReaderFactory;
import org.apache.spark.sql.connector.read.Scan;
import org.apache.spark.sql.types.StructType;

/** The planned query: GetFlightInfo's endpoints are the partitions. */
final class TileflightScan implements Scan, Batch {
  private final Options o;
  private final ObjectNode query;
  private final StructType schema;
  private final Aggregates aggregates;
  private final boolean empty;
  private final String pushed;

  TileflightScan(Options o, ObjectNode query, StructType schema, Aggregates aggregates, boolean empty, String pushed) {
    this.o = o;
    this.query = query;
    this.schema = schema;
    this.aggregates = aggregates;
    this.empty = empty;
    this.pushed = pushed;
  }

  @Override
  public StructType readSchema() {
    return schema;
  }

  @Override
  public String description() {
    StringBuilder b = new StringBuilder("tileflight array=").append(o.array).append(", ");
    if (aggregates == null) {
      b.append("PushedColumns: ").append(query.get("columns")).append(", ");
    }
    return b.append(pushed).toString();
  }

  @Override
  public Batch toBatch() {
    return this;
  }

  @Override
  public InputPartition[] planInputPartitions() {
    if (empty) {
      if (aggregates != null) {
        // No cell passes: one partition answers the aggregates of nothing.
        return new InputPartition[] {new EndpointPartition(0, null, List.of(), true)};
      }
      return new InputPartition[0];
    }
    ObjectNode q = query.deepCopy();
    if (o.partitions != null && aggregates == null) {
      q.put("partitions", o.partitions);
    }
    FlightInfo info = Flight.info(o, q.toString());
    List<InputPartition> out = new ArrayList<>();
    for (FlightEndpoint ep : info.getEndpoints()) {
      List<String> locs = new ArrayList<>();
      for (Location l : ep.getLocations()) {
        locs.add(l.getUri().toString());
      }
      out.add(new EndpointPartition(out.size(), ep.getTicket().getBytes(), locs, aggregates != null));
    }
    return out.toArray(new InputPartition[0]);
  }

  @Override
  public PartitionReaderFactory createReaderFactory() {
    return new TileflightReaderFactory(o, schema, aggregates);
  }
}
