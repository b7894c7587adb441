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
 * writes: every task sends its rows staged ({@code "stage": true}): one DoPut, or several when
 * its rows exceed the daemon's -max-put-bytes, record batches cut by bytes under its
 * -max-message-bytes (both from the {@code server_info} action, read once on the driver;
 * options {@code max_batch_bytes} and {@code staged} override them); the driver
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
  private final long batchBytes;
  private final long putBytes;

  TileflightWrite(Options o, StructType schema) {
    this.o = o;
    this.schema = schema;
    long[] limits = limits(o);
    this.batchBytes = o.maxBatchBytes != null ? o.maxBatchBytes : limits[0];
    this.putBytes = o.staged != null ? Math.min(o.staged, limits[1]) : limits[1];
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

  /**
   * The record-batch and per-DoPut byte budgets under the daemon's -max-message-bytes and
   * -max-put-bytes (server_info; a daemon without the action: 64 MiB and 1 GiB), less room for
   * framing.
   */
  static long[] limits(Options o) {
    long msg = 64L << 20;
    long put = 1L << 30;
    try {
      JsonNode info = Flight.action(o, "server_info", "");
      JsonNode l = info == null ? null : info.path("limits");
      if (l != null && l.path("max_message_bytes").canConvertToLong()) {
        msg = l.path("max_message_bytes").asLong();
      }
      if (l != null && l.path("max_put_bytes").canConvertToLong()) {
        put = l.path("max_put_bytes").asLong();
      }
    } catch (TileflightException e) {
      boolean older = "UNIMPLEMENTED".equals(e.code()) || ("INVALID_ARGUMENT".equals(e.code()) && e.getMessage().contains("unknown action"));
      if (!older) {
        throw e;
      }
    }
    long msgHead = Math.max(16L << 10, Math.min(1L << 20, msg / 16));
    long putHead = Math.max(64L << 10, put / 32);
    return new long[] {Math.max(1, msg - msgHead), Math.max(1, put - putHead)};
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
    return new Factory(o, schema, timestamp, batchBytes, putBytes);
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
    private final long batchBytes;
    private final long putBytes;

    Factory(Options o, StructType schema, long timestamp, long batchBytes, long putBytes) {
      this.o = o;
      this.schema = schema;
      this.timestamp = timestamp;
      this.batchBytes = batchBytes;
      this.putBytes = putBytes;
    }

    @Override
    public DataWriter<InternalRow> createWriter(int partitionId, long taskId) {
      return new TaskWriter(o, schema, timestamp, batchBytes, putBytes);
    }
  }

  /**
   * One task's rows as staged DoPuts: record batches of at most batch_rows rows (default 65536)
   * and about half the byte budget (so that one more row rarely pushes a batch over it); a new
   * DoPut each time the current one would pass the per-DoPut budget.
   */
  static final class TaskWriter implements DataWriter<InternalRow> {
    private final Options o;
    private final StructType schema;
    private final long timestamp;
    private final int batchRows;
    private final long batchBytes;
    private final long putBytes;
    private BufferAllocator alloc;
    private VectorSchemaRoot root;
    private ArrowWriter writer;
    private FlightClient.ClientStreamListener put;
    private SyncPutListener results;
    private int pending;
    private long rows;
    private long sent; // bytes sent in the current DoPut
    private final List<String> frags = new ArrayList<>();

    TaskWriter(Options o, StructType schema, long timestamp, long batchBytes, long putBytes) {
      this.o = o;
      this.schema = schema;
      this.timestamp = timestamp;
      this.batchRows = o.batchRows != null ? o.batchRows : 65536;
      this.batchBytes = batchBytes;
      this.putBytes = putBytes;
    }

    private void start() {
      if (alloc == null) {
        alloc = Flight.ROOT.newChildAllocator("tileflight-put", 0, Long.MAX_VALUE);
        root = VectorSchemaRoot.create(ArrowUtils.toArrowSchema(schema, "UTC", true), alloc);
        writer = ArrowWriter.create(root);
      }
      ObjectNode d = Options.JSON.createObjectNode();
      d.put("array", o.array);
      d.put("timestamp", timestamp);
      d.put("stage", true);
      results = new SyncPutListener();
      sent = 0;
      try {
        put = Flight.client(o).startPut(FlightDescriptor.command(d.toString().getBytes(StandardCharsets.UTF_8)), root, results,
            Flight.callOptions(o));
      } catch (FlightRuntimeException e) {
        throw TileflightException.of("array " + o.array + ": DoPut", e);
      }
    }

    /** The Arrow bytes of the pending rows. */
    private long pendingBytes() {
      long n = 0;
      for (org.apache.arrow.vector.FieldVector v : root.getFieldVectors()) {
        n += v.getBufferSizeFor(pending);
      }
      return n;
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
        return;
      }
      long size = pendingBytes();
      if (size > batchBytes && pending == 1) {
        throw new TileflightException("RESOURCE_EXHAUSTED", "tileflight: array " + o.array + ": one row is " + size
            + " bytes, over the " + batchBytes + "-byte record batch limit: raise the daemon's -max-message-bytes flag "
            + "(and the max_batch_bytes option if it was set lower)");
      }
      if (size >= batchBytes / 2) {
        flush();
      }
    }

    private void flush() {
      if (pending == 0) {
        return;
      }
      long size = pendingBytes();
      if (sent > 0 && sent + size > putBytes) {
        // This DoPut is full: finish it (its fragments staged) and go on in a new one.
        finishPut();
        start();
      }
      writer.finish();
      put.putNext();
      writer.reset();
      sent += size;
      pending = 0;
    }

    /** Ends the current DoPut and keeps the fragments it staged. */
    private void finishPut() {
      try {
        put.completed();
        put.getResult();
        PutResult r = results.read();
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
        results.close();
        results = null;
        put = null;
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
    public WriterCommitMessage commit() {
      if (put == null) {
        return new Staged(new ArrayList<>(frags), rows);
      }
      flush();
      finishPut();
      return new Staged(new ArrayList<>(frags), rows);
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
        put = null;
      }
      if (!frags.isEmpty()) {
        // This task's finished pieces: the driver never learns of them.
        ObjectNode b = Options.JSON.createObjectNode();
        b.put("array", o.array);
        ArrayNode a = b.putArray("fragments");
        frags.forEach(a::add);
        try {
          Flight.action(o, "abort_fragments", b.toString());
        } catch (TileflightException ignored) {
          // left staged, never visible: a fragments vacuum removes them after -vacuum-grace
        }
        frags.clear();
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
