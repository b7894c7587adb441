package io.tileflight.spark;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.regex.Pattern;
import org.apache.arrow.vector.types.pojo.Schema;
import org.apache.spark.sql.connector.expressions.NamedReference;
import org.apache.spark.sql.connector.expressions.aggregate.AggregateFunc;
import org.apache.spark.sql.connector.expressions.aggregate.Aggregation;
import org.apache.spark.sql.connector.expressions.aggregate.Count;
import org.apache.spark.sql.connector.expressions.aggregate.CountStar;
import org.apache.spark.sql.connector.expressions.aggregate.Max;
import org.apache.spark.sql.connector.expressions.aggregate.Min;
import org.apache.spark.sql.connector.expressions.aggregate.Sum;
import org.apache.spark.sql.connector.read.Scan;
import org.apache.spark.sql.connector.read.ScanBuilder;
import org.apache.spark.sql.connector.read.SupportsPushDownAggregates;
import org.apache.spark.sql.connector.read.SupportsPushDownFilters;
import org.apache.spark.sql.connector.read.SupportsPushDownLimit;
import org.apache.spark.sql.connector.read.SupportsPushDownRequiredColumns;
import org.apache.spark.sql.sources.EqualTo;
import org.apache.spark.sql.sources.Filter;
import org.apache.spark.sql.sources.GreaterThan;
import org.apache.spark.sql.sources.GreaterThanOrEqual;
import org.apache.spark.sql.sources.In;
import org.apache.spark.sql.sources.IsNotNull;
import org.apache.spark.sql.sources.IsNull;
import org.apache.spark.sql.sources.LessThan;
import org.apache.spark.sql.sources.LessThanOrEqual;
import org.apache.spark.sql.sources.Not;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;

/**
 * Planning: what of the Spark query goes into the daemon's query.
 *
 * <ul>
 *   <li>Columns: the ones Spark needs ({@code columns}).
 *   <li>Filters: comparisons and IN on numeric dimensions, = and IN on string dimensions
 *       narrow the {@code subarray} (within the non-empty domain); on sparse arrays,
 *       comparisons, IN, IS [NOT] NULL and != on attributes become the {@code filter}
 *       (each checked first with a one-cell DoGet: one the daemon does not run stays with
 *       Spark); IS NOT NULL on a field that cannot be null is always true. Dense arrays keep
 *       attribute filters in Spark (a dense read returns every cell of the subarray).
 *   <li>Aggregates without GROUP BY: COUNT(*), COUNT(col), SUM of integer and float columns,
 *       MIN and MAX of integer and date columns become the query's {@code aggregates}, all or
 *       none. MIN/MAX of floats stay in Spark: TileDB skips NaN where Spark orders it last.
 *   <li>LIMIT: the query's {@code limit} (Spark still applies its own).
 * </ul>
 */
final class TileflightScanBuilder implements ScanBuilder, SupportsPushDownRequiredColumns, SupportsPushDownFilters,
    SupportsPushDownAggregates, SupportsPushDownLimit {
  private static final Pattern IDENT = Pattern.compile("[A-Za-z_][A-Za-z0-9_]*");

  private final Options o;
  private final StructType full;
  private StructType required;
  private ArrayInfo info;
  private final Map<String, List<JsonNode[]>> subarray = new LinkedHashMap<>();
  private final List<String> conditions = new ArrayList<>();
  private Filter[] pushed = new Filter[0];
  private boolean empty;
  private Integer limit;
  private Aggregates aggregates;

  TileflightScanBuilder(Options o, StructType schema) {
    this.o = o;
    this.full = schema;
    this.required = schema;
  }

  private ArrayInfo info() {
    if (info == null) {
      info = new ArrayInfo(o);
    }
    return info;
  }

  // -- columns ----------------------------------------------------------------------

  @Override
  public void pruneColumns(StructType requiredSchema) {
    this.required = requiredSchema;
  }

  // -- filters ----------------------------------------------------------------------

  @Override
  public Filter[] pushFilters(Filter[] filters) {
    ArrayInfo a = info();
    JsonNode given = o.subarrayJson == null ? null : Options.parse("subarray", o.subarrayJson);
    List<Filter> remaining = new ArrayList<>();
    List<Filter> done = new ArrayList<>();
    List<Filter> candidates = new ArrayList<>();
    List<String> conds = new ArrayList<>();
    for (Filter f : filters) {
      String[] refs = f.references();
      String col = refs.length == 1 ? refs[0] : null;
      JsonNode field = col == null ? null : a.field(col);
      if (field == null) {
        remaining.add(f);
        continue;
      }
      // IS NOT NULL of a field that cannot be null holds for every cell.
      if (f instanceof IsNotNull && !ArrayInfo.nullable(field)) {
        done.add(f);
        continue;
      }
      boolean dim = a.dims.containsKey(col);
      if (dim && (given == null || !given.has(col)) && a.ned != null && pushDim(f, col, ArrayInfo.type(field))) {
        done.add(f);
        continue;
      }
      String cond = a.sparse ? condition(f, col, field, dim) : null;
      if (cond == null) {
        remaining.add(f);
      } else {
        candidates.add(f);
        conds.add(cond);
      }
    }
    // A condition is pushed only if the daemon runs it; one it refuses stays with Spark.
    for (int i = 0; i < candidates.size(); i++) {
      if (runs(conds.get(i))) {
        conditions.add(conds.get(i));
        done.add(candidates.get(i));
      } else {
        remaining.add(candidates.get(i));
      }
    }
    pushed = done.toArray(new Filter[0]);
    return remaining.toArray(new Filter[0]);
  }

  @Override
  public Filter[] pushedFilters() {
    return pushed;
  }

  private boolean pushDim(Filter f, String dim, String type) {
    List<JsonNode[]> cur = subarray.get(dim);
    if (cur == null) {
      cur = new ArrayList<>();
      cur.add(info.ned.get(dim).clone());
    }
    List<JsonNode[]> next = Ranges.narrow(cur, f, type);
    if (next == null) {
      return false;
    }
    if (next.isEmpty()) {
      empty = true;
      JsonNode lo = info.ned.get(dim)[0];
      next.add(new JsonNode[] {lo, lo});
    }
    subarray.put(dim, next);
    return true;
  }

  private boolean runs(String cond) {
    ArrayInfo a = info();
    if (a.ned == null) {
      return false;
    }
    ObjectNode q = o.baseQuery();
    q.remove("layout");
    String first = a.dims.keySet().iterator().next();
    q.putArray("columns").add(first);
    ObjectNode sub = q.putObject("subarray");
    for (Map.Entry<String, JsonNode[]> e : a.ned.entrySet()) {
      sub.putArray(e.getKey()).addArray().add(e.getValue()[0]).add(e.getValue()[0]);
    }
    String prev = q.has("filter") ? q.get("filter").asText() : null;
    q.put("filter", prev == null ? cond : "(" + prev + ") and " + cond);
    try (org.apache.arrow.flight.FlightStream s = Flight.stream(o, o.uri, q.toString().getBytes(java.nio.charset.StandardCharsets.UTF_8))) {
      while (s.next()) {
        // drain: an error may come with the first batch
      }
      return true;
    } catch (Exception e) {
      return false;
    }
  }

  private static String name(String col, boolean dim) {
    if (IDENT.matcher(col).matches() && !col.equals("None") && !col.equals("True") && !col.equals("False")
        && !col.equals("and") && !col.equals("or") && !col.equals("not") && !col.equals("in")) {
      return col;
    }
    if (col.indexOf('"') >= 0 || col.indexOf('\\') >= 0) {
      return null;
    }
    return (dim ? "dim(\"" : "attr(\"") + col + "\")";
  }

  /** f in TileDB QueryCondition syntax, or null when it has no exact equivalent. */
  static String condition(Filter f, String col, JsonNode field, boolean dim) {
    String t = ArrayInfo.type(field);
    boolean numeric = Ranges.integral(t) || Ranges.floating(t);
    boolean str = t.startsWith("string") || t.equals("char");
    if (!numeric && !str) {
      return null;
    }
    JsonNode cvn = field.get("cell_val_num");
    boolean var = cvn != null && cvn.isTextual() && cvn.asText().equals("var");
    if (cvn != null && !var && cvn.asInt(1) != 1) {
      return null;
    }
    if (var && !str) {
      return null;
    }
    String n = name(col, dim);
    if (n == null) {
      return null;
    }
    boolean nullable = ArrayInfo.nullable(field);
    String op = null;
    Object v = null;
    if (f instanceof EqualTo) {
      op = "==";
      v = ((EqualTo) f).value();
    } else if (f instanceof GreaterThan) {
      op = ">";
      v = ((GreaterThan) f).value();
    } else if (f instanceof GreaterThanOrEqual) {
      op = ">=";
      v = ((GreaterThanOrEqual) f).value();
    } else if (f instanceof LessThan) {
      op = "<";
      v = ((LessThan) f).value();
    } else if (f instanceof LessThanOrEqual) {
      op = "<=";
      v = ((LessThanOrEqual) f).value();
    }
    if (op != null) {
      String lit = literal(v, numeric, Ranges.integral(t));
      return lit == null ? null : n + " " + op + " " + lit;
    }
    if (f instanceof In) {
      StringBuilder b = new StringBuilder();
      for (Object x : ((In) f).values()) {
        if (x == null) {
          continue;
        }
        String lit = literal(x, numeric, Ranges.integral(t));
        if (lit == null) {
          return null;
        }
        b.append(b.length() == 0 ? "" : ", ").append(lit);
      }
      return b.length() == 0 ? null : n + " in [" + b + "]";
    }
    if (f instanceof IsNull) {
      return nullable ? n + " == None" : null;
    }
    if (f instanceof IsNotNull) {
      return nullable ? n + " != None" : null;
    }
    if (f instanceof Not && ((Not) f).child() instanceof EqualTo && !nullable) {
      String lit = literal(((EqualTo) ((Not) f).child()).value(), numeric, Ranges.integral(t));
      return lit == null ? null : n + " != " + lit;
    }
    return null;
  }

  /** A Python literal of v for a numeric or string field; null if v has none exactly. */
  static String literal(Object v, boolean numeric, boolean integral) {
    if (numeric) {
      if (v instanceof Long || v instanceof Integer || v instanceof Short || v instanceof Byte) {
        return v.toString();
      }
      // A float constant on an integer field would be truncated toward zero (TileDB-Py's
      // cast): x > 2.5 would mean x > 2. Spark casts the column in that case anyway.
      if (!integral && (v instanceof Double || v instanceof Float)) {
        double d = ((Number) v).doubleValue();
        if (!Double.isFinite(d)) {
          return null;
        }
        // Exact and in Python's syntax (no exponent letters to worry about).
        return new java.math.BigDecimal(d).toPlainString();
      }
      return null;
    }
    if (!(v instanceof String)) {
      return null;
    }
    String s = (String) v;
    StringBuilder b = new StringBuilder("'");
    for (int i = 0; i < s.length(); i++) {
      char c = s.charAt(i);
      if (c == '\\' || c == '\'') {
        b.append('\\').append(c);
      } else if (c < 0x20 || c == 0x7f) {
        b.append(String.format("\\x%02x", (int) c));
      } else {
        b.append(c);
      }
    }
    return b.append('\'').toString();
  }

  // -- aggregates -------------------------------------------------------------------

  @Override
  public boolean supportCompletePushDown(Aggregation aggregation) {
    return plan(aggregation) != null;
  }

  @Override
  public boolean pushAggregation(Aggregation aggregation) {
    Aggregates p = plan(aggregation);
    if (p == null) {
      return false;
    }
    aggregates = p;
    return true;
  }

  private Aggregates plan(Aggregation agg) {
    if (agg.groupByExpressions().length > 0 || empty || limit != null) {
      return null;
    }
    ArrayInfo a = info();
    Aggregates p = new Aggregates();
    for (AggregateFunc f : agg.aggregateExpressions()) {
      if (f instanceof CountStar) {
        p.countStar();
        continue;
      }
      String col;
      if (f instanceof Count && !((Count) f).isDistinct()) {
        col = column(((Count) f).column());
      } else if (f instanceof Sum && !((Sum) f).isDistinct()) {
        col = column(((Sum) f).column());
      } else if (f instanceof Min) {
        col = column(((Min) f).column());
      } else if (f instanceof Max) {
        col = column(((Max) f).column());
      } else {
        return null;
      }
      if (col == null || a.field(col) == null || full.getFieldIndex(col).isEmpty()) {
        return null;
      }
      JsonNode field = a.field(col);
      JsonNode cvn = field.get("cell_val_num");
      if (cvn != null && !(cvn.isInt() && cvn.asInt() == 1)) {
        return null;
      }
      DataType dt = full.apply(col).dataType();
      boolean nullable = ArrayInfo.nullable(field);
      String t = ArrayInfo.type(field);
      if (f instanceof Count) {
        p.count(col, nullable);
      } else if (f instanceof Sum) {
        boolean integer = dt.equals(DataTypes.ByteType) || dt.equals(DataTypes.ShortType) || dt.equals(DataTypes.IntegerType)
            || dt.equals(DataTypes.LongType);
        boolean fl = dt.equals(DataTypes.FloatType) || dt.equals(DataTypes.DoubleType);
        if (!(integer && Ranges.integral(t)) && !(fl && Ranges.floating(t))) {
          return null;
        }
        p.sum(col, nullable, integer ? DataTypes.LongType : DataTypes.DoubleType);
      } else {
        boolean ok = (Ranges.integral(t) && (dt.equals(DataTypes.ByteType) || dt.equals(DataTypes.ShortType)
            || dt.equals(DataTypes.IntegerType) || dt.equals(DataTypes.LongType)))
            || (t.equals("datetime_day") && dt.equals(DataTypes.DateType));
        if (!ok) {
          return null;
        }
        p.minMax(f instanceof Min ? "min" : "max", col, nullable, dt);
      }
    }
    return p;
  }

  private static String column(org.apache.spark.sql.connector.expressions.Expression e) {
    if (e instanceof NamedReference && ((NamedReference) e).fieldNames().length == 1) {
      return ((NamedReference) e).fieldNames()[0];
    }
    return null;
  }

  // -- limit ------------------------------------------------------------------------

  @Override
  public boolean pushLimit(int n) {
    if (aggregates != null) {
      return false;
    }
    limit = n;
    return true;
  }

  // -- the scan ---------------------------------------------------------------------

  @Override
  public Scan build() {
    ObjectNode q = o.baseQuery();
    if (!subarray.isEmpty()) {
      ObjectNode sub = q.has("subarray") ? (ObjectNode) q.get("subarray") : q.putObject("subarray");
      subarray.forEach((d, ranges) -> {
        ArrayNode rs = sub.putArray(d);
        for (JsonNode[] r : ranges) {
          rs.addArray().add(r[0]).add(r[1]);
        }
      });
    }
    if (!conditions.isEmpty()) {
      String c = String.join(" and ", conditions);
      q.put("filter", q.has("filter") ? "(" + q.get("filter").asText() + ") and " + c : c);
    }
    if (aggregates != null) {
      q.remove("layout");
      q.set("aggregates", aggregates.query());
      return new TileflightScan(o, q, aggregates.schema(), aggregates, empty, describePushed());
    }
    ArrayNode cols = q.putArray("columns");
    StructType read = required;
    if (read.fields().length == 0) {
      // Spark needs only the row count: read the smallest column there is, a dimension.
      cols.add(info().dims.keySet().iterator().next());
    } else {
      for (StructField f : read.fields()) {
        cols.add(f.name());
      }
      checkTypes(q, read);
    }
    if (limit != null) {
      q.put("limit", limit);
    }
    if (o.batchRows != null) {
      q.put("batch_rows", o.batchRows);
    }
    return new TileflightScan(o, q, read, null, empty, describePushed());
  }

  /** A user-given schema must be what the daemon sends (one GetSchema; checked at planning, not in a task). */
  private void checkTypes(ObjectNode q, StructType read) {
    ObjectNode sq = q.deepCopy();
    sq.remove("limit");
    Schema s = Flight.schema(o, sq.toString());
    StructType got = ArrowTypes.sparkSchema(s);
    for (StructField f : read.fields()) {
      int i = got.getFieldIndex(f.name()).isDefined() ? (Integer) got.getFieldIndex(f.name()).get() : -1;
      if (i < 0 || !got.fields()[i].dataType().equals(f.dataType())) {
        throw new TileflightException("INVALID_ARGUMENT", "tileflight: array " + o.array + ": column " + f.name() + ": the schema says "
            + f.dataType().simpleString() + ", the daemon sends " + (i < 0 ? "no such column" : got.fields()[i].dataType().simpleString()));
      }
    }
  }

  private String describePushed() {
    StringBuilder b = new StringBuilder();
    b.append("PushedFilters: [");
    for (int i = 0; i < pushed.length; i++) {
      b.append(i == 0 ? "" : ", ").append(pushed[i]);
    }
    b.append("]");
    if (!subarray.isEmpty()) {
      b.append(", PushedSubarray: {");
      int i = 0;
      for (Map.Entry<String, List<JsonNode[]>> e : subarray.entrySet()) {
        b.append(i++ == 0 ? "" : ", ").append(e.getKey()).append(": [");
        int j = 0;
        for (JsonNode[] r : e.getValue()) {
          b.append(j++ == 0 ? "" : ", ").append("[").append(r[0]).append(", ").append(r[1]).append("]");
        }
        b.append("]");
      }
      b.append("}");
    }
    if (!conditions.isEmpty()) {
      b.append(", PushedCondition: ").append(String.join(" and ", conditions));
    }
    if (aggregates != null) {
      b.append(", PushedAggregates: ").append(aggregates.describe());
    }
    if (limit != null) {
      b.append(", PushedLimit: ").append(limit);
    }
    if (empty) {
      b.append(", Empty: true");
    }
    return b.toString();
  }
}
