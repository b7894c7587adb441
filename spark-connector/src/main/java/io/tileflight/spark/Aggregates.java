package io.tileflight.spark;

import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.Serializable;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.apache.arrow.vector.FieldVector;
import org.apache.arrow.vector.VectorSchemaRoot;
import org.apache.arrow.vector.types.pojo.ArrowType;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.GenericInternalRow;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;

/**
 * Spark aggregates (no GROUP BY) as the query's {@code aggregates}, and the daemon's one-row
 * answer as Spark's row. The daemon's value where no cell counts (sum 0, dense min/max 0) is
 * Spark's null: each field's count (less its null_count) is asked for alongside, and a
 * function over no value answers null, as Spark's does.
 */
final class Aggregates implements Serializable {
  private static final long serialVersionUID = 1L;

  private static final class Out implements Serializable {
    private static final long serialVersionUID = 1L;
    final String op; // count, sum, min, max; count with col null: count(*)
    final String col;
    final boolean nullable;
    final DataType type;

    Out(String op, String col, boolean nullable, DataType type) {
      this.op = op;
      this.col = col;
      this.nullable = nullable;
      this.type = type;
    }

    String label() {
      return op.toUpperCase() + "(" + (col == null ? "*" : col) + ")";
    }
  }

  private final List<Out> outs = new ArrayList<>();
  private final Map<String, Set<String>> ops = new LinkedHashMap<>();

  private void ask(String col, String op) {
    ops.computeIfAbsent(col, k -> new LinkedHashSet<>()).add(op);
  }

  private void values(String col, boolean nullable) {
    ask(col, "count");
    if (nullable) {
      ask(col, "null_count");
    }
  }

  void countStar() {
    ask("*", "count");
    outs.add(new Out("count", null, false, DataTypes.LongType));
  }

  void count(String col, boolean nullable) {
    values(col, nullable);
    outs.add(new Out("count", col, nullable, DataTypes.LongType));
  }

  void sum(String col, boolean nullable, DataType type) {
    values(col, nullable);
    ask(col, "sum");
    outs.add(new Out("sum", col, nullable, type));
  }

  void minMax(String op, String col, boolean nullable, DataType type) {
    values(col, nullable);
    ask(col, op);
    outs.add(new Out(op, col, nullable, type));
  }

  ObjectNode query() {
    ObjectNode a = Options.JSON.createObjectNode();
    ops.forEach((col, set) -> {
      var arr = a.putArray(col);
      set.forEach(arr::add);
    });
    return a;
  }

  StructType schema() {
    List<StructField> fs = new ArrayList<>();
    for (Out o : outs) {
      fs.add(DataTypes.createStructField(o.label(), o.type, !o.op.equals("count")));
    }
    return DataTypes.createStructType(fs);
  }

  String describe() {
    StringBuilder b = new StringBuilder("[");
    for (int i = 0; i < outs.size(); i++) {
      b.append(i == 0 ? "" : ", ").append(outs.get(i).label());
    }
    return b.append("]").toString();
  }

  /** The answer (zero rows: no fragment in range) as Spark's row. */
  InternalRow row(VectorSchemaRoot root, String array) {
    Object[] vals = new Object[outs.size()];
    boolean none = root == null || root.getRowCount() == 0;
    for (int i = 0; i < outs.size(); i++) {
      Out o = outs.get(i);
      if (none) {
        vals[i] = o.op.equals("count") ? 0L : null;
        continue;
      }
      if (o.col == null) {
        vals[i] = unsigned(root, "count(*)", array);
        continue;
      }
      long n = unsigned(root, "count(" + o.col + ")", array);
      if (o.nullable) {
        n -= unsigned(root, "null_count(" + o.col + ")", array);
      }
      if (o.op.equals("count")) {
        vals[i] = n;
        continue;
      }
      FieldVector v = vector(root, o.op + "(" + o.col + ")", array);
      if (n == 0 || v.isNull(0)) {
        vals[i] = null;
        continue;
      }
      vals[i] = value(v, o.type, array);
    }
    return new GenericInternalRow(vals);
  }

  private static FieldVector vector(VectorSchemaRoot root, String name, String array) {
    FieldVector v = root.getVector(name);
    if (v == null) {
      throw new TileflightException("INTERNAL", "tileflight: array " + array + ": the aggregate answer has no column " + name);
    }
    return v;
  }

  private static long unsigned(VectorSchemaRoot root, String name, String array) {
    FieldVector v = vector(root, name, array);
    long n = ((Number) v.getObject(0)).longValue();
    if (n < 0) {
      throw new TileflightException("OUT_OF_RANGE", "tileflight: array " + array + ": " + name + " is beyond a Spark long");
    }
    return n;
  }

  private static Object value(FieldVector v, DataType t, String array) {
    Object x = v.getObject(0);
    ArrowType at = v.getField().getType();
    if (t.equals(DataTypes.DoubleType)) {
      return ((Number) x).doubleValue();
    }
    if (t.equals(DataTypes.DateType)) {
      return ((org.apache.arrow.vector.DateDayVector) v).get(0);
    }
    long l;
    if (at instanceof ArrowType.Int && !((ArrowType.Int) at).getIsSigned() && ((ArrowType.Int) at).getBitWidth() == 64) {
      l = ((org.apache.arrow.vector.UInt8Vector) v).get(0);
      if (l < 0) {
        throw new TileflightException("OUT_OF_RANGE", "tileflight: array " + array + ": " + v.getName() + " is beyond a Spark long");
      }
    } else {
      l = x instanceof Character ? (Character) x : ((Number) x).longValue(); // uint16 reads as a char
      if (at instanceof ArrowType.Int && !((ArrowType.Int) at).getIsSigned()) {
        l &= (1L << ((ArrowType.Int) at).getBitWidth()) - 1; // Arrow Java reads unsigned values as signed
      }
    }
    if (t.equals(DataTypes.LongType)) {
      return l;
    }
    if (t.equals(DataTypes.IntegerType)) {
      return (int) l;
    }
    if (t.equals(DataTypes.ShortType)) {
      return (short) l;
    }
    if (t.equals(DataTypes.ByteType)) {
      return (byte) l;
    }
    throw new TileflightException("INTERNAL", "tileflight: array " + array + ": " + v.getName() + ": no Spark value of type " + t);
  }
}
