package arrowconv

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/big"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/tileflight/tileflight/format/datatype"
)

// ToTileDB converts an Arrow column into TileDB write buffers for f: data,
// offsets (var-sized fields: one little-endian uint64 start offset per cell,
// in bytes) and validity (nullable attributes: one byte per cell, 1 = valid).
//
// Besides the type ArrowType(f) it accepts the DoPut conveniences:
//   - strings and bytes: utf8, large_utf8, utf8_view, binary, large_binary,
//     binary_view and fixed_size_binary, for any string/char/blob field;
//     a fixed-size field takes values of exactly its width;
//   - numbers: any integer or floating-point type, cast when every value
//     converts exactly (range checked; int <-> float only when exact);
//     BOOL also takes integers 0 and 1;
//   - datetimes: timestamp of any unit (time zone ignored: TileDB counts
//     from the epoch in UTC), date32, date64, converted when exact; times:
//     time32/time64 of any unit; both also take raw integer ticks;
//   - lists: large_list, list, list_view, large_list_view, fixed_size_list for
//     multi-value fields (fixed ones need exactly cell_val_num elements);
//   - enumerated attributes: a dictionary column (its values are looked up in
//     the enumeration), the enumeration's values themselves when they are
//     strings/bytes, or integer indices.
//
// Anything else is an error wrapping ErrMismatch that names the column, the
// expected and the actual type; so is a null in a non-nullable field (naming
// the first null row). Values of null cells are written as zeros or empty.
// When the type matches exactly, data aliases the Arrow buffer (no copy).
func ToTileDB(f Field, arr arrow.Array) (data, offsets, validity []byte, err error) {
	if !littleEndian {
		return nil, nil, nil, fmt.Errorf("field %q: big-endian host: %w", f.Name, ErrUnsupported)
	}
	want, err := ArrowType(f)
	if err != nil {
		return nil, nil, nil, err
	}
	n := arr.Len()
	if arr.NullN() > 0 {
		if !f.Nullable || f.Role == Dimension {
			row := 0
			for row < n && arr.IsValid(row) {
				row++
			}
			return nil, nil, nil, fmt.Errorf("column %q: row %d is null but the %s is not nullable: %w", f.Name, row, f.Role, ErrMismatch)
		}
	}
	if f.Nullable && f.Role == Attribute {
		validity = make([]byte, n)
		if arr.NullN() == 0 {
			for i := range validity {
				validity[i] = 1
			}
		} else {
			for i := range validity {
				if arr.IsValid(i) {
					validity[i] = 1
				}
			}
		}
	}
	mismatch := func() error {
		return fmt.Errorf("column %q: expected %s (TileDB %s), got %s: %w", f.Name, want, f.Type, arr.DataType(), ErrMismatch)
	}
	switch {
	case f.Enumeration != nil:
		data, err = toEnum(f, arr, mismatch)
	case isBytes(f.Type) && f.IsVar():
		data, offsets, err = toVarBytes(f, arr, mismatch)
	case isBytes(f.Type):
		data, err = toFixedBytes(f, arr, f.CellSize(), mismatch)
	case f.CellValNum == 1:
		data, err = toValues(f, arr, mismatch)
	default:
		data, offsets, err = toList(f, arr, mismatch)
	}
	if err != nil {
		return nil, nil, nil, err
	}
	return data, offsets, validity, nil
}

// byteCells gives access to the cells of any string/binary-like array.
type byteCells struct {
	n      int
	value  func(i int) []byte
	offs64 []int64 // set for contiguous offset-based arrays
	offs32 []int32
	vals   []byte
}

func asByteCells(arr arrow.Array) (byteCells, bool, error) {
	d := arr.Data()
	n, off := arr.Len(), d.Offset()
	bufs := d.Buffers()
	bad := func(what string) error {
		return fmt.Errorf("malformed %s array: %s: %w", arr.DataType(), what, ErrMismatch)
	}
	switch arr.DataType().ID() {
	case arrow.LARGE_STRING, arrow.LARGE_BINARY:
		if len(bufs) < 3 || bufs[1] == nil {
			return byteCells{}, true, bad("missing buffers")
		}
		o := arrow.Int64Traits.CastFromBytes(bufs[1].Bytes())
		if len(o) < off+n+1 {
			return byteCells{}, true, bad("short offsets")
		}
		return byteCells{n: n, offs64: o[off : off+n+1], vals: bufs[2].Bytes()}, true, nil
	case arrow.STRING, arrow.BINARY:
		if len(bufs) < 3 || bufs[1] == nil {
			return byteCells{}, true, bad("missing buffers")
		}
		o := arrow.Int32Traits.CastFromBytes(bufs[1].Bytes())
		if len(o) < off+n+1 {
			return byteCells{}, true, bad("short offsets")
		}
		return byteCells{n: n, offs32: o[off : off+n+1], vals: bufs[2].Bytes()}, true, nil
	case arrow.STRING_VIEW:
		a := arr.(*array.StringView)
		return byteCells{n: n, value: func(i int) []byte { return []byte(a.Value(i)) }}, true, nil
	case arrow.BINARY_VIEW:
		a := arr.(*array.BinaryView)
		return byteCells{n: n, value: a.Value}, true, nil
	case arrow.FIXED_SIZE_BINARY:
		a := arr.(*array.FixedSizeBinary)
		w := a.DataType().(*arrow.FixedSizeBinaryType).ByteWidth
		if len(bufs) < 2 || bufs[1] == nil || len(bufs[1].Bytes()) < (off+n)*w {
			if n > 0 && w > 0 {
				return byteCells{}, true, bad("short values")
			}
		}
		return byteCells{n: n, value: a.Value}, true, nil
	}
	return byteCells{}, false, nil
}

// span returns the contiguous values and rebased offsets of offset-based
// arrays, after checking them.
func (c byteCells) span() (vals []byte, starts []uint64, ok bool) {
	starts = make([]uint64, c.n)
	var lo, hi int64
	if c.offs64 != nil {
		lo, hi = c.offs64[0], c.offs64[c.n]
		prev := lo
		for i := 0; i < c.n; i++ {
			o := c.offs64[i+1]
			if o < prev {
				return nil, nil, false
			}
			starts[i] = uint64(c.offs64[i] - lo)
			prev = o
		}
	} else {
		lo, hi = int64(c.offs32[0]), int64(c.offs32[c.n])
		prev := lo
		for i := 0; i < c.n; i++ {
			o := int64(c.offs32[i+1])
			if o < prev {
				return nil, nil, false
			}
			starts[i] = uint64(int64(c.offs32[i]) - lo)
			prev = o
		}
	}
	if lo < 0 || hi > int64(len(c.vals)) {
		return nil, nil, false
	}
	return c.vals[lo:hi], starts, true
}

func (c byteCells) cell(i int) []byte {
	if c.value != nil {
		return c.value(i)
	}
	if c.offs64 != nil {
		return c.vals[c.offs64[i]:c.offs64[i+1]]
	}
	return c.vals[c.offs32[i]:c.offs32[i+1]]
}

func toVarBytes(f Field, arr arrow.Array, mismatch func() error) ([]byte, []byte, error) {
	c, ok, err := asByteCells(arr)
	if !ok {
		return nil, nil, mismatch()
	}
	if err != nil {
		return nil, nil, fmt.Errorf("column %q: %w", f.Name, err)
	}
	offsets := make([]byte, 8*c.n)
	if c.value == nil {
		vals, starts, ok := c.span()
		if !ok {
			return nil, nil, fmt.Errorf("column %q: malformed %s offsets: %w", f.Name, arr.DataType(), ErrMismatch)
		}
		copy(offsets, arrow.Uint64Traits.CastToBytes(starts))
		return vals, offsets, nil
	}
	total := 0
	for i := 0; i < c.n; i++ {
		total += len(c.value(i))
	}
	data := make([]byte, 0, total)
	for i := 0; i < c.n; i++ {
		binary.LittleEndian.PutUint64(offsets[8*i:], uint64(len(data)))
		data = append(data, c.value(i)...)
	}
	return data, offsets, nil
}

func toFixedBytes(f Field, arr arrow.Array, w int, mismatch func() error) ([]byte, error) {
	if fb, ok := arr.DataType().(*arrow.FixedSizeBinaryType); ok && fb.ByteWidth == w {
		d := arr.Data()
		if b := d.Buffers()[1]; b != nil && len(b.Bytes()) >= (d.Offset()+arr.Len())*w {
			return b.Bytes()[d.Offset()*w : (d.Offset()+arr.Len())*w], nil
		}
	}
	c, ok, err := asByteCells(arr)
	if !ok {
		return nil, mismatch()
	}
	if err != nil {
		return nil, fmt.Errorf("column %q: %w", f.Name, err)
	}
	if c.value == nil {
		if _, _, ok := c.span(); !ok {
			return nil, fmt.Errorf("column %q: malformed %s offsets: %w", f.Name, arr.DataType(), ErrMismatch)
		}
	}
	out := make([]byte, c.n*w)
	for i := 0; i < c.n; i++ {
		if arr.IsNull(i) {
			continue
		}
		v := c.cell(i)
		if len(v) != w {
			return nil, fmt.Errorf("column %q: row %d has %d bytes, the field's cells have %d (%s): %w", f.Name, i, len(v), w, arr.DataType(), ErrMismatch)
		}
		copy(out[i*w:], v)
	}
	return out, nil
}

// toList converts list-like columns for multi-value numeric fields.
func toList(f Field, arr arrow.Array, mismatch func() error) ([]byte, []byte, error) {
	switch arr.DataType().ID() {
	case arrow.LIST, arrow.LARGE_LIST, arrow.LIST_VIEW, arrow.LARGE_LIST_VIEW, arrow.FIXED_SIZE_LIST:
	default:
		return nil, nil, mismatch()
	}
	l := arr.(array.ListLike)
	child := l.ListValues()
	ef := Field{Name: f.Name, Type: f.Type, CellValNum: 1, Nullable: true}
	size := f.Type.Size()
	n := arr.Len()
	k := int64(f.CellValNum)
	// Check every range first: malformed offsets must not reach Slice.
	contiguous := true
	var first, prev int64
	for i := 0; i < n; i++ {
		s, e := l.ValueOffsets(i)
		if s < 0 || e < s || e > int64(child.Len()) {
			return nil, nil, fmt.Errorf("column %q: row %d: list range [%d, %d) outside %d values: %w", f.Name, i, s, e, child.Len(), ErrMismatch)
		}
		if arr.IsNull(i) {
			// A null fixed-size cell still needs its k values; a null
			// var-sized cell may keep whatever its range holds.
			if !f.IsVar() && e-s != k {
				contiguous = false
			}
		} else {
			if !f.IsVar() && e-s != k {
				return nil, nil, fmt.Errorf("column %q: row %d has %d values, the field has %d per cell: %w", f.Name, i, e-s, k, ErrMismatch)
			}
			if child.NullN() > 0 {
				for j := s; j < e; j++ {
					if child.IsNull(int(j)) {
						return nil, nil, fmt.Errorf("column %q: row %d: value %d is null; TileDB cells cannot hold null values: %w", f.Name, i, j-s, ErrMismatch)
					}
				}
			}
		}
		if i == 0 {
			first = s
		} else if s != prev {
			contiguous = false
		}
		prev = e
	}
	if n == 0 {
		if f.IsVar() {
			return []byte{}, []byte{}, nil
		}
		return []byte{}, nil, nil
	}
	var data []byte
	var err error
	if contiguous {
		sub := array.NewSlice(child, first, prev)
		data, err = toValues(ef, sub, func() error { return childMismatch(f, arr, child) })
		sub.Release()
		if err != nil {
			return nil, nil, err
		}
		if !f.IsVar() {
			return data, nil, nil
		}
		offsets := make([]byte, 8*n)
		for i := 0; i < n; i++ {
			s, _ := l.ValueOffsets(i)
			binary.LittleEndian.PutUint64(offsets[8*i:], uint64(s-first)*uint64(size))
		}
		return data, offsets, nil
	}
	// Views, or null rows whose ranges we must drop: one row at a time.
	var offsets []byte
	if f.IsVar() {
		offsets = make([]byte, 8*n)
	}
	data = []byte{}
	for i := 0; i < n; i++ {
		if offsets != nil {
			binary.LittleEndian.PutUint64(offsets[8*i:], uint64(len(data)))
		}
		if arr.IsNull(i) {
			if !f.IsVar() {
				data = append(data, make([]byte, int(k)*size)...)
			}
			continue
		}
		s, e := l.ValueOffsets(i)
		sub := array.NewSlice(child, s, e)
		b, err := toValues(ef, sub, func() error { return childMismatch(f, arr, child) })
		sub.Release()
		if err != nil {
			return nil, nil, err
		}
		data = append(data, b...)
	}
	return data, offsets, nil
}

func childMismatch(f Field, arr, child arrow.Array) error {
	want, _ := ArrowType(f)
	return fmt.Errorf("column %q: expected %s (TileDB %s), got %s (elements %s): %w", f.Name, want, f.Type, arr.DataType(), child.DataType(), ErrMismatch)
}

// number is every Go type an Arrow or TileDB fixed-width number can take.
type number interface {
	~int8 | ~int16 | ~int32 | ~int64 | ~uint8 | ~uint16 | ~uint32 | ~uint64 | ~float32 | ~float64
}

// toValues converts a flat array into TileDB values of f.Type (one per row).
func toValues(f Field, arr arrow.Array, mismatch func() error) ([]byte, error) {
	n := arr.Len()
	src := arr.DataType()
	if src.ID() == arrow.EXTENSION {
		return nil, mismatch()
	}
	switch {
	case f.Type == datatype.Bool:
		if src.ID() == arrow.BOOL {
			d := arr.Data()
			if b := d.Buffers()[1]; n > 0 && (b == nil || len(b.Bytes())*8 < d.Offset()+n) {
				return nil, fmt.Errorf("column %q: malformed bool array: %w", f.Name, ErrMismatch)
			}
			out := make([]byte, n)
			if n > 0 {
				unpackBits(out, d.Buffers()[1].Bytes(), d.Offset())
			}
			return out, nil
		}
		if !isIntegerID(src.ID()) {
			return nil, mismatch()
		}
		out, err := castNumbers(f, arr, datatype.Uint8, mismatch)
		if err != nil {
			return nil, err
		}
		for i, v := range out {
			if v > 1 && arr.IsValid(i) {
				return nil, fmt.Errorf("column %q: row %d: %d is not a boolean (0 or 1): %w", f.Name, i, v, ErrMismatch)
			}
		}
		return out, nil
	case f.Type.IsDatetime() || f.Type.IsTime():
		return toTemporal(f, arr, mismatch)
	}
	return castNumbers(f, arr, f.Type, mismatch)
}

func isIntegerID(id arrow.Type) bool {
	switch id {
	case arrow.INT8, arrow.INT16, arrow.INT32, arrow.INT64, arrow.UINT8, arrow.UINT16, arrow.UINT32, arrow.UINT64:
		return true
	}
	return false
}

// rawValues returns the fixed-width value bytes of a primitive array,
// honouring its offset, or nil when the buffer is too short.
func rawValues(arr arrow.Array, size int) []byte {
	d := arr.Data()
	bufs := d.Buffers()
	n := arr.Len()
	if n == 0 {
		return []byte{}
	}
	if len(bufs) < 2 || bufs[1] == nil {
		return nil
	}
	b := bufs[1].Bytes()
	if len(b)/size < d.Offset()+n {
		return nil
	}
	return b[d.Offset()*size : (d.Offset()+n)*size]
}

func view[T number](b []byte) []T {
	var z T
	if len(b) == 0 {
		return nil
	}
	return unsafe.Slice((*T)(unsafe.Pointer(&b[0])), len(b)/int(unsafe.Sizeof(z)))
}

// castNumbers converts a numeric array to the TileDB number type to,
// aliasing the Arrow buffer when the types are identical.
func castNumbers(f Field, arr arrow.Array, to datatype.Datatype, mismatch func() error) ([]byte, error) {
	sid := arr.DataType().ID()
	ssize := numSize(sid)
	if ssize == 0 {
		return nil, mismatch()
	}
	raw := rawValues(arr, ssize)
	if raw == nil {
		return nil, fmt.Errorf("column %q: malformed %s array: %w", f.Name, arr.DataType(), ErrMismatch)
	}
	if sameNumber(sid, to) {
		return raw, nil
	}
	out := make([]byte, arr.Len()*to.Size())
	var bad int
	switch to {
	case datatype.Int8:
		bad = castFrom[int8](sid, raw, out, arr)
	case datatype.Uint8:
		bad = castFrom[uint8](sid, raw, out, arr)
	case datatype.Int16:
		bad = castFrom[int16](sid, raw, out, arr)
	case datatype.Uint16:
		bad = castFrom[uint16](sid, raw, out, arr)
	case datatype.Int32:
		bad = castFrom[int32](sid, raw, out, arr)
	case datatype.Uint32:
		bad = castFrom[uint32](sid, raw, out, arr)
	case datatype.Uint64:
		bad = castFrom[uint64](sid, raw, out, arr)
	case datatype.Float32:
		bad = castFrom[float32](sid, raw, out, arr)
	case datatype.Float64:
		bad = castFrom[float64](sid, raw, out, arr)
	default: // INT64 and the int64-based datetimes and times
		bad = castFrom[int64](sid, raw, out, arr)
	}
	if bad >= 0 {
		return nil, fmt.Errorf("column %q: row %d: %s value %s does not convert exactly to %s: %w",
			f.Name, bad, arr.DataType(), valueString(arr, bad), to, ErrMismatch)
	}
	return out, nil
}

func valueString(arr arrow.Array, i int) string {
	if i < 0 || i >= arr.Len() {
		return "?"
	}
	return arr.ValueStr(i)
}

func numSize(id arrow.Type) int {
	switch id {
	case arrow.INT8, arrow.UINT8:
		return 1
	case arrow.INT16, arrow.UINT16:
		return 2
	case arrow.INT32, arrow.UINT32, arrow.FLOAT32:
		return 4
	case arrow.INT64, arrow.UINT64, arrow.FLOAT64:
		return 8
	}
	return 0
}

func sameNumber(id arrow.Type, d datatype.Datatype) bool {
	switch id {
	case arrow.INT8:
		return d == datatype.Int8
	case arrow.UINT8:
		return d == datatype.Uint8
	case arrow.INT16:
		return d == datatype.Int16
	case arrow.UINT16:
		return d == datatype.Uint16
	case arrow.INT32:
		return d == datatype.Int32
	case arrow.UINT32:
		return d == datatype.Uint32
	case arrow.INT64:
		return d == datatype.Int64 || d.IsDatetime() || d.IsTime()
	case arrow.UINT64:
		return d == datatype.Uint64
	case arrow.FLOAT32:
		return d == datatype.Float32
	case arrow.FLOAT64:
		return d == datatype.Float64
	}
	return false
}

func castFrom[T number](sid arrow.Type, raw, out []byte, arr arrow.Array) int {
	dst := view[T](out)
	switch sid {
	case arrow.INT8:
		return castSlice(view[int8](raw), dst, arr)
	case arrow.UINT8:
		return castSlice(view[uint8](raw), dst, arr)
	case arrow.INT16:
		return castSlice(view[int16](raw), dst, arr)
	case arrow.UINT16:
		return castSlice(view[uint16](raw), dst, arr)
	case arrow.INT32:
		return castSlice(view[int32](raw), dst, arr)
	case arrow.UINT32:
		return castSlice(view[uint32](raw), dst, arr)
	case arrow.INT64:
		return castSlice(view[int64](raw), dst, arr)
	case arrow.UINT64:
		return castSlice(view[uint64](raw), dst, arr)
	case arrow.FLOAT32:
		return castSlice(view[float32](raw), dst, arr)
	default:
		return castSlice(view[float64](raw), dst, arr)
	}
}

type numKind struct {
	float, signed bool
	bits          int
}

func kindOf[T number]() numKind {
	var z T
	switch any(z).(type) {
	case float32:
		return numKind{true, true, 32}
	case float64:
		return numKind{true, true, 64}
	case int8:
		return numKind{false, true, 8}
	case int16:
		return numKind{false, true, 16}
	case int32:
		return numKind{false, true, 32}
	case int64:
		return numKind{false, true, 64}
	case uint8:
		return numKind{false, false, 8}
	case uint16:
		return numKind{false, false, 16}
	case uint32:
		return numKind{false, false, 32}
	}
	return numKind{false, false, 64}
}

// intRange is the half-open float range [lo, hi) of an integer kind: inside
// it, converting a float with no fraction to the integer is exact and
// well-defined.
func (k numKind) intRange() (lo, hi float64) {
	if k.signed {
		return -math.Ldexp(1, k.bits-1), math.Ldexp(1, k.bits-1)
	}
	return 0, math.Ldexp(1, k.bits)
}

// castSlice converts src into dst and returns the first non-null row whose
// value does not convert exactly, or -1. Null rows are written as zero.
func castSlice[S, T number](src []S, dst []T, arr arrow.Array) int {
	sk, tk := kindOf[S](), kindOf[T]()
	hasNulls := arr.NullN() > 0
	switch {
	case !sk.float && !tk.float:
		for i, v := range src {
			t := T(v)
			if S(t) != v || (v < 0) != (t < 0) {
				if hasNulls && arr.IsNull(i) {
					dst[i] = 0
					continue
				}
				return i
			}
			dst[i] = t
		}
	case !sk.float && tk.float:
		lo, hi := sk.intRange()
		for i, v := range src {
			t := T(v)
			x := float64(t)
			if !(x >= lo && x < hi) || S(t) != v {
				if hasNulls && arr.IsNull(i) {
					dst[i] = 0
					continue
				}
				return i
			}
			dst[i] = t
		}
	case sk.float && !tk.float:
		lo, hi := tk.intRange()
		for i, v := range src {
			x := float64(v)
			if !(x >= lo && x < hi) || x != math.Trunc(x) {
				if hasNulls && arr.IsNull(i) {
					dst[i] = 0
					continue
				}
				return i
			}
			dst[i] = T(v)
		}
	default:
		for i, v := range src {
			t := T(v)
			if float64(t) != float64(v) && v == v {
				if hasNulls && arr.IsNull(i) {
					dst[i] = 0
					continue
				}
				return i
			}
			dst[i] = t
		}
	}
	return -1
}

// attos is the length of a TileDB time unit in attoseconds (nil for years
// and months, which have no fixed length).
func attos(d datatype.Datatype) *big.Int {
	var e int64
	var mul int64 = 1
	switch d {
	case datatype.DatetimeAs, datatype.TimeAs:
	case datatype.DatetimeFs, datatype.TimeFs:
		e = 3
	case datatype.DatetimePs, datatype.TimePs:
		e = 6
	case datatype.DatetimeNs, datatype.TimeNs:
		e = 9
	case datatype.DatetimeUs, datatype.TimeUs:
		e = 12
	case datatype.DatetimeMs, datatype.TimeMs:
		e = 15
	case datatype.DatetimeSec, datatype.TimeSec:
		e = 18
	case datatype.DatetimeMin, datatype.TimeMin:
		e, mul = 18, 60
	case datatype.DatetimeHr, datatype.TimeHr:
		e, mul = 18, 3600
	case datatype.DatetimeDay:
		e, mul = 18, 86400
	case datatype.DatetimeWeek:
		e, mul = 18, 7*86400
	default:
		return nil
	}
	v := new(big.Int).Exp(big.NewInt(10), big.NewInt(e), nil)
	return v.Mul(v, big.NewInt(mul))
}

func arrowUnitDatatype(u arrow.TimeUnit) datatype.Datatype {
	switch u {
	case arrow.Second:
		return datatype.DatetimeSec
	case arrow.Millisecond:
		return datatype.DatetimeMs
	case arrow.Microsecond:
		return datatype.DatetimeUs
	}
	return datatype.DatetimeNs
}

// toTemporal converts Arrow temporal columns (or raw integer ticks) into
// TileDB int64 ticks of f.Type's unit, exactly or not at all.
func toTemporal(f Field, arr arrow.Array, mismatch func() error) ([]byte, error) {
	var from datatype.Datatype
	var ticks []int64
	n := arr.Len()
	switch t := arr.DataType().(type) {
	case *arrow.TimestampType:
		if !f.Type.IsDatetime() {
			return nil, mismatch()
		}
		from = arrowUnitDatatype(t.Unit)
	case *arrow.Date64Type:
		if !f.Type.IsDatetime() {
			return nil, mismatch()
		}
		from = datatype.DatetimeMs
	case *arrow.Date32Type:
		if !f.Type.IsDatetime() {
			return nil, mismatch()
		}
		from = datatype.DatetimeDay
	case *arrow.Time32Type:
		if !f.Type.IsTime() {
			return nil, mismatch()
		}
		from = arrowUnitDatatype(t.Unit) - datatype.DatetimeSec + datatype.TimeSec
	case *arrow.Time64Type:
		if !f.Type.IsTime() {
			return nil, mismatch()
		}
		from = arrowUnitDatatype(t.Unit) - datatype.DatetimeSec + datatype.TimeSec
	default:
		if !isIntegerID(arr.DataType().ID()) {
			return nil, mismatch()
		}
		return castNumbers(f, arr, datatype.Int64, mismatch)
	}
	narrow := arr.DataType().ID() == arrow.DATE32 || arr.DataType().ID() == arrow.TIME32
	size := 8
	if narrow {
		size = 4
	}
	raw := rawValues(arr, size)
	if raw == nil {
		return nil, fmt.Errorf("column %q: malformed %s array: %w", f.Name, arr.DataType(), ErrMismatch)
	}
	if narrow {
		// 32-bit ticks: widen before scaling.
		ticks = make([]int64, n)
		for i, v := range view[int32](raw) {
			ticks[i] = int64(v)
		}
	} else {
		if from == f.Type {
			return raw, nil
		}
		ticks = view[int64](raw)
	}
	af, at := attos(from), attos(f.Type)
	if af == nil || at == nil {
		return nil, mismatch()
	}
	out := make([]int64, n)
	hasNulls := arr.NullN() > 0
	badRow := func(i int) error {
		return fmt.Errorf("column %q: row %d: %s value %s is not a whole number of %s ticks (or out of range): %w",
			f.Name, i, arr.DataType(), valueString(arr, i), f.Type, ErrMismatch)
	}
	// ratio is the coarser unit over the finer one.
	coarser := af.Cmp(at) >= 0
	ratio := new(big.Int)
	if coarser {
		ratio.Quo(af, at)
	} else {
		ratio.Quo(at, af)
	}
	if !ratio.IsInt64() {
		// Beyond int64 only a zero tick converts in either direction.
		for i, v := range ticks {
			if v != 0 && !(hasNulls && arr.IsNull(i)) {
				return nil, badRow(i)
			}
		}
		return arrow.Int64Traits.CastToBytes(out), nil
	}
	k := ratio.Int64()
	if coarser {
		// Coarser (or equal) source unit: multiply, checking overflow.
		for i, v := range ticks {
			p := v * k
			if v != 0 && (p/k != v || (v == -1 && k == -1)) {
				if hasNulls && arr.IsNull(i) {
					continue
				}
				return nil, badRow(i)
			}
			out[i] = p
		}
	} else {
		for i, v := range ticks {
			if v%k != 0 {
				if hasNulls && arr.IsNull(i) {
					continue
				}
				return nil, badRow(i)
			}
			out[i] = v / k
		}
	}
	return arrow.Int64Traits.CastToBytes(out), nil
}

// toEnum converts a column of an enumerated attribute into indices.
func toEnum(f Field, arr arrow.Array, mismatch func() error) ([]byte, error) {
	e := f.Enumeration
	if _, err := e.Dictionary(); err != nil {
		return nil, fmt.Errorf("column %q: %w", f.Name, err)
	}
	vf := e.valueField()
	n := arr.Len()
	idxField := Field{Name: f.Name, Type: f.Type, CellValNum: 1, Nullable: true}
	var idx []int64 // enumeration index per row, for the non-identity paths
	switch a := arr.(type) {
	case *array.Dictionary:
		vf.Nullable = true
		vdata, voffs, vvalid, err := ToTileDB(vf, a.Dictionary())
		if err != nil {
			return nil, fmt.Errorf("column %q: dictionary values: %w", f.Name, err)
		}
		dl := a.Dictionary().Len()
		remap := make([]int64, dl)
		identity := dl <= e.Len()
		for i := 0; i < dl; i++ {
			remap[i] = -1
			if vvalid[i] == 1 {
				if j, ok := e.index[string(cellBytes(vf, vdata, voffs, i))]; ok {
					remap[i] = j
				}
			}
			identity = identity && remap[i] == int64(i)
		}
		ind := a.Indices()
		if identity && sameNumber(ind.DataType().ID(), f.Type) {
			if raw := rawValues(ind, f.Type.Size()); raw != nil {
				if err := checkIndices(f, ind, int64(dl)); err != nil {
					return nil, err
				}
				return raw, nil
			}
		}
		if !isIntegerID(ind.DataType().ID()) {
			return nil, mismatch()
		}
		ib, err := castNumbers(idxField, ind, datatype.Int64, mismatch)
		if err != nil {
			return nil, err
		}
		src := view[int64](ib)
		idx = src
		if sameNumber(ind.DataType().ID(), datatype.Int64) {
			// castNumbers aliased the caller's index buffer: remap into
			// our own rather than rewrite the column we were handed.
			idx = make([]int64, n)
		} else if idx == nil {
			idx = []int64{}
		}
		for i, v := range src {
			if arr.IsNull(i) {
				idx[i] = 0
				continue
			}
			if v < 0 || v >= int64(dl) {
				return nil, fmt.Errorf("column %q: row %d: dictionary index %d outside %d values: %w", f.Name, i, v, dl, ErrMismatch)
			}
			if remap[v] < 0 {
				return nil, fmt.Errorf("column %q: row %d: value %s is not in enumeration %q: %w",
					f.Name, i, valueString(a.Dictionary(), int(v)), e.Name, ErrMismatch)
			}
			idx[i] = remap[v]
		}
	default:
		if isBytes(vf.Type) {
			c, ok, err := asByteCells(arr)
			if !ok {
				break
			}
			if err != nil {
				return nil, fmt.Errorf("column %q: %w", f.Name, err)
			}
			if c.value == nil {
				if _, _, ok := c.span(); !ok {
					return nil, fmt.Errorf("column %q: malformed %s offsets: %w", f.Name, arr.DataType(), ErrMismatch)
				}
			}
			idx = make([]int64, n)
			for i := 0; i < n; i++ {
				if arr.IsNull(i) {
					continue
				}
				j, ok := e.index[string(c.cell(i))]
				if !ok {
					return nil, fmt.Errorf("column %q: row %d: value %q is not in enumeration %q: %w", f.Name, i, c.cell(i), e.Name, ErrMismatch)
				}
				idx[i] = j
			}
		}
	}
	if idx == nil {
		if !isIntegerID(arr.DataType().ID()) {
			return nil, mismatch()
		}
		out, err := castNumbers(idxField, arr, f.Type, mismatch)
		if err != nil {
			return nil, err
		}
		if err := checkIndices(f, arr, int64(e.Len())); err != nil {
			return nil, err
		}
		return out, nil
	}
	// Indices are below the enumeration's length, so they fit f.Type only if
	// the enumeration does; castNumbers checks it.
	ia := array.NewInt64Data(array.NewData(arrow.PrimitiveTypes.Int64, n, []*memory.Buffer{nil, memory.NewBufferBytes(arrow.Int64Traits.CastToBytes(idx))}, nil, 0, 0))
	defer ia.Release()
	return castNumbers(idxField, ia, f.Type, mismatch)
}

// checkIndices verifies that the non-null integer values of arr lie in [0, limit).
func checkIndices(f Field, arr arrow.Array, limit int64) error {
	b, err := castNumbers(Field{Name: f.Name, Type: datatype.Int64, CellValNum: 1}, arr, datatype.Int64, func() error {
		return fmt.Errorf("column %q: indices of type %s: %w", f.Name, arr.DataType(), ErrMismatch)
	})
	if err != nil {
		return err
	}
	for i, v := range view[int64](b) {
		if (v < 0 || v >= limit) && arr.IsValid(i) {
			return fmt.Errorf("column %q: row %d: enumeration index %d outside %q's %d values: %w", f.Name, i, v, f.Enumeration.Name, limit, ErrMismatch)
		}
	}
	return nil
}
