package sqlsvc

// The values an INSERT takes from the SQL engine (VALUES expressions, rows
// of a SELECT the engine computes) as Arrow columns for the write core.
// Each value is converted by itself, exactly, into a column type the write
// core takes for its attribute (which then checks ranges as DoPut does);
// the engine's own result types are not trusted for this (a VALUES
// table's column takes its first row's type, and the engine's integer
// conversions saturate).

import (
	"context"
	"fmt"
	"math"
	"math/big"
	"strconv"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	arr "github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/dolthub/go-mysql-server/sql/types"
	"github.com/shopspring/decimal"

	"github.com/tileflight/tileflight/errkind"
	"github.com/tileflight/tileflight/format/datatype"
	"github.com/tileflight/tileflight/sqlsvc/tables"
)

// valueColumn builds one Arrow column of engine values for an array
// field.
type valueColumn struct {
	b   arr.Builder
	add func(v any) error
}

// newValueColumn picks the column type for af: int64 (uint64 for
// UINT64) for integers and booleans, the float of the attribute's width,
// timestamps for datetimes, large strings or binaries for strings and
// blobs; an enumerated attribute takes its values' strings or indices.
func newValueColumn(mem memory.Allocator, af tables.Column) (*valueColumn, error) {
	t := af.Type
	if af.CellValNum != 1 && !(af.Var && (t.IsString() || t.IsByteLike())) {
		return nil, errkind.Errorf(errkind.Unimplemented, "attribute %q holds %s cells of several values; INSERT writes single values (write it with DoPut and a list column)", af.Name, t)
	}
	switch {
	case af.Enumerated:
		// the enumeration's values, looked up by the write core
		b := arr.NewLargeStringBuilder(mem)
		return &valueColumn{b: b, add: func(v any) error {
			switch x := v.(type) {
			case nil:
				b.AppendNull()
			case string:
				b.Append(x)
			default:
				return fmt.Errorf("%v (%T): enumerated attribute %q takes its values as strings", v, v, af.Name)
			}
			return nil
		}}, nil
	case t == datatype.Uint64:
		return typedColumn(arr.NewUint64Builder(mem), exactUint), nil
	case t.IsInteger() && !t.IsDatetime() && !t.IsTime():
		return typedColumn(arr.NewInt64Builder(mem), exactInt), nil
	case t == datatype.Float32:
		return typedColumn(arr.NewFloat32Builder(mem), func(v any) (float32, error) {
			f, err := exactFloat(v, 32)
			return float32(f), err
		}), nil
	case t == datatype.Float64:
		return typedColumn(arr.NewFloat64Builder(mem), func(v any) (float64, error) { return exactFloat(v, 64) }), nil
	case t.IsDatetime():
		unit := arrow.Microsecond
		if t == datatype.DatetimeNs {
			unit = arrow.Nanosecond
		}
		return typedColumn(arr.NewTimestampBuilder(mem, &arrow.TimestampType{Unit: unit}), func(v any) (arrow.Timestamp, error) {
			tm, err := datetimeOf(v)
			if unit == arrow.Nanosecond {
				return arrow.Timestamp(tm.UnixNano()), err
			}
			return arrow.Timestamp(tm.UnixMicro()), err
		}), nil
	case t.IsString() || t.IsByteLike():
		var b interface {
			arr.Builder
			AppendString(string)
		}
		if t.IsString() {
			b = arr.NewLargeStringBuilder(mem)
		} else {
			b = arr.NewBinaryBuilder(mem, arrow.BinaryTypes.LargeBinary)
		}
		return &valueColumn{b: b, add: func(v any) error {
			switch x := v.(type) {
			case nil:
				b.AppendNull()
			case string:
				b.AppendString(x)
			case []byte:
				b.AppendString(string(x))
			default:
				return fmt.Errorf("%v (%T) is not a string; the attribute is %s", v, v, t)
			}
			return nil
		}}, nil
	}
	return nil, errkind.Errorf(errkind.Unimplemented, "attribute %q of type %s: INSERT does not write it (write it with DoPut)", af.Name, t)
}

// typedColumn appends each value as conv converts it (nil: null).
func typedColumn[T any, B interface {
	arr.Builder
	Append(T)
}](b B, conv func(v any) (T, error)) *valueColumn {
	return &valueColumn{b: b, add: func(v any) error {
		if v == nil {
			b.AppendNull()
			return nil
		}
		x, err := conv(v)
		if err == nil {
			b.Append(x)
		}
		return err
	}}
}

// exactInt is an engine value as an int64 when it is an integer that fits.
func exactInt(v any) (int64, error) {
	switch x := v.(type) {
	case int8:
		return int64(x), nil
	case int16:
		return int64(x), nil
	case int32:
		return int64(x), nil
	case int64:
		return x, nil
	case int:
		return int64(x), nil
	case uint8:
		return int64(x), nil
	case uint16:
		return int64(x), nil
	case uint32:
		return int64(x), nil
	case bool:
		if x {
			return 1, nil
		}
		return 0, nil
	}
	b, err := exactBig(v)
	if err != nil {
		return 0, err
	}
	if !b.IsInt64() {
		return 0, fmt.Errorf("%v does not fit a 64-bit integer", v)
	}
	return b.Int64(), nil
}

// exactUint is an engine value as a uint64 when it is a non-negative
// integer that fits.
func exactUint(v any) (uint64, error) {
	if u, ok := v.(uint64); ok {
		return u, nil
	}
	b, err := exactBig(v)
	if err != nil {
		return 0, err
	}
	if b.Sign() < 0 || !b.IsUint64() {
		return 0, fmt.Errorf("%v does not fit uint64", v)
	}
	return b.Uint64(), nil
}

// exactBig is a numeric engine value as an integer, if it is one.
func exactBig(v any) (*big.Int, error) {
	switch x := v.(type) {
	case int8, int16, int32, int64, int, uint8, uint16, uint32, bool:
		i, _ := exactInt(v)
		return big.NewInt(i), nil
	case uint64:
		return new(big.Int).SetUint64(x), nil
	case float32:
		return floatInt(float64(x), v)
	case float64:
		return floatInt(x, v)
	case decimal.Decimal:
		if !x.IsInteger() {
			return nil, fmt.Errorf("%s is not an integer", x)
		}
		return x.BigInt(), nil
	}
	return nil, notNumber(v)
}

func floatInt(f float64, v any) (*big.Int, error) {
	if math.IsInf(f, 0) || math.IsNaN(f) || f != math.Trunc(f) {
		return nil, fmt.Errorf("%v is not an integer", v)
	}
	b, _ := big.NewFloat(f).Int(nil)
	return b, nil
}

func notNumber(v any) error {
	if s, ok := v.(string); ok {
		return fmt.Errorf("%q is a string, not a number", s)
	}
	return fmt.Errorf("%v (%T) is not a number", v, v)
}

// exactFloat is a numeric engine value as a float of the given width: a
// DECIMAL (a literal such as 0.1, SUM, AVG) is rounded to the nearest
// float, as a SQL database stores a decimal literal in a FLOAT column;
// integers and binary floats must convert exactly, as in DoPut.
func exactFloat(v any, bits int) (float64, error) {
	switch x := v.(type) {
	case decimal.Decimal:
		return strconv.ParseFloat(x.String(), bits)
	case float32:
		return float64(x), nil
	case float64:
		if bits == 32 && float64(float32(x)) != x && !math.IsNaN(x) {
			return 0, fmt.Errorf("float64 value %v does not convert exactly to float32", x)
		}
		return x, nil
	}
	b, err := exactBig(v)
	if err != nil {
		return 0, err
	}
	bf := new(big.Float).SetInt(b)
	f, acc := bf.Float64()
	if bits == 32 {
		var f32 float32
		f32, acc = bf.Float32()
		f = float64(f32)
	}
	if acc != big.Exact {
		return 0, fmt.Errorf("integer %v does not convert exactly to float%d", v, bits)
	}
	return f, nil
}

// datetimeOf is a DATETIME engine value, or a string written as SQL
// writes datetime literals ('2021-03-01 12:00:00[.ffffff]').
func datetimeOf(v any) (time.Time, error) {
	switch x := v.(type) {
	case time.Time:
		return x.UTC(), nil
	case string:
		t, _, err := types.DatetimeMaxPrecision.Convert(context.Background(), x)
		if tm, ok := t.(time.Time); ok && err == nil {
			return tm.UTC(), nil
		}
		return time.Time{}, fmt.Errorf("%q is not a datetime ('YYYY-MM-DD hh:mm:ss[.ffffff]')", x)
	}
	return time.Time{}, fmt.Errorf("%v (%T) is not a datetime; write it as 'YYYY-MM-DD hh:mm:ss'", v, v)
}
