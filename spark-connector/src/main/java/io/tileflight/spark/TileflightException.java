package io.tileflight.spark;

import org.apache.arrow.flight.FlightRuntimeException;

/** An error of the connector or the daemon; keeps the Flight status code's name. */
public final class TileflightException extends RuntimeException {
  private static final long serialVersionUID = 1L;
  private final String code;

  public TileflightException(String code, String message) {
    super(message + " (" + code + ")");
    this.code = code;
  }

  public TileflightException(String code, String message, Throwable cause) {
    super(message + " (" + code + ")", cause);
    this.code = code;
  }

  /** The gRPC status code's name (INVALID_ARGUMENT, NOT_FOUND, UNIMPLEMENTED, ...). */
  public String code() {
    return code;
  }

  /** Wraps a Flight error, saying what the connector was doing. */
  static TileflightException of(String doing, FlightRuntimeException e) {
    String code = e.status().code().name();
    // Flight Java names the codes as gRPC does but for these two.
    if (code.equals("UNAUTHORIZED")) {
      code = "PERMISSION_DENIED";
    } else if (code.equals("TIMED_OUT")) {
      code = "DEADLINE_EXCEEDED";
    }
    return new TileflightException(code, "tileflight: " + doing + ": " + e.getMessage(), e);
  }
}
