package io.tileflight.spark;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.util.LinkedHashMap;
import java.util.Map;

/** What planning needs to know of an array: its fields (describe) and non-empty domain. */
final class ArrayInfo {
  final Map<String, JsonNode> dims = new LinkedHashMap<>();
  final Map<String, JsonNode> attrs = new LinkedHashMap<>();
  final boolean sparse;
  /** Per dimension [lo, hi]: the union of the visible fragments' non-empty domains; null: no fragment. */
  final Map<String, JsonNode[]> ned;

  ArrayInfo(Options o) {
    ObjectNode body = Options.JSON.createObjectNode();
    body.put("array", o.array);
    if (o.timestampJson != null) {
      body.set("timestamp", o.timestamp());
    }
    JsonNode desc = Flight.action(o, "describe", body.toString());
    for (JsonNode d : desc.path("dimensions")) {
      dims.put(d.path("name").asText(), d);
    }
    for (JsonNode a : desc.path("attributes")) {
      attrs.put(a.path("name").asText(), a);
    }
    sparse = "sparse".equals(desc.path("type").asText());
    JsonNode frags = Flight.action(o, "list_fragments", body.toString());
    Map<String, JsonNode[]> out = new LinkedHashMap<>();
    for (JsonNode fr : frags) {
      fr.path("non_empty_domain").fields().forEachRemaining(e -> {
        JsonNode lo = e.getValue().get(0);
        JsonNode hi = e.getValue().get(1);
        JsonNode[] cur = out.get(e.getKey());
        if (cur == null) {
          out.put(e.getKey(), new JsonNode[] {lo, hi});
        } else {
          if (Ranges.compare(lo, cur[0]) < 0) {
            cur[0] = lo;
          }
          if (Ranges.compare(hi, cur[1]) > 0) {
            cur[1] = hi;
          }
        }
      });
    }
    ned = out.keySet().equals(dims.keySet()) ? out : null;
  }

  JsonNode field(String name) {
    JsonNode f = dims.get(name);
    return f != null ? f : attrs.get(name);
  }

  static String type(JsonNode field) {
    return field.path("type").asText();
  }

  static boolean nullable(JsonNode field) {
    return field.path("nullable").asBoolean(false);
  }
}
