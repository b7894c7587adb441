package arraymeta

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"unicode/utf16"

	"github.com/tileflight/tileflight/format/datatype"
)

// Constructors for the value kinds tiledb-py writes: Python int -> INT64,
// float -> FLOAT64, str -> STRING_UTF8, bytes -> BLOB.

// Int64s makes an INT64 value.
func Int64s(vs ...int64) Value {
	raw := make([]byte, 0, 8*len(vs))
	for _, x := range vs {
		raw = binary.LittleEndian.AppendUint64(raw, uint64(x))
	}
	return Value{Type: datatype.Int64, Num: uint32(len(vs)), Raw: raw}
}

// Float64s makes a FLOAT64 value.
func Float64s(vs ...float64) Value {
	raw := make([]byte, 0, 8*len(vs))
	for _, x := range vs {
		raw = binary.LittleEndian.AppendUint64(raw, math.Float64bits(x))
	}
	return Value{Type: datatype.Float64, Num: uint32(len(vs)), Raw: raw}
}

// String makes a STRING_UTF8 value.
func String(s string) Value {
	return Value{Type: datatype.StringUTF8, Num: uint32(len(s)), Raw: []byte(s)}
}

// Blob makes a BLOB value.
func Blob(b []byte) Value {
	return Value{Type: datatype.Blob, Num: uint32(len(b)), Raw: append([]byte(nil), b...)}
}

// IsText reports whether the value reads as a string: the character and
// string types, and WKT geometry.
func (v Value) IsText() bool {
	return v.Type == datatype.Char || v.Type.IsString() || v.Type == datatype.GeomWKT
}

// IsBytes reports raw-byte types (BLOB, WKB geometry, ANY).
func (v Value) IsBytes() bool {
	return v.Type == datatype.Blob || v.Type == datatype.GeomWKB || v.Type == datatype.Any
}

// Text decodes a text value to a Go string (UTF-16/UCS-2 and UTF-32/UCS-4
// are converted; the one-byte types are returned as they are).
func (v Value) Text() (string, error) {
	if err := v.sane(); err != nil {
		return "", err
	}
	switch {
	case !v.IsText():
		return "", fmt.Errorf("%s value is not text", v.Type)
	case v.Type.Size() == 2:
		u := make([]uint16, v.Num)
		for i := range u {
			u[i] = binary.LittleEndian.Uint16(v.Raw[2*i:])
		}
		return string(utf16.Decode(u)), nil
	case v.Type.Size() == 4:
		r := make([]rune, v.Num)
		for i := range r {
			r[i] = rune(binary.LittleEndian.Uint32(v.Raw[4*i:]))
		}
		return string(r), nil
	}
	return string(v.Raw), nil
}

func (v Value) sane() error {
	if err := v.check(); err != nil && v.Type != datatype.Any {
		return err
	}
	return nil
}

// Int64s returns the values of an integer-typed value (including BOOL and
// the datetime/time types) as int64. Unsigned 64-bit values above
// math.MaxInt64 are an error.
func (v Value) Int64s() ([]int64, error) {
	if err := v.sane(); err != nil {
		return nil, err
	}
	if !v.Type.IsInteger() {
		return nil, fmt.Errorf("%s value is not an integer", v.Type)
	}
	out := make([]int64, v.Num)
	for i := range out {
		x, ok := v.intAt(i)
		if !ok {
			return nil, fmt.Errorf("%s value %d does not fit int64", v.Type, i)
		}
		out[i] = x
	}
	return out, nil
}

func (v Value) intAt(i int) (int64, bool) {
	b := v.Raw
	switch v.Type {
	case datatype.Int8:
		return int64(int8(b[i])), true
	case datatype.Uint8, datatype.Bool:
		return int64(b[i]), true
	case datatype.Int16:
		return int64(int16(binary.LittleEndian.Uint16(b[2*i:]))), true
	case datatype.Uint16:
		return int64(binary.LittleEndian.Uint16(b[2*i:])), true
	case datatype.Int32:
		return int64(int32(binary.LittleEndian.Uint32(b[4*i:]))), true
	case datatype.Uint32:
		return int64(binary.LittleEndian.Uint32(b[4*i:])), true
	case datatype.Uint64:
		u := binary.LittleEndian.Uint64(b[8*i:])
		return int64(u), u <= math.MaxInt64
	}
	return int64(binary.LittleEndian.Uint64(b[8*i:])), true
}

// Float64s returns the values of a FLOAT32 or FLOAT64 value.
func (v Value) Float64s() ([]float64, error) {
	if err := v.sane(); err != nil {
		return nil, err
	}
	out := make([]float64, v.Num)
	switch v.Type {
	case datatype.Float32:
		for i := range out {
			out[i] = float64(math.Float32frombits(binary.LittleEndian.Uint32(v.Raw[4*i:])))
		}
	case datatype.Float64:
		for i := range out {
			out[i] = math.Float64frombits(binary.LittleEndian.Uint64(v.Raw[8*i:]))
		}
	default:
		return nil, fmt.Errorf("%s value is not a float", v.Type)
	}
	return out, nil
}

// JSON returns the value in the JSON form of the get_metadata action: text
// as a string; raw bytes as a standard base64 string (JSON has no bytes);
// numbers as a scalar for one value and a list otherwise (so an empty
// numeric value is []); BOOL as true/false. Non-finite floats, which JSON
// cannot hold, become the strings "NaN", "Infinity" and "-Infinity".
// 64-bit unsigned integers stay exact (uint64).
func (v Value) JSON() (any, error) {
	if err := v.sane(); err != nil {
		return nil, err
	}
	switch {
	case v.IsText():
		return v.Text()
	case v.IsBytes():
		return base64.StdEncoding.EncodeToString(v.Raw), nil
	}
	items := make([]any, v.Num)
	for i := range items {
		items[i] = v.item(i)
	}
	if len(items) == 1 {
		return items[0], nil
	}
	return items, nil
}

func (v Value) item(i int) any {
	switch v.Type {
	case datatype.Float32:
		return jsonFloat(float64(math.Float32frombits(binary.LittleEndian.Uint32(v.Raw[4*i:]))))
	case datatype.Float64:
		return jsonFloat(math.Float64frombits(binary.LittleEndian.Uint64(v.Raw[8*i:])))
	case datatype.Bool:
		return v.Raw[i] != 0
	case datatype.Uint64:
		return binary.LittleEndian.Uint64(v.Raw[8*i:])
	}
	x, _ := v.intAt(i)
	return x
}

func jsonFloat(f float64) any {
	switch {
	case math.IsNaN(f):
		return "NaN"
	case math.IsInf(f, 1):
		return "Infinity"
	case math.IsInf(f, -1):
		return "-Infinity"
	}
	return f
}

// FromJSON makes a value from a decoded JSON value (as encoding/json
// produces with UseNumber, or plain float64), choosing types the way
// tiledb-py does for Python values: a string -> STRING_UTF8, an integral
// number -> INT64, any other number -> FLOAT64, a list of numbers -> INT64
// if all are integral else FLOAT64, an empty list -> INT32 with no values,
// true/false -> INT64 1/0 (Python's bool is an int). Nested lists,
// objects and null are refused.
func FromJSON(x any) (Value, error) {
	switch t := x.(type) {
	case string:
		return String(t), nil
	case []any:
		if len(t) == 0 {
			return Value{Type: datatype.Int32}, nil
		}
		ints := make([]int64, 0, len(t))
		floats := make([]float64, 0, len(t))
		allInt := true
		for i, e := range t {
			iv, fv, isInt, err := jsonNumber(e)
			if err != nil {
				return Value{}, fmt.Errorf("list item %d: %w", i, err)
			}
			allInt = allInt && isInt
			ints = append(ints, iv)
			floats = append(floats, fv)
		}
		if allInt {
			return Int64s(ints...), nil
		}
		return Float64s(floats...), nil
	default:
		iv, fv, isInt, err := jsonNumber(x)
		if err != nil {
			return Value{}, err
		}
		if isInt {
			return Int64s(iv), nil
		}
		return Float64s(fv), nil
	}
}

func jsonNumber(x any) (int64, float64, bool, error) {
	switch t := x.(type) {
	case bool:
		if t {
			return 1, 1, true, nil
		}
		return 0, 0, true, nil
	case json.Number:
		if i, err := t.Int64(); err == nil {
			return i, float64(i), true, nil
		}
		f, err := t.Float64()
		if err != nil {
			return 0, 0, false, fmt.Errorf("number %s: %w", t, err)
		}
		return 0, f, false, nil
	case float64:
		if t == math.Trunc(t) && math.Abs(t) < 1<<53 {
			return int64(t), t, true, nil
		}
		return 0, t, false, nil
	case int:
		return int64(t), float64(t), true, nil
	case int64:
		return t, float64(t), true, nil
	}
	return 0, 0, false, fmt.Errorf("unsupported metadata value %T (want a string, a number or a list of numbers)", x)
}
