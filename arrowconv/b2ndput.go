package arrowconv

// This file converts Arrow columns to the items of a Blosc2 NDArray
// (.b2nd): the write direction of b2nd.go.

import (
	"encoding/binary"
	"fmt"
	"math"
	"unicode/utf8"

	"github.com/apache/arrow-go/v18/arrow"
	arrowarray "github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/float16"

	"github.com/tileflight/tileflight/b2nd"
)

// B2NDFieldBytes writes column c's values into the items of out (one
// item of size is per row, field f at its offset, in the dtype's byte
// order): the Arrow -> .b2nd direction of B2NDType, for DoPut. A value
// that does not fit f's dtype exactly (an integer out of range, a float
// that would round, a string too long), a null where the dtype has none,
// or a column of another type is an error naming the row.
func B2NDFieldBytes(f b2nd.Field, c arrow.Array, out []byte, is int) error {
	n := c.Len()
	put := func(i int, b []byte) { copy(out[i*is+f.Offset:i*is+f.Offset+f.Size], b) }
	var tmp [16]byte
	if c.NullN() > 0 && f.Kind != 'M' && f.Kind != 'm' {
		return fmt.Errorf("%d nulls, but dtype %s has no null", c.NullN(), f.Dtype)
	}
	if f.Count > 0 {
		// A subarray field: a fixed_size_list column of Count elements,
		// each converted as a value of the element type.
		v, ok := c.(*arrowarray.FixedSizeList)
		if !ok || v.DataType().(*arrow.FixedSizeListType).Len() != int32(f.Count) {
			want, _, _ := B2NDType(f)
			return fmt.Errorf("want %s, got %s", want, c.DataType())
		}
		e := f
		e.Count, e.Shape, e.Size, e.Offset = 0, nil, f.ElemSize(), 0
		off := int64(v.Data().Offset()) * int64(f.Count)
		elems := arrowarray.NewSlice(v.ListValues(), off, off+int64(n*f.Count))
		defer elems.Release()
		raw := make([]byte, n*f.Size)
		if err := B2NDFieldBytes(e, elems, raw, e.Size); err != nil {
			return err
		}
		for i := 0; i < n; i++ {
			put(i, raw[i*f.Size:(i+1)*f.Size])
		}
		return nil
	}
	order := func(b []byte, w int) []byte {
		if f.Big {
			for i := 0; i+w <= len(b); i += w {
				for j := 0; j < w/2; j++ {
					b[i+j], b[i+w-1-j] = b[i+w-1-j], b[i+j]
				}
			}
		}
		return b
	}
	switch f.Kind {
	case 'b':
		v, ok := c.(*arrowarray.Boolean)
		if !ok {
			return fmt.Errorf("want bool, got %s", c.DataType())
		}
		for i := 0; i < n; i++ {
			b := byte(0)
			if v.Value(i) {
				b = 1
			}
			put(i, []byte{b})
		}
		return nil
	case 'i', 'u':
		for i := 0; i < n; i++ {
			var u uint64
			switch v := c.(type) {
			case *arrowarray.Int8:
				u = uint64(int64(v.Value(i)))
			case *arrowarray.Int16:
				u = uint64(int64(v.Value(i)))
			case *arrowarray.Int32:
				u = uint64(int64(v.Value(i)))
			case *arrowarray.Int64:
				u = uint64(v.Value(i))
			case *arrowarray.Uint8:
				u = uint64(v.Value(i))
			case *arrowarray.Uint16:
				u = uint64(v.Value(i))
			case *arrowarray.Uint32:
				u = uint64(v.Value(i))
			case *arrowarray.Uint64:
				u = v.Value(i)
			default:
				return fmt.Errorf("want an integer column, got %s", c.DataType())
			}
			signedIn := c.DataType().ID() == arrow.INT8 || c.DataType().ID() == arrow.INT16 || c.DataType().ID() == arrow.INT32 || c.DataType().ID() == arrow.INT64
			bits := 8 * f.Size
			if f.Kind == 'i' {
				x := int64(u)
				if !signedIn && u > math.MaxInt64 || bits < 64 && (x < -(1<<(bits-1)) || x >= 1<<(bits-1)) {
					return fmt.Errorf("row %d: %d does not fit %s", i, x, f.Dtype)
				}
			} else if signedIn && int64(u) < 0 || bits < 64 && u >= 1<<bits {
				return fmt.Errorf("row %d: value does not fit %s", i, f.Dtype)
			}
			binary.LittleEndian.PutUint64(tmp[:], u)
			put(i, order(tmp[:f.Size], f.Size))
		}
		return nil
	case 'f':
		for i := 0; i < n; i++ {
			var x float64
			switch v := c.(type) {
			case *arrowarray.Float16:
				x = float64(v.Value(i).Float32())
			case *arrowarray.Float32:
				x = float64(v.Value(i))
			case *arrowarray.Float64:
				x = v.Value(i)
			default:
				return fmt.Errorf("want a float column, got %s", c.DataType())
			}
			switch f.Size {
			case 2:
				h := float16.New(float32(x))
				if !math.IsNaN(x) && float64(h.Float32()) != x {
					return fmt.Errorf("row %d: %v does not fit float16 exactly", i, x)
				}
				binary.LittleEndian.PutUint16(tmp[:], h.Uint16())
			case 4:
				if !math.IsNaN(x) && float64(float32(x)) != x {
					return fmt.Errorf("row %d: %v does not fit float32 exactly", i, x)
				}
				binary.LittleEndian.PutUint32(tmp[:], math.Float32bits(float32(x)))
			default:
				binary.LittleEndian.PutUint64(tmp[:], math.Float64bits(x))
			}
			put(i, order(tmp[:f.Size], f.Size))
		}
		return nil
	case 'c':
		v, ok := c.(*arrowarray.FixedSizeList)
		want, _, _ := B2NDType(f)
		// The child's nullability does not matter (it may hold no nulls).
		wl := want.(*arrow.FixedSizeListType)
		if !ok || v.DataType().(*arrow.FixedSizeListType).Len() != 2 || !arrow.TypeEqual(v.DataType().(*arrow.FixedSizeListType).Elem(), wl.Elem()) || v.ListValues().NullN() > 0 {
			return fmt.Errorf("want %s, got %s", want, c.DataType())
		}
		vals := v.ListValues().Data().Buffers()[1].Bytes()[v.ListValues().Data().Offset()*f.Size/2:]
		for i := 0; i < n; i++ {
			k := (v.Data().Offset() + i) * f.Size
			copy(tmp[:f.Size], vals[k:k+f.Size])
			put(i, order(tmp[:f.Size], f.Size/2))
		}
		return nil
	case 'M', 'm':
		want, _, _ := B2NDType(f)
		if !arrow.TypeEqual(c.DataType(), want) {
			return fmt.Errorf("want %s, got %s", want, c.DataType())
		}
		for i := 0; i < n; i++ {
			x := int64(math.MinInt64)
			if c.IsValid(i) {
				switch v := c.(type) {
				case *arrowarray.Timestamp:
					x = int64(v.Value(i))
				case *arrowarray.Date32:
					x = int64(v.Value(i))
				case *arrowarray.Duration:
					x = int64(v.Value(i))
				case *arrowarray.Int64:
					x = v.Value(i)
				}
			}
			binary.LittleEndian.PutUint64(tmp[:], uint64(x))
			put(i, order(tmp[:8], 8))
		}
		return nil
	case 'S', 'V':
		for i := 0; i < n; i++ {
			var b []byte
			switch v := c.(type) {
			case *arrowarray.FixedSizeBinary:
				b = v.Value(i)
			case *arrowarray.Binary:
				b = v.Value(i)
			case *arrowarray.LargeBinary:
				b = v.Value(i)
			case *arrowarray.String:
				b = []byte(v.Value(i))
			case *arrowarray.LargeString:
				b = []byte(v.Value(i))
			default:
				return fmt.Errorf("want binary, got %s", c.DataType())
			}
			if len(b) > f.Size || f.Kind == 'V' && len(b) != f.Size {
				return fmt.Errorf("row %d: %d bytes for %s", i, len(b), f.Dtype)
			}
			item := make([]byte, f.Size)
			copy(item, b)
			put(i, item)
		}
		return nil
	case 'U':
		for i := 0; i < n; i++ {
			var str string
			switch v := c.(type) {
			case *arrowarray.String:
				str = v.Value(i)
			case *arrowarray.LargeString:
				str = v.Value(i)
			case *arrowarray.StringView:
				str = v.Value(i)
			default:
				return fmt.Errorf("want a string column, got %s", c.DataType())
			}
			if !utf8.ValidString(str) {
				return fmt.Errorf("row %d: invalid UTF-8", i)
			}
			item := make([]byte, f.Size)
			k := 0
			for _, r := range str {
				if 4*k >= f.Size {
					return fmt.Errorf("row %d: %q is longer than %s", i, str, f.Dtype)
				}
				if f.Big {
					binary.BigEndian.PutUint32(item[4*k:], uint32(r))
				} else {
					binary.LittleEndian.PutUint32(item[4*k:], uint32(r))
				}
				k++
			}
			put(i, item)
		}
		return nil
	}
	return fmt.Errorf("dtype %s cannot be written", f.Dtype)
}
