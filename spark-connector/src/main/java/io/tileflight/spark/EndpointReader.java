package io.tileflight.spark;

import java.util.ArrayList;
import java.util.List;
import org.apache.arrow.flight.FlightStream;
import org.apache.arrow.memory.BufferAllocator;
import org.apache.arrow.vector.FieldVector;
import org.apache.arrow.vector.VectorSchemaRoot;
import org.apache.arrow.vector.types.pojo.Field;
import org.apache.spark.sql.connector.read.PartitionReader;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.vectorized.ColumnVector;
import org.apache.spark.sql.vectorized.ColumnarBatch;

/**
 * Streams one endpoint (DoGet of its ticket) and hands each record batch to Spark as a
 * ColumnarBatch over the stream's vectors: no row conversion, and no copy for the types
 * Spark reads in place (see ArrowTypes). A batch stays valid until the next call to next(),
 * which is Spark's contract too. The stream is opened at the first location that answers;
 * once rows were handed on, a failure is the task's (Spark retries the task).
 */
final class EndpointReader implements PartitionReader<ColumnarBatch> {
  private final Options o;
  private final StructType schema;
  private final EndpointPartition p;
  private final BufferAllocator alloc;
  private FlightStream stream;
  private ArrowTypes.Column[] cols;
  private ColumnarBatch batch;

  EndpointReader(Options o, StructType schema, EndpointPartition p) {
    this.o = o;
    this.schema = schema;
    this.p = p;
    this.alloc = Flight.ROOT.newChildAllocator("tileflight-endpoint-" + p.index, 0, Long.MAX_VALUE);
  }

  private void open() {
    List<String> uris = new ArrayList<>(p.locations);
    if (uris.isEmpty()) {
      uris.add(o.uri);
    }
    RuntimeException last = null;
    for (String uri : uris) {
      FlightStream s = null;
      try {
        s = Flight.stream(o, uri, p.ticket);
        s.getRoot(); // waits for the schema: a refused ticket fails here, before any row
        stream = s;
        return;
      } catch (RuntimeException e) {
        last = e instanceof TileflightException ? e
            : new TileflightException("UNAVAILABLE", "tileflight: array " + o.array + ": DoGet from " + uri + ": " + e.getMessage(), e);
        if (s != null) {
          try {
            s.close();
          } catch (Exception ignored) {
            // the stream failed already
          }
        }
      }
    }
    throw last;
  }

  @Override
  public boolean next() {
    if (stream == null) {
      open();
    }
    try {
      while (stream.next()) {
        VectorSchemaRoot root = stream.getRoot();
        int n = root.getRowCount();
        if (n == 0) {
          continue;
        }
        if (cols == null) {
          bind(root);
        }
        ColumnVector[] vs = new ColumnVector[cols.length];
        StructField[] fs = schema.fields();
        for (int i = 0; i < cols.length; i++) {
          vs[i] = cols[i].convert(root.getVector(fs[i].name()), stream.getDictionaryProvider());
        }
        batch = new ColumnarBatch(vs, n);
        return true;
      }
      return false;
    } catch (org.apache.arrow.flight.FlightRuntimeException e) {
      throw TileflightException.of("array " + o.array + ": DoGet", e);
    }
  }

  /** Checks the stream's columns against the schema Spark planned with. */
  private void bind(VectorSchemaRoot root) {
    StructField[] fs = schema.fields();
    cols = new ArrowTypes.Column[fs.length];
    for (int i = 0; i < fs.length; i++) {
      FieldVector v = root.getVector(fs[i].name());
      if (v == null) {
        throw new TileflightException("INTERNAL", "tileflight: array " + o.array + ": the stream has no column " + fs[i].name());
      }
      Field f = v.getField();
      if (!ArrowTypes.sparkType(f).equals(fs[i].dataType())) {
        throw new TileflightException("INVALID_ARGUMENT", "tileflight: array " + o.array + ": column " + f.getName() + ": Spark expects "
            + fs[i].dataType().simpleString() + ", the daemon sends " + f.getType());
      }
      cols[i] = ArrowTypes.column(f, alloc);
    }
  }

  @Override
  public ColumnarBatch get() {
    return batch;
  }

  @Override
  public void close() {
    try {
      if (stream != null) {
        stream.close();
      }
    } catch (Exception e) {
      // closing a stream the task is done with: nothing left to lose
    } finally {
      if (cols != null) {
        for (ArrowTypes.Column c : cols) {
          if (c != null) { // bind() may have failed half-way
            c.close();
          }
        }
      }
      alloc.close();
    }
  }
}
