package sqlsvc

// Types between Arrow (docs/protocol.md, "Arrow type mapping") and the SQL engine: array columns become
// engine columns, engine results become Arrow columns.

import (
	"context"
	"fmt"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	arr "github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
	gms "github.com/dolthub/go-mysql-server/sql"
	"github.com/dolthub/go-mysql-server/sql/types"
	"github.com/dolthub/vitess/go/sqltypes"
	"github.com/shopspring/decimal"
)

// gmsType is the engine type of an Arrow column type. Types the engine
// has no counterpart for (lists, fixed-size lists) are given to it as
// their text rendering.
func gmsType(t arrow.DataType) (gms.Type, error) {
	switch t.ID() {
	case arrow.BOOL:
		return types.Boolean, nil
	case arrow.INT8:
		return types.Int8, nil
	case arrow.INT16:
		return types.Int16, nil
	case arrow.INT32:
		return types.Int32, nil
	case arrow.INT64:
		return types.Int64, nil
	case arrow.UINT8:
		return types.Uint8, nil
	case arrow.UINT16:
		return types.Uint16, nil
	case arrow.UINT32:
		return types.Uint32, nil
	case arrow.UINT64:
		return types.Uint64, nil
	case arrow.FLOAT16, arrow.FLOAT32:
		return types.Float32, nil
	case arrow.FLOAT64:
		return types.Float64, nil
	case arrow.STRING, arrow.LARGE_STRING, arrow.STRING_VIEW:
		return types.LongText, nil
	case arrow.BINARY, arrow.LARGE_BINARY, arrow.FIXED_SIZE_BINARY, arrow.BINARY_VIEW:
		return types.LongBlob, nil
	case arrow.TIMESTAMP:
		return types.DatetimeMaxPrecision, nil
	case arrow.DATE32, arrow.DATE64:
		return types.Date, nil
	case arrow.DICTIONARY:
		return gmsType(t.(*arrow.DictionaryType).ValueType)
	}
	return types.LongText, nil
}

// toGMS returns a getter of a column's row values as the engine holds
// them (nil for null).
func toGMS(a arrow.Array) func(int) any {
	nullable := func(get func(int) any) func(int) any {
		if a.NullN() == 0 {
			return get
		}
		return func(i int) any {
			if a.IsNull(i) {
				return nil
			}
			return get(i)
		}
	}
	switch c := a.(type) {
	case *arr.Boolean:
		return nullable(func(i int) any {
			if c.Value(i) {
				return int8(1)
			}
			return int8(0)
		})
	case *arr.Int8:
		return nullable(func(i int) any { return c.Value(i) })
	case *arr.Int16:
		return nullable(func(i int) any { return c.Value(i) })
	case *arr.Int32:
		return nullable(func(i int) any { return c.Value(i) })
	case *arr.Int64:
		return nullable(func(i int) any { return c.Value(i) })
	case *arr.Uint8:
		return nullable(func(i int) any { return c.Value(i) })
	case *arr.Uint16:
		return nullable(func(i int) any { return c.Value(i) })
	case *arr.Uint32:
		return nullable(func(i int) any { return c.Value(i) })
	case *arr.Uint64:
		return nullable(func(i int) any { return c.Value(i) })
	case *arr.Float16:
		return nullable(func(i int) any { return c.Value(i).Float32() })
	case *arr.Float32:
		return nullable(func(i int) any { return c.Value(i) })
	case *arr.Float64:
		return nullable(func(i int) any { return c.Value(i) })
	case *arr.String:
		return nullable(func(i int) any { return c.Value(i) })
	case *arr.LargeString:
		return nullable(func(i int) any { return c.Value(i) })
	case *arr.StringView:
		return nullable(func(i int) any { return c.Value(i) })
	case *arr.Binary:
		return nullable(func(i int) any { return append([]byte{}, c.Value(i)...) })
	case *arr.LargeBinary:
		return nullable(func(i int) any { return append([]byte{}, c.Value(i)...) })
	case *arr.FixedSizeBinary:
		return nullable(func(i int) any { return append([]byte{}, c.Value(i)...) })
	case *arr.Timestamp:
		unit := c.DataType().(*arrow.TimestampType).Unit
		return nullable(func(i int) any { return c.Value(i).ToTime(unit).UTC() })
	case *arr.Date32:
		return nullable(func(i int) any { return c.Value(i).ToTime().UTC() })
	case *arr.Date64:
		return nullable(func(i int) any { return c.Value(i).ToTime().UTC() })
	case *arr.Dictionary:
		inner := toGMS(c.Dictionary())
		return nullable(func(i int) any { return inner(c.GetValueIndex(i)) })
	}
	return nullable(func(i int) any { return a.ValueStr(i) })
}

// arrowType is the Arrow type of an engine result column.
func arrowType(t gms.Type) arrow.DataType {
	if types.IsBoolean(t) {
		return arrow.FixedWidthTypes.Boolean
	}
	switch t.Type() {
	case sqltypes.Int8:
		return arrow.PrimitiveTypes.Int8
	case sqltypes.Int16:
		return arrow.PrimitiveTypes.Int16
	case sqltypes.Int24, sqltypes.Int32:
		return arrow.PrimitiveTypes.Int32
	case sqltypes.Int64:
		return arrow.PrimitiveTypes.Int64
	case sqltypes.Uint8:
		return arrow.PrimitiveTypes.Uint8
	case sqltypes.Uint16:
		return arrow.PrimitiveTypes.Uint16
	case sqltypes.Uint24, sqltypes.Uint32:
		return arrow.PrimitiveTypes.Uint32
	case sqltypes.Uint64, sqltypes.Bit:
		return arrow.PrimitiveTypes.Uint64
	case sqltypes.Year:
		return arrow.PrimitiveTypes.Int16
	case sqltypes.Float32:
		return arrow.PrimitiveTypes.Float32
	case sqltypes.Float64:
		return arrow.PrimitiveTypes.Float64
	case sqltypes.Decimal:
		if dt, ok := t.(gms.DecimalType); ok && dt.Precision() <= 38 && dt.Precision() > 0 {
			return &arrow.Decimal128Type{Precision: int32(dt.Precision()), Scale: int32(dt.Scale())}
		}
		return arrow.PrimitiveTypes.Float64
	case sqltypes.Date:
		return arrow.FixedWidthTypes.Date32
	case sqltypes.Datetime, sqltypes.Timestamp:
		return &arrow.TimestampType{Unit: arrow.Microsecond}
	case sqltypes.Null:
		return arrow.Null
	case sqltypes.Blob, sqltypes.Binary, sqltypes.VarBinary:
		return arrow.BinaryTypes.LargeBinary
	}
	return arrow.BinaryTypes.LargeString
}

// appender adds one engine value to an Arrow builder, converting it to
// the builder's type.
func appender(b arr.Builder, t gms.Type) func(v any) error {
	conv := func(v any) (any, error) {
		out, _, err := t.Convert(context.Background(), v)
		return out, err
	}
	switch bb := b.(type) {
	case *arr.NullBuilder:
		return func(any) error { bb.AppendNull(); return nil }
	case *arr.BooleanBuilder:
		return func(v any) error {
			if v == nil {
				bb.AppendNull()
				return nil
			}
			switch x := v.(type) {
			case bool:
				bb.Append(x)
				return nil
			}
			i, _, err := types.Int64.Convert(context.Background(), v)
			if err != nil {
				return err
			}
			bb.Append(i.(int64) != 0)
			return nil
		}
	case *arr.Int8Builder:
		return intAppender(bb.AppendNull, func(i int64) { bb.Append(int8(i)) }, types.Int64)
	case *arr.Int16Builder:
		return intAppender(bb.AppendNull, func(i int64) { bb.Append(int16(i)) }, types.Int64)
	case *arr.Int32Builder:
		return intAppender(bb.AppendNull, func(i int64) { bb.Append(int32(i)) }, types.Int64)
	case *arr.Int64Builder:
		return intAppender(bb.AppendNull, func(i int64) { bb.Append(i) }, types.Int64)
	case *arr.Uint8Builder:
		return uintAppender(bb.AppendNull, func(i uint64) { bb.Append(uint8(i)) })
	case *arr.Uint16Builder:
		return uintAppender(bb.AppendNull, func(i uint64) { bb.Append(uint16(i)) })
	case *arr.Uint32Builder:
		return uintAppender(bb.AppendNull, func(i uint64) { bb.Append(uint32(i)) })
	case *arr.Uint64Builder:
		return uintAppender(bb.AppendNull, func(i uint64) { bb.Append(i) })
	case *arr.Float32Builder:
		return func(v any) error {
			if v == nil {
				bb.AppendNull()
				return nil
			}
			f, _, err := types.Float64.Convert(context.Background(), v)
			if err != nil {
				return err
			}
			bb.Append(float32(f.(float64)))
			return nil
		}
	case *arr.Float64Builder:
		return func(v any) error {
			if v == nil {
				bb.AppendNull()
				return nil
			}
			f, _, err := types.Float64.Convert(context.Background(), v)
			if err != nil {
				return err
			}
			bb.Append(f.(float64))
			return nil
		}
	case *arr.Decimal128Builder:
		scale := bb.Type().(*arrow.Decimal128Type).Scale
		return func(v any) error {
			if v == nil {
				bb.AppendNull()
				return nil
			}
			x, err := conv(v)
			if err != nil {
				return err
			}
			d, ok := x.(decimal.Decimal)
			if !ok {
				return fmt.Errorf("decimal result %v of type %T", x, x)
			}
			n := d.Shift(scale).Round(0).BigInt()
			bb.Append(decimal128.FromBigInt(n))
			return nil
		}
	case *arr.Date32Builder:
		return func(v any) error {
			if v == nil {
				bb.AppendNull()
				return nil
			}
			x, err := conv(v)
			if err != nil {
				return err
			}
			tm, ok := x.(time.Time)
			if !ok {
				return fmt.Errorf("date result %v of type %T", x, x)
			}
			bb.Append(arrow.Date32FromTime(tm))
			return nil
		}
	case *arr.TimestampBuilder:
		return func(v any) error {
			if v == nil {
				bb.AppendNull()
				return nil
			}
			x, err := conv(v)
			if err != nil {
				return err
			}
			tm, ok := x.(time.Time)
			if !ok {
				return fmt.Errorf("datetime result %v of type %T", x, x)
			}
			bb.Append(arrow.Timestamp(tm.UnixMicro()))
			return nil
		}
	case *arr.BinaryBuilder: // large_binary too
		return func(v any) error {
			switch x := v.(type) {
			case nil:
				bb.AppendNull()
			case []byte:
				bb.Append(x)
			case string:
				bb.AppendString(x)
			default:
				bb.AppendString(fmt.Sprint(x))
			}
			return nil
		}
	case *arr.LargeStringBuilder:
		return func(v any) error {
			switch x := v.(type) {
			case nil:
				bb.AppendNull()
			case string:
				bb.Append(x)
			case []byte:
				bb.Append(string(x))
			default:
				s, _, err := types.LongText.Convert(context.Background(), v)
				if err != nil {
					bb.Append(fmt.Sprint(v))
					return nil
				}
				bb.Append(fmt.Sprint(s))
			}
			return nil
		}
	}
	return func(v any) error { return fmt.Errorf("no Arrow builder for %s", b.Type()) }
}

func intAppender(null func(), put func(int64), t gms.Type) func(v any) error {
	return func(v any) error {
		if v == nil {
			null()
			return nil
		}
		i, _, err := t.Convert(context.Background(), v)
		if err != nil {
			return err
		}
		put(i.(int64))
		return nil
	}
}

func uintAppender(null func(), put func(uint64)) func(v any) error {
	return func(v any) error {
		if v == nil {
			null()
			return nil
		}
		i, _, err := types.Uint64.Convert(context.Background(), v)
		if err != nil {
			return err
		}
		put(i.(uint64))
		return nil
	}
}
