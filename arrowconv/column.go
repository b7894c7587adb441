package arrowconv

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/bits"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/tileflight/tileflight/format/datatype"
)

// NewColumn turns the unfiltered TileDB buffers of n cells of f into an Arrow
// array. The result aliases data wherever TileDB's bytes already are Arrow's
// (fixed-size numbers, timestamps, time64, fixed-size binaries, the values of
// var-sized cells, enumeration indices), so data must not be modified while
// the array is in use. Only offsets, validity, BOOL and the int64 -> int32
// conversions of DATETIME_DAY, TIME_SEC and TIME_MS write new buffers.
//
// Buffers, as the reader holds them for a tile or for any range of its cells:
//   - data: fixed-size cells: exactly n*CellSize bytes. Var-sized cells: the
//     values the offsets point into; the last cell ends at len(data), so a
//     caller taking cells [i, j) of a tile passes data[:start(j)] (or the
//     whole data tile when j is the last cell) and offsets[8i:8j].
//   - offsets (var-sized only): n little-endian uint64 start offsets in bytes,
//     non-decreasing; they need not start at 0.
//   - validity: nil (every cell valid) or n bytes, 0 = null; only for
//     nullable fields.
//
// Inconsistent buffers are an error wrapping ErrCorrupt, never a panic.
//
// A DATETIME_DAY, TIME_SEC or TIME_MS cell holding TileDB's "not a time"
// (math.MinInt64, its default fill value) becomes null; any other value that
// does not fit 32 bits is an error.
func NewColumn(f Field, data, offsets, validity []byte, n int) (arrow.Array, error) {
	return newColumn(f, data, offsets, validity, n, nil)
}

func newColumn(f Field, data, offsets, validity []byte, n int, own Owner) (arrow.Array, error) {
	if !littleEndian {
		return nil, fmt.Errorf("field %q: big-endian host: %w", f.Name, ErrUnsupported)
	}
	if n < 0 {
		return nil, fmt.Errorf("field %q: negative cell count %d: %w", f.Name, n, ErrCorrupt)
	}
	if err := checkValidity(f, validity, n); err != nil {
		return nil, err
	}
	if _, err := ArrowType(f); err != nil {
		return nil, err
	}
	var aoffs []int64
	if f.IsVar() {
		if len(offsets) != 8*n || n > math.MaxInt/8 {
			return nil, fmt.Errorf("field %q: %d offset bytes for %d cells: %w", f.Name, len(offsets), n, ErrCorrupt)
		}
		var base int
		var err error
		aoffs, base, err = startsToArrow(offsets, n, len(data))
		if err != nil {
			return nil, fmt.Errorf("field %q: %w", f.Name, err)
		}
		data = data[base:]
	} else {
		cs := f.CellSize()
		if n > len(data)/cs || len(data) != n*cs {
			return nil, fmt.Errorf("field %q: %d data bytes for %d cells of %d bytes: %w", f.Name, len(data), n, cs, ErrCorrupt)
		}
	}
	return build(f, data, aoffs, validity, n, own)
}

// Owner keeps alive memory that columns alias (bufpool.Buf): every Arrow
// buffer built over it retains it, and frees it when released.
type Owner interface {
	memory.Allocator
	Retain()
}

// NewColumnOwned is NewColumn over data that own keeps alive: the Arrow
// buffers aliasing data retain own and free it on release, so the column
// may outlive the caller's own reference to the memory.
func NewColumnOwned(f Field, data, offsets, validity []byte, n int, own Owner) (arrow.Array, error) {
	return newColumn(f, data, offsets, validity, n, own)
}

// wrap is an Arrow buffer aliasing b, memory of own when own is not nil.
// The caller releases it once NewData holds it.
func wrap(b []byte, own Owner) *memory.Buffer {
	if own == nil {
		return memory.NewBufferBytes(b)
	}
	own.Retain()
	return memory.NewBufferWithAllocator(b, own)
}

func checkValidity(f Field, validity []byte, n int) error {
	if validity == nil {
		return nil
	}
	if !f.Nullable {
		return fmt.Errorf("field %q: validity given for a non-nullable field: %w", f.Name, ErrCorrupt)
	}
	if len(validity) != n {
		return fmt.Errorf("field %q: %d validity bytes for %d cells: %w", f.Name, len(validity), n, ErrCorrupt)
	}
	return nil
}

// startsToArrow converts n TileDB start offsets into n+1 Arrow offsets
// relative to the first start, checking that they never decrease and stay
// within dataLen. It returns the first start (the base) too.
func startsToArrow(offsets []byte, n, dataLen int) ([]int64, int, error) {
	out := make([]int64, n+1)
	if n == 0 {
		return out, 0, nil
	}
	offsets = offsets[:8*n]
	base := binary.LittleEndian.Uint64(offsets)
	if base > uint64(dataLen) {
		return nil, 0, fmt.Errorf("first offset %d beyond %d data bytes: %w", base, dataLen, ErrCorrupt)
	}
	prev := base
	// A branch-free running check: any decrease sets bad, reported once after
	// the loop so the hot path stays a straight subtract-and-store.
	var bad uint64
	for i := range out[:n] {
		o := binary.LittleEndian.Uint64(offsets[8*i:])
		bad |= boolBit(o < prev)
		prev = o
		out[i] = int64(o - base)
	}
	if bad != 0 {
		for i := 1; i < n; i++ {
			if binary.LittleEndian.Uint64(offsets[8*i:]) < binary.LittleEndian.Uint64(offsets[8*(i-1):]) {
				return nil, 0, fmt.Errorf("offset of cell %d (%d) is below the previous one (%d): %w",
					i, binary.LittleEndian.Uint64(offsets[8*i:]), binary.LittleEndian.Uint64(offsets[8*(i-1):]), ErrCorrupt)
			}
		}
	}
	if prev > uint64(dataLen) {
		return nil, 0, fmt.Errorf("offset of cell %d (%d) beyond %d data bytes: %w", n-1, prev, dataLen, ErrCorrupt)
	}
	out[n] = int64(uint64(dataLen) - base)
	return out, int(base), nil
}

func boolBit(b bool) uint64 {
	if b {
		return 1
	}
	return 0
}

// build assembles the array from normalized buffers: data holds exactly the
// cells' bytes, aoffs (var-sized fields only) n+1 byte offsets from 0 to
// len(data), which build may rewrite in place; validity is nil or n bytes.
func build(f Field, data []byte, aoffs []int64, validity []byte, n int, own Owner) (arrow.Array, error) {
	bitmap, nulls := packValidity(validity, n)
	if f.Enumeration != nil {
		return buildDict(f, data, bitmap, nulls, n, own)
	}
	dt, err := ArrowType(f)
	if err != nil {
		return nil, err
	}
	if isBytes(f.Type) {
		db := wrap(data, own)
		defer db.Release()
		if f.IsVar() {
			if isUTF8(f.Type) {
				if err := checkUTF8(f, data, aoffs); err != nil {
					return nil, err
				}
			}
			d := array.NewData(dt, n, []*memory.Buffer{bitmap, int64Buf(aoffs), db}, nil, nulls, 0)
			defer d.Release()
			return array.MakeFromData(d), nil
		}
		d := array.NewData(dt, n, []*memory.Buffer{bitmap, db}, nil, nulls, 0)
		defer d.Release()
		return array.MakeFromData(d), nil
	}
	size := f.Type.Size()
	switch {
	case f.CellValNum == 1:
		d, err := primitiveData(f, data, n, bitmap, nulls, 0, own)
		if err != nil {
			return nil, err
		}
		defer d.Release()
		return array.MakeFromData(d), nil
	case f.IsVar():
		if len(data)%size != 0 {
			return nil, fmt.Errorf("field %q: %d value bytes is not a whole number of %d-byte values: %w", f.Name, len(data), size, ErrCorrupt)
		}
		var bad int64
		for i, o := range aoffs {
			bad |= o % int64(size)
			aoffs[i] = o / int64(size)
		}
		if bad != 0 {
			return nil, fmt.Errorf("field %q: an offset is not a multiple of the %d-byte value size: %w", f.Name, size, ErrCorrupt)
		}
		child, err := primitiveData(f, data, len(data)/size, nil, 0, 0, own)
		if err != nil {
			return nil, err
		}
		defer child.Release()
		d := array.NewData(dt, n, []*memory.Buffer{bitmap, int64Buf(aoffs)}, []arrow.ArrayData{child}, nulls, 0)
		defer d.Release()
		return array.MakeFromData(d), nil
	default:
		child, err := primitiveData(f, data, n*int(f.CellValNum), nil, 0, int(f.CellValNum), own)
		if err != nil {
			return nil, err
		}
		defer child.Release()
		d := array.NewData(dt, n, []*memory.Buffer{bitmap}, []arrow.ArrayData{child}, nulls, 0)
		defer d.Release()
		return array.MakeFromData(d), nil
	}
}

func int64Buf(v []int64) *memory.Buffer {
	return memory.NewBufferBytes(arrow.Int64Traits.CastToBytes(v))
}

// primitiveData wraps or converts count values of f.Type. Values that must
// become null (NaT in a 32-bit temporal type) are only possible for
// one-value cells; inside lists (per > 0 or bitmap == nil for var) they are
// reported as errors because list elements cannot be null in TileDB.
// Wrapped values alias memory of own (nil: garbage collected).
func primitiveData(f Field, data []byte, count int, bitmap *memory.Buffer, nulls int, per int, own Owner) (*array.Data, error) {
	dt := elemType(f.Type)
	switch f.Type {
	case datatype.Bool:
		bm := make([]byte, bitmapLen(count))
		packBits(bm, data[:count])
		return array.NewData(dt, count, []*memory.Buffer{bitmap, memory.NewBufferBytes(bm)}, nil, nulls, 0), nil
	case datatype.DatetimeDay, datatype.TimeSec, datatype.TimeMs:
		out := make([]int32, count)
		var natBits []byte
		for i := range out {
			v := int64(binary.LittleEndian.Uint64(data[8*i:]))
			if int64(int32(v)) == v {
				out[i] = int32(v)
				continue
			}
			if !validity(bitmap, i) {
				continue
			}
			if v == math.MinInt64 && f.CellValNum == 1 {
				if natBits == nil {
					natBits = make([]byte, bitmapLen(count))
					if bitmap != nil {
						copy(natBits, bitmap.Bytes())
					} else {
						setAll(natBits, count)
					}
				}
				bitClear(natBits, i)
				continue
			}
			cell := i
			if per > 0 {
				cell = i / per
			}
			return nil, fmt.Errorf("field %q: cell %d: %s value %d does not fit 32 bits: %w", f.Name, cell, f.Type, v, ErrMismatch)
		}
		if natBits != nil {
			bitmap = memory.NewBufferBytes(natBits)
			nulls = count - popcount(natBits, count)
		}
		return array.NewData(dt, count, []*memory.Buffer{bitmap, memory.NewBufferBytes(arrow.Int32Traits.CastToBytes(out))}, nil, nulls, 0), nil
	}
	db := wrap(data[:count*f.Type.Size()], own)
	defer db.Release()
	return array.NewData(dt, count, []*memory.Buffer{bitmap, db}, nil, nulls, 0), nil
}

func validity(bitmap *memory.Buffer, i int) bool {
	if bitmap == nil {
		return true
	}
	return bitmap.Bytes()[i>>3]&(1<<(i&7)) != 0
}

func bitClear(b []byte, i int) { b[i>>3] &^= 1 << (i & 7) }

func setAll(b []byte, n int) {
	for i := 0; i < n/8; i++ {
		b[i] = 0xff
	}
	if r := n % 8; r != 0 {
		b[n/8] = byte(1<<r) - 1
	}
}

func popcount(b []byte, n int) int {
	c := 0
	full := n / 8
	for len(b[:full]) >= 8 {
		c += bits.OnesCount64(binary.LittleEndian.Uint64(b))
		b, full = b[8:], full-8
	}
	for _, x := range b[:full] {
		c += bits.OnesCount8(x)
	}
	if r := n % 8; r != 0 {
		c += bits.OnesCount8(b[full] & (byte(1<<r) - 1))
	}
	return c
}

func bitmapLen(n int) int { return (n + 7) / 8 }

// packValidity packs TileDB's one-byte-per-cell validity into an Arrow
// bitmap; nil validity (or no nulls at all) means no bitmap.
func packValidity(validity []byte, n int) (*memory.Buffer, int) {
	if validity == nil {
		return nil, 0
	}
	bm := make([]byte, bitmapLen(n))
	set := packBits(bm, validity[:n])
	if set == n {
		return nil, 0
	}
	return memory.NewBufferBytes(bm), n - set
}

// packBits sets bit i of dst when src[i] != 0 and returns how many were set.
// Eight source bytes at a time: each byte is first folded to its "non-zero"
// bit 0, then one multiplication gathers the eight bit-0s into the top byte.
func packBits(dst, src []byte) int {
	const lsb = 0x0101010101010101
	const gather = 0x0102040810204080
	set := 0
	i := 0
	for ; i+8 <= len(src); i += 8 {
		x := binary.LittleEndian.Uint64(src[i:])
		x |= x >> 4
		x |= x >> 2
		x |= x >> 1
		b := byte(((x & lsb) * gather) >> 56)
		dst[i>>3] = b
		set += bits.OnesCount8(b)
	}
	if i < len(src) {
		var b byte
		for j := i; j < len(src); j++ {
			if src[j] != 0 {
				b |= 1 << (j - i)
			}
		}
		dst[i>>3] = b
		set += bits.OnesCount8(b)
	}
	return set
}

// unpackBits writes one byte (0 or 1) per bit of src starting at bit offset off.
func unpackBits(dst []byte, src []byte, off int) {
	for i := range dst {
		j := off + i
		dst[i] = (src[j>>3] >> (j & 7)) & 1
	}
}

func buildDict(f Field, data []byte, bitmap *memory.Buffer, nulls, n int, own Owner) (arrow.Array, error) {
	dt, err := ArrowType(f)
	if err != nil {
		return nil, err
	}
	dict, err := f.Enumeration.Dictionary()
	if err != nil {
		return nil, fmt.Errorf("field %q: %w", f.Name, err)
	}
	limit := uint64(dict.Len())
	size := f.Type.Size()
	signed := f.Type.IsSigned()
	for i := 0; i < n; i++ {
		if !validity(bitmap, i) {
			continue
		}
		var v uint64
		switch size {
		case 1:
			v = uint64(data[i])
			if signed {
				v = uint64(int64(int8(data[i])))
			}
		case 2:
			v = uint64(binary.LittleEndian.Uint16(data[2*i:]))
			if signed {
				v = uint64(int64(int16(v)))
			}
		case 4:
			v = uint64(binary.LittleEndian.Uint32(data[4*i:]))
			if signed {
				v = uint64(int64(int32(v)))
			}
		default:
			v = binary.LittleEndian.Uint64(data[8*i:])
		}
		if v >= limit && f.Enumeration.HasFill && v == uint64(f.Enumeration.FillIndex) {
			// The fill index of a dense cell: null, index kept.
			if bitmap == nil {
				bitmap = memory.NewBufferBytes(make([]byte, bitmapLen(n)))
				setAll(bitmap.Bytes(), n)
			}
			bitClear(bitmap.Bytes(), i)
			nulls++
			continue
		}
		if v >= limit { // negative values wrap to huge ones
			return nil, fmt.Errorf("field %q: cell %d: enumeration index %d outside %q's %d values: %w",
				f.Name, i, int64(v), f.Enumeration.Name, limit, ErrCorrupt)
		}
	}
	db := wrap(data[:n*size], own)
	defer db.Release()
	idx := array.NewData(elemType(f.Type), n, []*memory.Buffer{bitmap, db}, nil, nulls, 0)
	defer idx.Release()
	indices := array.MakeFromData(idx)
	defer indices.Release()
	return array.NewDictionaryArray(dt, indices, dict), nil
}
