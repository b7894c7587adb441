package io.tileflight.spark;

import org.apache.arrow.flight.FlightStream;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.connector.read.PartitionReader;

/** The aggregate query's one row (DoGet of its endpoint), as Spark's row. */
final class AggregateReader implements PartitionReader<InternalRow> {
  private final Options o;
  private final Aggregates aggregates;
  private final EndpointPartition p;
  private InternalRow row;
  private boolean done;

  AggregateReader(Options o, Aggregates aggregates, EndpointPartition p) {
    this.o = o;
    this.aggregates = aggregates;
    this.p = p;
  }

  @Override
  public boolean next() {
    if (done) {
      return false;
    }
    done = true;
    if (p.ticket == null) {
      row = aggregates.row(null, o.array);
      return true;
    }
    String uri = p.locations.isEmpty() ? o.uri : p.locations.get(0);
    try (FlightStream s = Flight.stream(o, uri, p.ticket)) {
      InternalRow r = null;
      while (s.next()) {
        if (s.getRoot().getRowCount() > 0 && r == null) {
          r = aggregates.row(s.getRoot(), o.array);
        }
      }
      row = r != null ? r : aggregates.row(null, o.array);
      return true;
    } catch (org.apache.arrow.flight.FlightRuntimeException e) {
      throw TileflightException.of("array " + o.array + ": DoGet of the aggregates", e);
    } catch (TileflightException e) {
      throw e;
    } catch (Exception e) {
      throw new TileflightException("INTERNAL", "tileflight: array " + o.array + ": DoGet of the aggregates: " + e, e);
    }
  }

  @Override
  public InternalRow get() {
    return row;
  }

  @Override
  public void close() {}
}
