package io.tileflight.spark;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.Serializable;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Map;

/**
 * The data source's options, the same keys as the Python data source's ({@code tileflight.spark}):
 * uri (or location), array (or path), token, tls_root_certs, columns, subarray, filter,
 * timestamp, layout, batch_rows, partitions; writes also max_batch_bytes, staged. Serializable: executors get a copy.
 */
final class Options implements Serializable {
  private static final long serialVersionUID = 1L;
  static final ObjectMapper JSON = new ObjectMapper();

  final String uri;
  final String array;
  final String token;
  final String tlsRootCerts;
  final List<String> columns; // null: every column
  final String subarrayJson;
  final String filter;
  final String timestampJson;
  final String layout;
  final Integer batchRows;
  final Integer partitions;
  /** Writes: most bytes per record batch (null: from the daemon's server_info). */
  final Long maxBatchBytes;
  /** Writes: bytes above which a task's write is staged in pieces (null: from server_info). */
  final Long staged;

  Options(Map<String, String> raw) {
    Map<String, String> o = new java.util.HashMap<>();
    raw.forEach((k, v) -> o.put(k.toLowerCase(Locale.ROOT), v));
    String u = first(o, "uri", "location");
    if (u == null) {
      throw new TileflightException("INVALID_ARGUMENT", "tileflight: option \"uri\" is required (e.g. grpc://host:8815)");
    }
    this.uri = u;
    String a = first(o, "array", "path");
    if (a == null) {
      throw new TileflightException("INVALID_ARGUMENT", "tileflight: option \"array\" is required (the array's name)");
    }
    this.array = a;
    this.token = first(o, "token");
    this.tlsRootCerts = first(o, "tls_root_certs");
    String cols = first(o, "columns");
    if (cols == null) {
      this.columns = null;
    } else {
      List<String> l = new ArrayList<>();
      for (String s : cols.split(",")) {
        if (!s.isBlank()) {
          l.add(s.strip());
        }
      }
      this.columns = l.isEmpty() ? null : l;
    }
    this.subarrayJson = first(o, "subarray");
    if (subarrayJson != null) {
      JsonNode n = parse("subarray", subarrayJson);
      if (!n.isObject()) {
        throw new TileflightException("INVALID_ARGUMENT", "tileflight: option subarray: a JSON object {dim: [[lo, hi], ...]}, got " + subarrayJson);
      }
    }
    this.filter = first(o, "filter");
    this.timestampJson = first(o, "timestamp");
    if (timestampJson != null) {
      try {
        JSON.readTree(timestampJson);
      } catch (Exception e) {
        throw new TileflightException("INVALID_ARGUMENT",
            "tileflight: option timestamp: ms since the epoch or JSON [start, end], got " + timestampJson);
      }
    }
    this.layout = first(o, "layout");
    this.batchRows = integer(o, "batch_rows");
    this.partitions = integer(o, "partitions");
    this.maxBatchBytes = bytes(o, "max_batch_bytes");
    this.staged = bytes(o, "staged");
  }

  private static Long bytes(Map<String, String> o, String key) {
    String v = first(o, key);
    if (v == null) {
      return null;
    }
    try {
      long n = Long.parseLong(v.strip());
      if (n <= 0) {
        throw new NumberFormatException();
      }
      return n;
    } catch (NumberFormatException e) {
      throw new TileflightException("INVALID_ARGUMENT", "tileflight: option " + key + ": a positive number of bytes, got " + v);
    }
  }

  private static String first(Map<String, String> o, String... keys) {
    for (String k : keys) {
      String v = o.get(k);
      if (v != null && !v.isEmpty()) {
        return v;
      }
    }
    return null;
  }

  private static Integer integer(Map<String, String> o, String key) {
    String v = first(o, key);
    if (v == null) {
      return null;
    }
    try {
      return Integer.valueOf(v.strip());
    } catch (NumberFormatException e) {
      throw new TileflightException("INVALID_ARGUMENT", "tileflight: option " + key + ": an integer, got " + v);
    }
  }

  static JsonNode parse(String key, String text) {
    try {
      return JSON.readTree(text);
    } catch (Exception e) {
      throw new TileflightException("INVALID_ARGUMENT", "tileflight: option " + key + ": not JSON: " + text);
    }
  }

  JsonNode timestamp() {
    return timestampJson == null ? null : parse("timestamp", timestampJson);
  }

  /** The query's base: array, the user's subarray, filter, timestamp and layout. */
  ObjectNode baseQuery() {
    ObjectNode q = JSON.createObjectNode();
    q.put("array", array);
    if (subarrayJson != null) {
      q.set("subarray", parse("subarray", subarrayJson));
    }
    if (filter != null) {
      q.put("filter", filter);
    }
    if (timestampJson != null) {
      q.set("timestamp", timestamp());
    }
    if (layout != null) {
      q.put("layout", layout);
    }
    return q;
  }
}
