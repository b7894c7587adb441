package io.tileflight.spark;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import org.apache.arrow.flight.FlightClient;
import org.apache.arrow.flight.FlightDescriptor;
import org.apache.arrow.flight.FlightRuntimeException;
import org.apache.arrow.flight.PutResult;
import org.apache.arrow.flight.SyncPutListener;
import org.apache.arrow.memory.ArrowBuf;
import org.apache.arrow.memory.BufferAllocator;
import org.apache.arrow.vector.VectorSchemaRoot;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.connector.write.BatchWrite;
import org.apache.spark.sql.connector.write.DataWriter;
import org.apache.spark.sql.connector.write.DataWriterFactory;
import org.apache.spark.sql.connector.write.PhysicalWriteInfo;
import org.apache.spark.sql.connector.write.Write;
import org.apache.spark.sql.connector.write.WriterCommitMessage;
import org.apache.spark.sql.execution.arrow.ArrowWriter;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.ArrowUtils;

/**
 * {@code df.write.format("tileflight-jvm").mode("append").save()}, as the Python data source
 * writes: every task sends its rows as one staged DoPut ({@code "stage": true}); the driver
 * makes all tasks' fragments visible with one {@code commit_fragments} once every task
 * succeeded, or deletes the finished tasks' fragments with {@code abort_fragments} when any
 * failed. All or nothing; every fragment carries one timestamp, chosen on the driver (or the
 * {@code timestamp} option). Sparse arrays only: a dense DoPut needs its rows in subarray
 * order, which Spark tasks do not have.
 */
final class TileflightWrite implements Write, BatchWrite {
  private final Options o;
  private final StructType schema;
  private final long timestamp;

  TileflightWrite(Options o, StructType schema) {
    this.o = o;
    this.schema = schema;
    if (!new ArrayInfo(o).sparse) {
      throw new TileflightException("UNIMPLEMENTED", "tileflight: array " + o.array + ": Spark writes go to sparse arrays (a dense DoPut "
          + "needs its rows in subarray order, which Spark tasks do not have)");
    }
    if (o.timestampJson != null) {
      JsonNode t = o.timestamp();
      if (!t.canConvertToLong()) {
        throw new TileflightException("INVALID_ARGUMENT", "tileflight: option timestamp: a write takes one time in ms, got " + o.timestampJson);
      }
      this.timestamp = t.asLong();
    } else {
      this.timestamp = System.currentTimeMillis();
    }
  }

  @Override
  public String description() {
    return "tileflight array=" + o.array + " (staged DoPut per task, commit_fragments on the driver)";
  }

  @Override
  public BatchWrite toBatch() {
    return this;
  }

  @Override
  public DataWriterFactory createBatchWriterFactory(PhysicalWriteInfo info) {
    return new Factory(o, schema, timestamp);
  }

  @Override
  public boolean useCommitCoordinator() {
    return true; // one committed attempt per partition: no fragment written twice
  }

  @Override
  public void commit(WriterCommitMessage[] messages) {
    List<String> frags = fragments(messages);
    if (!frags.isEmpty()) {
      Flight.action(o, "commit_fragments", body(frags));
    }
  }

  @Override
  public void abort(WriterCommitMessage[] messages) {
    List<String> frags = fragments(messages);
    if (!frags.isEmpty()) {
      Flight.action(o, "abort_fragments", body(frags));
    }
  }

  private String body(List<String> frags) {
    ObjectNode b = Options.JSON.createObjectNode();
    b.put("array", o.array);
    ArrayNode a = b.putArray("fragments");
    frags.forEach(a::add);
    return b.toString();
  }

  private static List<String> fragments(WriterCommitMessage[] messages) {
    List<String> out = new ArrayList<>();
    if (messages == null) {
      return out;
    }
    for (WriterCommitMessage m : messages) {
      if (m instanceof Staged) {
        out.addAll(((Staged) m).fragments);
      }
    }
    return out;
  }

  /** What one task staged. */
  static final class Staged implements WriterCommitMessage {
    private static final long serialVersionUID = 1L;
    final List<String> fragments;
    final long rows;

    Staged(List<String> fragments, long rows) {
      this.fragments = fragments;
      this.rows = rows;
    }
  }

  static final class Factory implements DataWriterFactory {
    private static final long serialVersionUID = 1L;
    private final Options o;
    private final StructType schema;
    private final long timestamp;

    Factory(Options o, StructType schema, long timestamp) {
      this.o = o;
      this.schema = schema;
      this.timestamp = timestamp;
    }

    @Override
    public DataWriter<InternalRow> createWriter(int partitionId, long taskId) {
      return new TaskWriter(o, schema, timestamp);
    }
  }

  /** One task's rows as one staged DoPut, batch_rows rows per record batch (default 65536). */
  static final class TaskWriter implements DataWriter<InternalRow> {
    private final Options o;
    private final StructType schema;
    private final long timestamp;
    private final int batchRows;
    private BufferAllocator alloc;
    private VectorSchemaRoot root;
    private ArrowWriter writer;
    private FlightClient.ClientStreamListener put;
    private SyncPutListener results;
    private int pending;
    private long rows;

    TaskWriter(Options o, StructType schema, long timestamp) {
      this.o = o;
      this.schema = schema;
      this.timestamp = timestamp;
      this.batchRows = o.batchRows != null ? o.batchRows : 65536;
    }

    private void start() {
      alloc = Flight.ROOT.newChildAllocator("tileflight-put", 0, Long.MAX_VALUE);
      root = VectorSchemaRoot.create(ArrowUtils.toArrowSchema(schema, "UTC", true), alloc);
      writer = ArrowWriter.create(root);
      ObjectNode d = Options.JSON.createObjectNode();
      d.put("array", o.array);
      d.put("timestamp", timestamp);
      d.put("stage", true);
      results = new SyncPutListener();
      try {
        put = Flight.client(o).startPut(FlightDescriptor.command(d.toString().getBytes(StandardCharsets.UTF_8)), root, results,
            Flight.callOptions(o));
      } catch (FlightRuntimeException e) {
        throw TileflightException.of("array " + o.array + ": DoPut", e);
      }
    }

    @Override
    public void write(InternalRow row) {
      if (put == null) {
        start();
      }
      writer.write(row);
      pending++;
      rows++;
      if (pending >= batchRows) {
        flush();
      }
    }

    private void flush() {
      if (pending == 0) {
        return;
      }
      writer.finish();
      put.putNext();
      writer.reset();
      pending = 0;
    }

    @Override
    public WriterCommitMessage commit() {
      if (put == null) {
        return new Staged(List.of(), 0);
      }
      try {
        flush();
        put.completed();
        put.getResult();
        PutResult r = results.read();
        List<String> frags = new ArrayList<>();
        if (r != null && r.getApplicationMetadata() != null) {
          ArrowBuf b = r.getApplicationMetadata();
          byte[] bytes = new byte[(int) b.readableBytes()];
          b.getBytes(0, bytes);
          JsonNode j = Options.JSON.readTree(bytes);
          for (JsonNode f : j.path("fragments")) {
            frags.add(f.asText());
          }
          r.close();
        }
        return new Staged(frags, rows);
      } catch (FlightRuntimeException e) {
        throw TileflightException.of("array " + o.array + ": DoPut", e);
      } catch (java.io.IOException e) {
        throw new TileflightException("INTERNAL", "tileflight: array " + o.array + ": DoPut: the daemon's answer is not JSON: " + e.getMessage());
      } catch (java.util.concurrent.ExecutionException e) {
        if (e.getCause() instanceof FlightRuntimeException) {
          throw TileflightException.of("array " + o.array + ": DoPut", (FlightRuntimeException) e.getCause());
        }
        throw new TileflightException("INTERNAL", "tileflight: array " + o.array + ": DoPut: " + e.getCause(), e);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        throw new TileflightException("CANCELLED", "tileflight: array " + o.array + ": DoPut: interrupted waiting for the daemon's answer", e);
      }
    }

    @Override
    public void abort() {
      if (put != null) {
        // Cancels the DoPut: the daemon drops what it had not finished writing; fragments
        // it staged are never committed (the driver's abort deletes those it learns of).
        put.error(new RuntimeException("tileflight: Spark task aborted"));
        try {
          put.getResult();
        } catch (Exception ignored) {
          // the cancellation itself
        }
      }
    }

    @Override
    public void close() {
      if (results != null) {
        results.close();
      }
      if (root != null) {
        root.close();
      }
      if (alloc != null) {
        alloc.close();
      }
    }
  }
}
