package io.tileflight.spark;

import java.net.URI;
import java.util.ArrayList;
import java.util.List;
import org.apache.spark.sql.connector.read.InputPartition;

/**
 * One Flight endpoint: its ticket and the locations to read it from (none: the daemon the
 * driver asked). Spark prefers to run the task on the first location's host (the daemon
 * lists the preferred node first, the others for fail-over).
 */
final class EndpointPartition implements InputPartition {
  private static final long serialVersionUID = 1L;
  final int index;
  final byte[] ticket;
  final List<String> locations;
  /** An aggregate query's answer (one row), not cells. */
  final boolean aggregate;

  EndpointPartition(int index, byte[] ticket, List<String> locations, boolean aggregate) {
    this.index = index;
    this.ticket = ticket;
    this.locations = new ArrayList<>(locations);
    this.aggregate = aggregate;
  }

  @Override
  public String[] preferredLocations() {
    if (locations.isEmpty()) {
      return new String[0];
    }
    try {
      String host = new URI(locations.get(0)).getHost();
      return host == null ? new String[0] : new String[] {host};
    } catch (Exception e) {
      return new String[0];
    }
  }
}
