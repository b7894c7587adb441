package io.tileflight.spark;

import java.math.BigDecimal;
import java.util.ArrayList;
import java.util.List;
import org.apache.arrow.memory.BufferAllocator;
import org.apache.arrow.vector.BaseFixedWidthVector;
import org.apache.arrow.vector.BigIntVector;
import org.apache.arrow.vector.DateDayVector;
import org.apache.arrow.vector.DateMilliVector;
import org.apache.arrow.vector.DecimalVector;
import org.apache.arrow.vector.FieldVector;
import org.apache.arrow.vector.FixedSizeBinaryVector;
import org.apache.arrow.vector.IntVector;
import org.apache.arrow.vector.SmallIntVector;
import org.apache.arrow.vector.TimeMicroVector;
import org.apache.arrow.vector.TimeMilliVector;
import org.apache.arrow.vector.TimeNanoVector;
import org.apache.arrow.vector.TimeSecVector;
import org.apache.arrow.vector.TimeStampMicroVector;
import org.apache.arrow.vector.TimeStampVector;
import org.apache.arrow.vector.UInt1Vector;
import org.apache.arrow.vector.UInt2Vector;
import org.apache.arrow.vector.UInt4Vector;
import org.apache.arrow.vector.UInt8Vector;
import org.apache.arrow.vector.ValueVector;
import org.apache.arrow.vector.VarBinaryVector;
import org.apache.arrow.vector.complex.BaseListVector;
import org.apache.arrow.vector.complex.FixedSizeListVector;
import org.apache.arrow.vector.complex.LargeListVector;
import org.apache.arrow.vector.complex.ListVector;
import org.apache.arrow.vector.dictionary.Dictionary;
import org.apache.arrow.vector.dictionary.DictionaryEncoder;
import org.apache.arrow.vector.dictionary.DictionaryProvider;
import org.apache.arrow.vector.types.TimeUnit;
import org.apache.arrow.vector.types.pojo.ArrowType;
import org.apache.arrow.vector.types.pojo.Field;
import org.apache.arrow.vector.types.pojo.FieldType;
import org.apache.arrow.vector.types.pojo.Schema;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.vectorized.ArrowColumnVector;
import org.apache.spark.sql.vectorized.ColumnVector;

/**
 * Arrow (the daemon's types, docs/protocol.md "Arrow type mapping") to Spark, as the Python
 * data source maps them: unsigned integers widen to the next signed type (uint64 to
 * decimal(20,0)), timestamps of any unit become Spark timestamps (microseconds, UTC), times
 * their ticks as long, fixed-size binary and large binary become binary, enumerations their
 * values, fixed-size and large lists arrays.
 *
 * <p>Spark's ArrowColumnVector reads the common types in place (signed integers, floats,
 * bool, strings, binary, date32, timestamp[us], lists); the others are copied, batch by
 * batch, into a vector of the Spark-readable type.
 */
final class ArrowTypes {
  private ArrowTypes() {}

  static StructType sparkSchema(Schema schema) {
    List<StructField> fields = new ArrayList<>();
    for (Field f : schema.getFields()) {
      fields.add(DataTypes.createStructField(f.getName(), sparkType(f), f.isNullable()));
    }
    return DataTypes.createStructType(fields);
  }

  static DataType sparkType(Field f) {
    ArrowType t = f.getDictionary() != null ? valueType(f) : f.getType();
    return sparkType(f.getName(), t, f.getChildren());
  }

  private static ArrowType valueType(Field f) {
    // A dictionary field's own type is its values' type (Arrow Java keeps the index type in
    // the DictionaryEncoding).
    return f.getType();
  }

  static DataType sparkType(String name, ArrowType t, List<Field> children) {
    switch (t.getTypeID()) {
      case Bool:
        return DataTypes.BooleanType;
      case Int: {
        ArrowType.Int i = (ArrowType.Int) t;
        int w = i.getBitWidth();
        if (i.getIsSigned()) {
          return w == 8 ? DataTypes.ByteType : w == 16 ? DataTypes.ShortType : w == 32 ? DataTypes.IntegerType : DataTypes.LongType;
        }
        return w == 8 ? DataTypes.ShortType : w == 16 ? DataTypes.IntegerType : w == 32 ? DataTypes.LongType : DataTypes.createDecimalType(20, 0);
      }
      case FloatingPoint:
        switch (((ArrowType.FloatingPoint) t).getPrecision()) {
          case SINGLE:
            return DataTypes.FloatType;
          case DOUBLE:
            return DataTypes.DoubleType;
          default:
            break;
        }
        break;
      case Utf8:
      case LargeUtf8:
        return DataTypes.StringType;
      case Binary:
      case LargeBinary:
      case FixedSizeBinary:
        return DataTypes.BinaryType;
      case Timestamp:
        return DataTypes.TimestampType;
      case Date:
        return DataTypes.DateType;
      case Time:
        return DataTypes.LongType;
      case FixedSizeList:
      case LargeList:
      case List: {
        Field c = children.get(0);
        DataType ct = sparkType(c);
        if (!(ct.equals(DataTypes.ByteType) || ct.equals(DataTypes.ShortType) || ct.equals(DataTypes.IntegerType)
            || ct.equals(DataTypes.LongType) || ct.equals(DataTypes.FloatType) || ct.equals(DataTypes.DoubleType)
            || ct.equals(DataTypes.BooleanType)) || !isDirect(c.getType())) {
          break;
        }
        return DataTypes.createArrayType(ct, c.isNullable());
      }
      default:
        break;
    }
    throw new TileflightException("UNIMPLEMENTED", "tileflight: column " + name + ": Arrow type " + t + " has no Spark type in the connector");
  }

  /** Whether Spark's ArrowColumnVector reads this type as our Spark type, in place. */
  static boolean isDirect(ArrowType t) {
    switch (t.getTypeID()) {
      case Bool:
      case Utf8:
      case LargeUtf8:
      case Binary:
      case LargeBinary:
        return true;
      case Int:
        return ((ArrowType.Int) t).getIsSigned();
      case FloatingPoint:
        return ((ArrowType.FloatingPoint) t).getPrecision() != org.apache.arrow.vector.types.FloatingPointPrecision.HALF;
      case Date:
        return ((ArrowType.Date) t).getUnit() == org.apache.arrow.vector.types.DateUnit.DAY;
      case Timestamp:
        // TimeStampMicroVector: Spark's accessor reads the microseconds (getLong), which is
        // what TimestampType holds.
        return ((ArrowType.Timestamp) t).getUnit() == TimeUnit.MICROSECOND && ((ArrowType.Timestamp) t).getTimezone() == null;
      default:
        return false;
    }
  }

  /** Turns one column of each batch into a Spark ColumnVector; owns what it copies. */
  abstract static class Column implements AutoCloseable {
    abstract ColumnVector convert(FieldVector v, DictionaryProvider dicts);

    @Override
    public void close() {}
  }

  static Column column(Field f, BufferAllocator alloc) {
    if (f.getDictionary() != null) {
      return new DictColumn(f, alloc);
    }
    if (isDirect(f.getType())) {
      return new Direct();
    }
    sparkType(f); // refuses what has no Spark type
    return new Copy(f, alloc);
  }

  /** Spark reads the vector in place. ArrowColumnVector is a thin view, made per batch. */
  static final class Direct extends Column {
    private ValueVector last;
    private ArrowColumnVector view;

    @Override
    ColumnVector convert(FieldVector v, DictionaryProvider dicts) {
      if (v != last) { // a Flight stream refills the same vectors batch after batch
        last = v;
        view = new ArrowColumnVector(v);
      }
      return view;
    }
  }

  /** An enumeration: its values (decoded per batch), then converted as the value type is. */
  static final class DictColumn extends Column {
    private final Field field;
    private final BufferAllocator alloc;
    private ValueVector decoded;
    private Column inner;

    DictColumn(Field f, BufferAllocator alloc) {
      this.field = f;
      this.alloc = alloc;
    }

    @Override
    ColumnVector convert(FieldVector v, DictionaryProvider dicts) {
      Dictionary d = dicts.lookup(field.getDictionary().getId());
      if (d == null) {
        throw new TileflightException("INTERNAL", "tileflight: column " + field.getName() + ": the stream has no dictionary " + field.getDictionary().getId());
      }
      if (decoded != null) {
        decoded.close();
      }
      decoded = DictionaryEncoder.decode(v, d, alloc);
      if (inner == null) {
        inner = column(decoded.getField(), alloc);
      }
      if (inner instanceof Direct) {
        return new ArrowColumnVector(decoded);
      }
      return inner.convert((FieldVector) decoded, dicts);
    }

    @Override
    public void close() {
      if (decoded != null) {
        decoded.close();
      }
      if (inner != null) {
        inner.close();
      }
    }
  }

  /** Copies each batch into a vector Spark reads (see the class comment for the types). */
  static final class Copy extends Column {
    private final Field field;
    private final FieldVector out;

    Copy(Field f, BufferAllocator alloc) {
      this.field = f;
      this.out = target(f).createVector(alloc);
    }

    private static Field target(Field f) {
      ArrowType t = f.getType();
      FieldType ft;
      switch (t.getTypeID()) {
        case Int: {
          int w = ((ArrowType.Int) t).getBitWidth();
          ArrowType o = w == 64 ? new ArrowType.Decimal(20, 0, 128) : new ArrowType.Int(w * 2, true);
          ft = new FieldType(f.isNullable(), o, null);
          break;
        }
        case Timestamp:
          ft = new FieldType(f.isNullable(), new ArrowType.Timestamp(TimeUnit.MICROSECOND, null), null);
          break;
        case Date:
          ft = new FieldType(f.isNullable(), new ArrowType.Date(org.apache.arrow.vector.types.DateUnit.DAY), null);
          break;
        case Time:
          ft = new FieldType(f.isNullable(), new ArrowType.Int(64, true), null);
          break;
        case FixedSizeBinary:
          ft = new FieldType(f.isNullable(), ArrowType.Binary.INSTANCE, null);
          break;
        case FixedSizeList:
        case LargeList:
          return new Field(f.getName(), new FieldType(f.isNullable(), ArrowType.List.INSTANCE, null), f.getChildren());
        default:
          throw new TileflightException("UNIMPLEMENTED", "tileflight: column " + f.getName() + ": Arrow type " + t + " has no Spark type in the connector");
      }
      return new Field(f.getName(), ft, null);
    }

    @Override
    ColumnVector convert(FieldVector v, DictionaryProvider dicts) {
      int n = v.getValueCount();
      out.clear();
      if (out instanceof ListVector) {
        copyList((BaseListVector) v, (ListVector) out, n);
      } else if (out instanceof VarBinaryVector) {
        copyFixedBinary((FixedSizeBinaryVector) v, (VarBinaryVector) out, n);
      } else {
        ((BaseFixedWidthVector) out).allocateNew(n);
        copyValues(v, n);
      }
      out.setValueCount(n);
      return new ArrowColumnVector(out);
    }

    private void copyValues(FieldVector v, int n) {
      for (int i = 0; i < n; i++) {
        if (v.isNull(i)) {
          ((BaseFixedWidthVector) out).setNull(i);
          continue;
        }
        if (v instanceof UInt1Vector) {
          ((SmallIntVector) out).set(i, (short) (((UInt1Vector) v).get(i) & 0xff));
        } else if (v instanceof UInt2Vector) {
          ((IntVector) out).set(i, ((UInt2Vector) v).get(i));
        } else if (v instanceof UInt4Vector) {
          ((BigIntVector) out).set(i, ((UInt4Vector) v).get(i) & 0xffffffffL);
        } else if (v instanceof UInt8Vector) {
          ((DecimalVector) out).set(i, new BigDecimal(((UInt8Vector) v).getObjectNoOverflow(i)));
        } else if (v instanceof TimeStampVector) {
          long x = ((TimeStampVector) v).get(i);
          TimeUnit u = ((ArrowType.Timestamp) field.getType()).getUnit();
          long us = u == TimeUnit.SECOND ? Math.multiplyExact(x, 1_000_000L)
              : u == TimeUnit.MILLISECOND ? Math.multiplyExact(x, 1000L)
              : u == TimeUnit.NANOSECOND ? Math.floorDiv(x, 1000L) : x;
          ((TimeStampMicroVector) out).set(i, us);
        } else if (v instanceof DateMilliVector) {
          ((DateDayVector) out).set(i, (int) Math.floorDiv(((DateMilliVector) v).get(i), 86_400_000L));
        } else if (v instanceof TimeSecVector) {
          ((BigIntVector) out).set(i, ((TimeSecVector) v).get(i));
        } else if (v instanceof TimeMilliVector) {
          ((BigIntVector) out).set(i, ((TimeMilliVector) v).get(i));
        } else if (v instanceof TimeMicroVector) {
          ((BigIntVector) out).set(i, ((TimeMicroVector) v).get(i));
        } else if (v instanceof TimeNanoVector) {
          ((BigIntVector) out).set(i, ((TimeNanoVector) v).get(i));
        } else {
          throw new TileflightException("UNIMPLEMENTED", "tileflight: column " + field.getName() + ": cannot convert " + v.getClass().getSimpleName());
        }
      }
    }

    private void copyFixedBinary(FixedSizeBinaryVector v, VarBinaryVector o, int n) {
      o.allocateNew(n);
      for (int i = 0; i < n; i++) {
        if (v.isNull(i)) {
          o.setNull(i);
        } else {
          o.setSafe(i, v.get(i));
        }
      }
    }

    private void copyList(BaseListVector v, ListVector o, int n) {
      o.allocateNew();
      ValueVector src = v instanceof FixedSizeListVector ? ((FixedSizeListVector) v).getDataVector() : ((LargeListVector) v).getDataVector();
      ValueVector dst = o.getDataVector();
      int k = 0;
      for (int i = 0; i < n; i++) {
        if (v.isNull(i)) {
          o.setNull(i);
          continue;
        }
        int start = o.startNewValue(i);
        int lo = v.getElementStartIndex(i);
        int hi = v.getElementEndIndex(i);
        for (int j = lo; j < hi; j++) {
          dst.copyFromSafe(j, start + (j - lo), src);
        }
        o.endValue(i, hi - lo);
        k = start + (hi - lo);
      }
      dst.setValueCount(k);
    }

    @Override
    public void close() {
      out.close();
    }
  }
}
