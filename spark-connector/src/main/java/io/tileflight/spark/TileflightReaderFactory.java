package io.tileflight.spark;

import java.util.Iterator;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.connector.read.InputPartition;
import org.apache.spark.sql.connector.read.PartitionReader;
import org.apache.spark.sql.connector.read.PartitionReaderFactory;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.vectorized.ColumnarBatch;

/** Runs on the executors: an endpoint's cells as columnar batches, an aggregate's one row. */
final class TileflightReaderFactory implements PartitionReaderFactory {
  private static final long serialVersionUID = 1L;
  private final Options o;
  private final StructType schema;
  private final Aggregates aggregates;

  TileflightReaderFactory(Options o, StructType schema, Aggregates aggregates) {
    this.o = o;
    this.schema = schema;
    this.aggregates = aggregates;
  }

  @Override
  public boolean supportColumnarReads(InputPartition partition) {
    return aggregates == null;
  }

  @Override
  public PartitionReader<ColumnarBatch> createColumnarReader(InputPartition partition) {
    return new EndpointReader(o, schema, (EndpointPartition) partition);
  }

  @Override
  public PartitionReader<InternalRow> createReader(InputPartition partition) {
    EndpointPartition p = (EndpointPartition) partition;
    if (aggregates != null) {
      return new AggregateReader(o, aggregates, p);
    }
    // Spark asks for rows only when it cannot take batches: the rows of the batches.
    EndpointReader batches = new EndpointReader(o, schema, p);
    return new PartitionReader<InternalRow>() {
      private Iterator<InternalRow> rows = java.util.Collections.emptyIterator();
      private InternalRow row;

      @Override
      public boolean next() throws java.io.IOException {
        while (!rows.hasNext()) {
          if (!batches.next()) {
            return false;
          }
          rows = batches.get().rowIterator();
        }
        row = rows.next();
        return true;
      }

      @Override
      public InternalRow get() {
        return row;
      }

      @Override
      public void close() {
        batches.close();
      }
    };
  }
}
