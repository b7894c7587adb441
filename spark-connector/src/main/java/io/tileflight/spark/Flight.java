package io.tileflight.spark;

import com.fasterxml.jackson.databind.JsonNode;
import java.io.FileInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.util.Iterator;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import org.apache.arrow.flight.Action;
import org.apache.arrow.flight.CallOption;
import org.apache.arrow.flight.CallOptions;
import org.apache.arrow.flight.FlightClient;
import org.apache.arrow.flight.FlightDescriptor;
import org.apache.arrow.flight.FlightInfo;
import org.apache.arrow.flight.FlightRuntimeException;
import org.apache.arrow.flight.FlightStream;
import org.apache.arrow.flight.Location;
import org.apache.arrow.flight.Result;
import org.apache.arrow.flight.Ticket;
import org.apache.arrow.flight.auth2.BearerCredentialWriter;
import org.apache.arrow.flight.grpc.CredentialCallOption;
import org.apache.arrow.memory.BufferAllocator;
import org.apache.arrow.memory.RootAllocator;
import org.apache.arrow.vector.types.pojo.Schema;

/**
 * Flight calls to the daemon. One FlightClient per (uri, tls roots) per JVM, shared by the
 * driver's planning and every task of an executor: a client holds a gRPC channel and Netty
 * event loops, too costly to build per task.
 */
final class Flight {
  private Flight() {}

  /** The JVM's root allocator for Flight streams (each reader takes a child of it). */
  static final BufferAllocator ROOT = new RootAllocator(Long.MAX_VALUE);

  private static final Map<String, FlightClient> CLIENTS = new ConcurrentHashMap<>();

  static {
    Runtime.getRuntime().addShutdownHook(new Thread(() -> {
      for (FlightClient c : CLIENTS.values()) {
        try {
          c.close();
        } catch (Exception ignored) {
          // the JVM is exiting
        }
      }
    }, "tileflight-close"));
  }

  static FlightClient client(String uri, String tlsRootCerts) {
    String key = uri + "\u0000" + (tlsRootCerts == null ? "" : tlsRootCerts);
    return CLIENTS.computeIfAbsent(key, k -> build(uri, tlsRootCerts));
  }

  private static FlightClient build(String uri, String tlsRootCerts) {
    Location loc;
    try {
      loc = new Location(uri);
    } catch (Exception e) {
      throw new TileflightException("INVALID_ARGUMENT", "tileflight: option uri: not a Flight URI (grpc://host:port or grpc+tls://host:port): " + uri);
    }
    FlightClient.Builder b = FlightClient.builder(ROOT, loc);
    if (tlsRootCerts != null) {
      if (!uri.startsWith("grpc+tls:")) {
        throw new TileflightException("INVALID_ARGUMENT", "tileflight: option tls_root_certs needs a grpc+tls:// uri, got " + uri);
      }
      try (InputStream in = new FileInputStream(tlsRootCerts)) {
        b.trustedCertificates(new java.io.ByteArrayInputStream(in.readAllBytes()));
      } catch (IOException e) {
        throw new TileflightException("INVALID_ARGUMENT", "tileflight: option tls_root_certs: cannot read " + tlsRootCerts + ": " + e.getMessage());
      }
    }
    return b.build();
  }

  static CallOption[] callOptions(String token) {
    if (token == null) {
      return new CallOption[0];
    }
    return new CallOption[] {new CredentialCallOption(new BearerCredentialWriter(token))};
  }

  static CallOption[] callOptions(Options o) {
    return callOptions(o.token);
  }

  static FlightClient client(Options o) {
    return client(o.uri, o.tlsRootCerts);
  }

  static Schema schema(Options o, String queryJson) {
    try {
      return client(o).getSchema(FlightDescriptor.command(queryJson.getBytes(StandardCharsets.UTF_8)), callOptions(o)).getSchema();
    } catch (FlightRuntimeException e) {
      throw TileflightException.of("array " + o.array + ": GetSchema", e);
    }
  }

  static FlightInfo info(Options o, String queryJson) {
    try {
      return client(o).getInfo(FlightDescriptor.command(queryJson.getBytes(StandardCharsets.UTF_8)), callOptions(o));
    } catch (FlightRuntimeException e) {
      throw TileflightException.of("array " + o.array + ": GetFlightInfo", e);
    }
  }

  static FlightStream stream(Options o, String uri, byte[] ticket) {
    try {
      return client(uri, o.tlsRootCerts).getStream(new Ticket(ticket), callOptions(o));
    } catch (FlightRuntimeException e) {
      throw TileflightException.of("array " + o.array + ": DoGet", e);
    }
  }

  static JsonNode action(Options o, String type, String body) {
    try {
      Iterator<Result> it = client(o).doAction(new Action(type, body.getBytes(StandardCharsets.UTF_8)), callOptions(o));
      JsonNode out = null;
      while (it.hasNext()) {
        byte[] b = it.next().getBody();
        if (out == null) {
          out = Options.JSON.readTree(b);
        }
      }
      return out;
    } catch (FlightRuntimeException e) {
      throw TileflightException.of("array " + o.array + ": " + type, e);
    } catch (IOException e) {
      throw new TileflightException("INTERNAL", "tileflight: array " + o.array + ": " + type + ": the daemon's answer is not JSON: " + e.getMessage());
    }
  }

  static CallOption timeout(long seconds) {
    return CallOptions.timeout(seconds, java.util.concurrent.TimeUnit.SECONDS);
  }
}
