package arrowconv

// This file maps Blosc2 NDArray (.b2nd) dtypes to Arrow (docs/protocol.md, "Blosc2 NDArrays")
// and wraps gathered item bytes as Arrow arrays.

import (
	"encoding/binary"
	"fmt"
	"math"
	"unicode/utf8"

	"github.com/apache/arrow-go/v18/arrow"
	arrowarray "github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/tileflight/tileflight/b2nd"
	"github.com/tileflight/tileflight/errkind"
)

// B2NDDtypeKey is the field metadata key holding a .b2nd field's NumPy
// dtype string.
const B2NDDtypeKey = "b2nd.dtype"

// B2NDType is the Arrow type of a .b2nd dtype field, and whether its
// values may be null (NaT datetimes and timedeltas).
func B2NDType(f b2nd.Field) (arrow.DataType, bool, error) {
	if f.Count > 0 {
		// A subarray field: fixed_size_list of its elements (C order).
		e := f
		e.Count, e.Shape, e.Size = 0, nil, f.ElemSize()
		t, _, err := B2NDType(e)
		if err != nil {
			return nil, false, err
		}
		return arrow.FixedSizeListOfNonNullable(int32(f.Count), t), false, nil
	}
	switch f.Kind {
	case 'b':
		return arrow.FixedWidthTypes.Boolean, false, nil
	case 'i':
		return [...]arrow.DataType{1: arrow.PrimitiveTypes.Int8, 2: arrow.PrimitiveTypes.Int16, 4: arrow.PrimitiveTypes.Int32, 8: arrow.PrimitiveTypes.Int64}[f.Size], false, nil
	case 'u':
		return [...]arrow.DataType{1: arrow.PrimitiveTypes.Uint8, 2: arrow.PrimitiveTypes.Uint16, 4: arrow.PrimitiveTypes.Uint32, 8: arrow.PrimitiveTypes.Uint64}[f.Size], false, nil
	case 'f':
		return [...]arrow.DataType{2: arrow.FixedWidthTypes.Float16, 4: arrow.PrimitiveTypes.Float32, 8: arrow.PrimitiveTypes.Float64}[f.Size], false, nil
	case 'c':
		if f.Size == 8 {
			return arrow.FixedSizeListOfNonNullable(2, arrow.PrimitiveTypes.Float32), false, nil
		}
		return arrow.FixedSizeListOfNonNullable(2, arrow.PrimitiveTypes.Float64), false, nil
	case 'M':
		switch f.Unit {
		case "s":
			return &arrow.TimestampType{Unit: arrow.Second}, true, nil
		case "ms":
			return &arrow.TimestampType{Unit: arrow.Millisecond}, true, nil
		case "us":
			return &arrow.TimestampType{Unit: arrow.Microsecond}, true, nil
		case "ns":
			return &arrow.TimestampType{Unit: arrow.Nanosecond}, true, nil
		case "D":
			return arrow.FixedWidthTypes.Date32, true, nil
		}
		return arrow.PrimitiveTypes.Int64, false, nil
	case 'm':
		switch f.Unit {
		case "s":
			return arrow.FixedWidthTypes.Duration_s, true, nil
		case "ms":
			return arrow.FixedWidthTypes.Duration_ms, true, nil
		case "us":
			return arrow.FixedWidthTypes.Duration_us, true, nil
		case "ns":
			return arrow.FixedWidthTypes.Duration_ns, true, nil
		}
		return arrow.PrimitiveTypes.Int64, false, nil
	case 'S', 'V':
		return &arrow.FixedSizeBinaryType{ByteWidth: f.Size}, false, nil
	case 'U':
		return arrow.BinaryTypes.String, false, nil
	}
	return nil, false, errkind.Errorf(errkind.Unimplemented, "dtype %s has no Arrow mapping", f.Dtype)
}

// B2NDField is the Arrow field of a .b2nd dtype field.
func B2NDField(f b2nd.Field) (arrow.Field, error) {
	t, nullable, err := B2NDType(f)
	if err != nil {
		return arrow.Field{}, err
	}
	md := arrow.NewMetadata([]string{MetaRole, B2NDDtypeKey}, []string{"attribute", f.Dtype})
	return arrow.Field{Name: f.Name, Type: t, Nullable: nullable, Metadata: md}, nil
}

// B2NDDimField is the Arrow field of a .b2nd dimension (int64).
func B2NDDimField(name string) arrow.Field {
	return arrow.Field{Name: name, Type: arrow.PrimitiveTypes.Int64,
		Metadata: arrow.NewMetadata([]string{MetaRole, MetaDatatype}, []string{"dimension", "int64"})}
}

// Int64Column wraps vs as an Arrow int64 array without copying.
func Int64Column(vs []int64) arrow.Array {
	b := memory.NewBufferBytes(arrow.Int64Traits.CastToBytes(vs))
	return fromData(arrowarray.NewData(arrow.PrimitiveTypes.Int64, len(vs), []*memory.Buffer{nil, b}, nil, 0, 0))
}

func swapBytes(buf []byte, w int) {
	switch w {
	case 2:
		for i := 0; i+2 <= len(buf); i += 2 {
			buf[i], buf[i+1] = buf[i+1], buf[i]
		}
	case 4:
		for i := 0; i+4 <= len(buf); i += 4 {
			binary.LittleEndian.PutUint32(buf[i:], binary.BigEndian.Uint32(buf[i:]))
		}
	case 8:
		for i := 0; i+8 <= len(buf); i += 8 {
			binary.LittleEndian.PutUint64(buf[i:], binary.BigEndian.Uint64(buf[i:]))
		}
	}
}

// B2NDColumn wraps n values of f gathered back to back in buf (n*f.Size
// bytes, in the dtype's byte order) as an Arrow array of B2NDType(f). buf
// is swapped to little-endian in place and kept by the array where the
// layouts agree.
func B2NDColumn(f b2nd.Field, buf []byte, n int) (arrow.Array, error) {
	t, _, err := B2NDType(f)
	if err != nil {
		return nil, err
	}
	buf = buf[:n*f.Size]
	if f.Count > 0 {
		// A subarray field (bool, integers, floats): the elements of the n
		// values back to back are the list's child.
		e := f
		e.Count, e.Shape, e.Size = 0, nil, f.ElemSize()
		child, err := B2NDColumn(e, buf, n*f.Count)
		if err != nil {
			return nil, err
		}
		defer child.Release()
		return fromData(arrowarray.NewData(t, n, []*memory.Buffer{nil}, []arrow.ArrayData{child.Data()}, 0, 0)), nil
	}
	if f.Big {
		switch f.Kind {
		case 'i', 'u', 'f', 'M', 'm':
			swapBytes(buf, f.Size)
		case 'c':
			swapBytes(buf, f.Size/2)
		}
	}
	fixed := func(dt arrow.DataType, data []byte, nulls *memory.Buffer, nn int) arrow.Array {
		return fromData(arrowarray.NewData(dt, n, []*memory.Buffer{nulls, memory.NewBufferBytes(data)}, nil, nn, 0))
	}
	switch f.Kind {
	case 'b':
		bits := make([]byte, (n+7)/8)
		for i, v := range buf {
			if v != 0 {
				bits[i/8] |= 1 << (i % 8)
			}
		}
		return fixed(t, bits, nil, 0), nil
	case 'i', 'u', 'f', 'S', 'V':
		return fixed(t, buf, nil, 0), nil
	case 'c':
		ft := arrow.PrimitiveTypes.Float64
		if f.Size == 8 {
			ft = arrow.PrimitiveTypes.Float32
		}
		child := arrowarray.NewData(ft, 2*n, []*memory.Buffer{nil, memory.NewBufferBytes(buf)}, nil, 0, 0)
		defer child.Release()
		return fromData(arrowarray.NewData(t, n, []*memory.Buffer{nil}, []arrow.ArrayData{child}, 0, 0)), nil
	case 'M', 'm':
		// NaT (the smallest int64) is null.
		var nulls []byte
		nn := 0
		for i := 0; i < n; i++ {
			if binary.LittleEndian.Uint64(buf[8*i:]) == 1<<63 {
				if nulls == nil {
					nulls = make([]byte, (n+7)/8)
					for k := range nulls {
						nulls[k] = 0xff
					}
				}
				nulls[i/8] &^= 1 << (i % 8)
				nn++
			}
		}
		var nb *memory.Buffer
		if nulls != nil {
			nb = memory.NewBufferBytes(nulls)
		}
		if t.ID() == arrow.DATE32 {
			days := make([]byte, 4*n)
			for i := 0; i < n; i++ {
				v := int64(binary.LittleEndian.Uint64(buf[8*i:]))
				if v == math.MinInt64 {
					continue
				}
				if v < math.MinInt32 || v > math.MaxInt32 {
					return nil, errkind.Errorf(errkind.InvalidArgument, "datetime64[D] value %d does not fit Arrow date32", v)
				}
				binary.LittleEndian.PutUint32(days[4*i:], uint32(int32(v)))
			}
			return fixed(t, days, nb, nn), nil
		}
		if t.ID() == arrow.INT64 {
			return fixed(t, buf, nil, 0), nil
		}
		return fixed(t, buf, nb, nn), nil
	case 'U':
		offs := make([]int32, n+1)
		out := make([]byte, 0, len(buf)/4)
		chars := f.Size / 4
		for i := 0; i < n; i++ {
			item := buf[i*f.Size : (i+1)*f.Size]
			char := func(k int) uint32 {
				if f.Big {
					return binary.BigEndian.Uint32(item[4*k:])
				}
				return binary.LittleEndian.Uint32(item[4*k:])
			}
			end := chars
			for end > 0 && char(end-1) == 0 {
				end-- // NumPy strips trailing NULs
			}
			for k := 0; k < end; k++ {
				out = utf8.AppendRune(out, rune(char(k)))
			}
			if len(out) > math.MaxInt32 {
				return nil, errkind.Errorf(errkind.ResourceExhausted, "a batch of %d strings exceeds 2 GiB", n)
			}
			offs[i+1] = int32(len(out))
		}
		ob := memory.NewBufferBytes(arrow.Int32Traits.CastToBytes(offs))
		return fromData(arrowarray.NewData(t, n, []*memory.Buffer{nil, ob, memory.NewBufferBytes(out)}, nil, 0, 0)), nil
	}
	return nil, fmt.Errorf("dtype %s: no column conversion", f.Dtype)
}

// fromData makes the array of d and drops d's own reference, which
// MakeFromData does not take over (it retains d).
func fromData(d arrow.ArrayData) arrow.Array {
	a := arrowarray.MakeFromData(d)
	d.Release()
	return a
}
