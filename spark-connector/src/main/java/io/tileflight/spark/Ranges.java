package io.tileflight.spark;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import java.math.BigDecimal;
import java.util.ArrayList;
import java.util.List;
import org.apache.spark.sql.sources.EqualTo;
import org.apache.spark.sql.sources.Filter;
import org.apache.spark.sql.sources.GreaterThan;
import org.apache.spark.sql.sources.GreaterThanOrEqual;
import org.apache.spark.sql.sources.In;
import org.apache.spark.sql.sources.LessThan;
import org.apache.spark.sql.sources.LessThanOrEqual;

/**
 * A dimension's ranges ([lo, hi], inclusive, JSON values) narrowed by Spark filters: what
 * becomes the query's subarray. Integer dimensions take integral bounds (x > 2.5 is x >= 3),
 * float dimensions the next float for strict bounds, string dimensions only = and IN.
 */
final class Ranges {
  private Ranges() {}

  private static final JsonNodeFactory F = JsonNodeFactory.instance;

  static int compare(JsonNode a, JsonNode b) {
    if (a.isTextual() || b.isTextual()) {
      return a.asText().compareTo(b.asText());
    }
    if (a.isIntegralNumber() && b.isIntegralNumber()) {
      return a.bigIntegerValue().compareTo(b.bigIntegerValue());
    }
    return a.decimalValue().compareTo(b.decimalValue());
  }

  static boolean integral(String t) {
    return t.startsWith("int") || t.startsWith("uint");
  }

  static boolean floating(String t) {
    return t.startsWith("float");
  }

  static boolean string(String t) {
    return t.equals("string_ascii") || t.equals("string_utf8") || t.equals("char");
  }

  /** The JSON value of a Spark literal for a dimension of type t, or null if it is not one exactly. */
  static JsonNode point(Object v, String t) {
    if (v == null || v instanceof Boolean) {
      return null;
    }
    if (integral(t)) {
      if (v instanceof Long || v instanceof Integer || v instanceof Short || v instanceof Byte) {
        return F.numberNode(((Number) v).longValue());
      }
      if (v instanceof BigDecimal && ((BigDecimal) v).stripTrailingZeros().scale() <= 0) {
        return F.numberNode(((BigDecimal) v).toBigIntegerExact());
      }
      return null;
    }
    if (floating(t)) {
      if (v instanceof Double || v instanceof Float) {
        double d = ((Number) v).doubleValue();
        return Double.isNaN(d) ? null : F.numberNode(d);
      }
      if (v instanceof Long || v instanceof Integer || v instanceof Short || v instanceof Byte) {
        return F.numberNode(((Number) v).doubleValue());
      }
      return null;
    }
    if (string(t) && v instanceof String) {
      return F.textNode((String) v);
    }
    return null;
  }

  /**
   * cur narrowed by f (a filter on this dimension), or null when f cannot be said as ranges.
   * An empty list: no cell can pass.
   */
  static List<JsonNode[]> narrow(List<JsonNode[]> cur, Filter f, String t) {
    List<JsonNode[]> out = new ArrayList<>();
    if (f instanceof In) {
      List<JsonNode> pts = new ArrayList<>();
      for (Object v : ((In) f).values()) {
        if (v == null) {
          continue; // x IN (NULL, ...) never matches through the null
        }
        JsonNode p = point(v, t);
        if (p == null) {
          return null;
        }
        pts.add(p);
      }
      if (pts.isEmpty()) {
        return null;
      }
      pts.sort(Ranges::compare);
      JsonNode prev = null;
      for (JsonNode p : pts) {
        if (prev != null && compare(prev, p) == 0) {
          continue;
        }
        prev = p;
        if (inside(cur, p)) {
          out.add(new JsonNode[] {p, p});
        }
      }
      return out;
    }
    if (f instanceof EqualTo) {
      JsonNode p = point(((EqualTo) f).value(), t);
      if (p == null) {
        return null;
      }
      if (inside(cur, p)) {
        out.add(new JsonNode[] {p, p});
      }
      return out;
    }
    if (string(t) || !(integral(t) || floating(t))) {
      return null;
    }
    JsonNode lo = null;
    JsonNode hi = null;
    if (f instanceof GreaterThan || f instanceof GreaterThanOrEqual) {
      Object v = f instanceof GreaterThan ? ((GreaterThan) f).value() : ((GreaterThanOrEqual) f).value();
      lo = bound(v, t, f instanceof GreaterThan, true);
      if (lo == null) {
        return null;
      }
    } else if (f instanceof LessThan || f instanceof LessThanOrEqual) {
      Object v = f instanceof LessThan ? ((LessThan) f).value() : ((LessThanOrEqual) f).value();
      hi = bound(v, t, f instanceof LessThan, false);
      if (hi == null) {
        return null;
      }
    } else {
      return null;
    }
    for (JsonNode[] r : cur) {
      JsonNode nlo = lo != null && compare(lo, r[0]) > 0 ? lo : r[0];
      JsonNode nhi = hi != null && compare(hi, r[1]) < 0 ? hi : r[1];
      if (compare(nlo, nhi) <= 0) {
        out.add(new JsonNode[] {nlo, nhi});
      }
    }
    return out;
  }

  private static boolean inside(List<JsonNode[]> cur, JsonNode p) {
    for (JsonNode[] r : cur) {
      if (compare(r[0], p) <= 0 && compare(p, r[1]) <= 0) {
        return true;
      }
    }
    return false;
  }

  /** The inclusive bound of x > v (strict, lower), x >= v, x < v, x <= v. */
  private static JsonNode bound(Object v, String t, boolean strict, boolean lower) {
    if (v == null || v instanceof Boolean || !(v instanceof Number)) {
      return null;
    }
    if (integral(t)) {
      BigDecimal d;
      if (v instanceof Double || v instanceof Float) {
        double x = ((Number) v).doubleValue();
        if (!Double.isFinite(x)) {
          return null;
        }
        d = new BigDecimal(x);
      } else if (v instanceof BigDecimal) {
        d = (BigDecimal) v;
      } else {
        d = BigDecimal.valueOf(((Number) v).longValue());
      }
      java.math.BigInteger b;
      if (lower) {
        // x > v: floor(v) + 1; x >= v: ceil(v)
        b = strict ? d.setScale(0, java.math.RoundingMode.FLOOR).toBigInteger().add(java.math.BigInteger.ONE)
            : d.setScale(0, java.math.RoundingMode.CEILING).toBigInteger();
      } else {
        b = strict ? d.setScale(0, java.math.RoundingMode.CEILING).toBigInteger().subtract(java.math.BigInteger.ONE)
            : d.setScale(0, java.math.RoundingMode.FLOOR).toBigInteger();
      }
      return F.numberNode(b);
    }
    if (v instanceof BigDecimal) {
      return null;
    }
    double x = ((Number) v).doubleValue();
    if (Double.isNaN(x)) {
      return null;
    }
    if (strict) {
      if (t.equals("float32")) {
        // the daemon casts the bound to float32: step in float32, not double
        float fx = (float) x;
        if ((double) fx != x) {
          return null;
        }
        x = lower ? Math.nextUp(fx) : Math.nextDown(fx);
      } else {
        x = lower ? Math.nextUp(x) : Math.nextDown(x);
      }
    }
    return F.numberNode(x);
  }
}
