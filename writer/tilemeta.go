package writer

import (
	"encoding/binary"
	"math"
	"unsafe"

	"github.com/tileflight/tileflight/format/datatype"
)

// The tile statistics below follow TileDB's rules to the letter, quirks
// included, because TileDB trusts them: it skips tiles by their min/max
// and answers sum/min/max/null_count aggregates over whole tiles from
// them. Where TileDB's arithmetic has an odd corner (NaN handling, the
// C-string comparison of strings, saturating sums that stop early) the
// same result is produced here.

// statKind says how a field's values are summarized.
type statKind uint8

const (
	statNone  statKind = iota
	statInt            // signed integers, datetimes, times: int64 sum
	statUint           // unsigned integers and bool: uint64 sum
	statFloat          // float32/float64: float64 sum
	statChar           // CHAR / STRING_ASCII fixed cells: C-string min/max
	statBytes          // BLOB and geometries: null counting only
)

func kindOf(t datatype.Datatype) statKind {
	switch t {
	case datatype.Int8, datatype.Int16, datatype.Int32, datatype.Int64:
		return statInt
	case datatype.Uint8, datatype.Uint16, datatype.Uint32, datatype.Uint64, datatype.Bool:
		return statUint
	case datatype.Float32, datatype.Float64:
		return statFloat
	case datatype.Char, datatype.StringASCII:
		return statChar
	case datatype.Blob, datatype.GeomWKB, datatype.GeomWKT:
		return statBytes
	}
	if t.IsDatetime() || t.IsTime() {
		return statInt
	}
	return statNone
}

// hasMinMax is TileDB's rule for which fields carry tile mins and maxes.
func hasMinMax(t datatype.Datatype, isDim, isVar bool, cvn uint32) bool {
	if isDim {
		return false
	}
	isChar := t == datatype.Char || t == datatype.StringASCII
	if isVar && !isChar {
		return false
	}
	if !isVar && cvn != 1 && !isChar {
		return false
	}
	switch t {
	case datatype.Any, datatype.Blob, datatype.GeomWKB, datatype.GeomWKT, datatype.StringUTF8,
		datatype.StringUTF16, datatype.StringUTF32, datatype.StringUCS2, datatype.StringUCS4:
		return false
	}
	return true
}

// hasSum is TileDB's rule for which fields carry tile sums.
func hasSum(t datatype.Datatype, isVar bool, cvn uint32) bool {
	if isVar || cvn != 1 {
		return false
	}
	switch t {
	case datatype.Any, datatype.Blob, datatype.GeomWKB, datatype.GeomWKT, datatype.StringUTF8,
		datatype.StringUTF16, datatype.StringUTF32, datatype.StringUCS2, datatype.StringUCS4,
		datatype.StringASCII:
		return false
	}
	return true
}

// strncmp compares like C's strncmp: unsigned bytes, stopping at the first
// difference, at a NUL, or after n bytes (and at the end of either slice,
// where the missing byte counts as NUL).
func strncmp(a, b []byte, n int) int {
	for i := 0; i < n; i++ {
		var x, y byte
		if i < len(a) {
			x = a[i]
		}
		if i < len(b) {
			y = b[i]
		}
		if x != y {
			if x < y {
				return -1
			}
			return 1
		}
		if x == 0 {
			return 0
		}
	}
	return 0
}

// tileStats is one tile's statistics for one field.
type tileStats struct {
	min, max []byte // nil: none (TileDB leaves the slot zeroed)
	sum      uint64 // raw bits: int64, uint64 or float64
	nulls    uint64
}

// statTile is one tile of one field as the statistics see it.
type statTile struct {
	n        int      // cells in the tile
	data     []byte   // fixed values, or var values
	offs     []uint64 // var: start offset of each cell
	valid    []byte   // nullable: one byte per cell
	slabs    [][2]int // cell ranges to summarize; nil = the whole tile
	cellSize int      // fixed cell size
}

func (t *statTile) ranges() [][2]int {
	if t.slabs == nil {
		return [][2]int{{0, t.n}}
	}
	return t.slabs
}

func (t *statTile) varCell(i int) []byte {
	end := uint64(len(t.data))
	if i+1 < len(t.offs) {
		end = t.offs[i+1]
	}
	return t.data[t.offs[i]:end]
}

type number interface {
	~int8 | ~int16 | ~int32 | ~int64 | ~uint8 | ~uint16 | ~uint32 | ~uint64 | ~float32 | ~float64
}

func asSlice[T number](b []byte) []T {
	var z T
	sz := int(unsafe.Sizeof(z))
	if len(b) < sz {
		return nil
	}
	return unsafe.Slice((*T)(unsafe.Pointer(&b[0])), len(b)/sz)
}

func toBytes[T number](v T) []byte {
	var z T
	sz := int(unsafe.Sizeof(z))
	out := make([]byte, sz)
	*(*T)(unsafe.Pointer(&out[0])) = v
	return out
}

// limits returns TileDB's starting min (the type's largest value) and max
// (its lowest value).
func limits[T number]() (lo, hi T) {
	// Generic construction through float64 would lose precision for
	// 64-bit integers; build each case exactly instead.
	switch p := any(&lo).(type) {
	case *int8:
		*p = math.MaxInt8
		*any(&hi).(*int8) = math.MinInt8
	case *int16:
		*p = math.MaxInt16
		*any(&hi).(*int16) = math.MinInt16
	case *int32:
		*p = math.MaxInt32
		*any(&hi).(*int32) = math.MinInt32
	case *int64:
		*p = math.MaxInt64
		*any(&hi).(*int64) = math.MinInt64
	case *uint8:
		*p = math.MaxUint8
	case *uint16:
		*p = math.MaxUint16
	case *uint32:
		*p = math.MaxUint32
	case *uint64:
		*p = math.MaxUint64
	case *float32:
		*p = math.MaxFloat32
		*any(&hi).(*float32) = -math.MaxFloat32
	case *float64:
		*p = math.MaxFloat64
		*any(&hi).(*float64) = -math.MaxFloat64
	}
	return lo, hi
}

// fixedStats summarizes a tile of single-value numeric cells of type T.
func fixedStats[T number](t *statTile, kind statKind, minmax, sum bool) tileStats {
	vals := asSlice[T](t.data)
	var st tileStats
	mn, mx := limits[T]()
	var si int64
	var su uint64
	var sf float64
	seen := 0 // cells summed so far, this range's included
	for _, r := range t.ranges() {
		if t.valid != nil && !minmax {
			// TileDB counts the whole tile's nulls once per slab here.
			for c := 0; c < t.n; c++ {
				if t.valid[c] == 0 {
					st.nulls++
				}
			}
		}
		if t.valid == nil && minmax && sum && kind != statNone && kind != statBytes {
			// One pass for bounds and sum: the sum is added plainly, in
			// cell order, and kept if the bounds show that no saturation
			// check could have fired (else redone with the checks).
			seen += r[1] - r[0]
			if fusedStats(vals[r[0]:r[1]], kind, &mn, &mx, &si, &su, &sf, seen) {
				continue
			}
		} else {
			for c := r[0]; c < r[1]; c++ {
				if t.valid != nil && t.valid[c] == 0 {
					if minmax {
						st.nulls++
					}
					continue
				}
				v := vals[c]
				if minmax {
					if !(mn < v) {
						mn = v
					}
					if !(mx > v) {
						mx = v
					}
				}
			}
			if !sum {
				continue
			}
			seen += r[1] - r[0]
		}
		if t.valid == nil && minmax && sumCannotSaturate(kind, seen, float64(mn), float64(mx)) {
			// The saturation checks below cannot fire: add plainly.
			switch kind {
			case statInt, statChar:
				for _, v := range vals[r[0]:r[1]] {
					si += int64(v)
				}
			case statUint:
				for _, v := range vals[r[0]:r[1]] {
					su += uint64(v)
				}
			case statFloat:
				for _, v := range vals[r[0]:r[1]] {
					sf += float64(v)
				}
			}
			continue
		}
		switch kind {
		case statInt, statChar:
			for c := r[0]; c < r[1]; c++ {
				if t.valid != nil && t.valid[c] == 0 {
					continue
				}
				v := int64(vals[c])
				if si > 0 && v > 0 && si > math.MaxInt64-v {
					si = math.MaxInt64
					break
				}
				if si < 0 && v < 0 && si < math.MinInt64-v {
					si = math.MinInt64
					break
				}
				si += v
			}
		case statUint:
			for c := r[0]; c < r[1]; c++ {
				if t.valid != nil && t.valid[c] == 0 {
					continue
				}
				v := uint64(vals[c])
				if su > math.MaxUint64-v {
					su = math.MaxUint64
					break
				}
				su += v
			}
		case statFloat:
			for c := r[0]; c < r[1]; c++ {
				if t.valid != nil && t.valid[c] == 0 {
					continue
				}
				v := float64(vals[c])
				if (sf < 0) == (v < 0) && math.Abs(sf) > math.MaxFloat64-math.Abs(v) {
					if sf < 0 {
						sf = -math.MaxFloat64
					} else {
						sf = math.MaxFloat64
					}
					break
				}
				sf += v
			}
		}
	}
	if minmax {
		st.min, st.max = toBytes(mn), toBytes(mx)
	}
	switch kind {
	case statInt, statChar:
		st.sum = uint64(si)
	case statUint:
		st.sum = su
	case statFloat:
		st.sum = math.Float64bits(sf)
	}
	return st
}

// partsStats is f.stats of a whole tile (slabs in cell order, no
// validity) given as consecutive pieces, for the fields whose bounds and sum one fused
// pass takes. The pieces fold in cell order into the same accumulators,
// so the result is bit for bit the one of the concatenated tile: a sum
// is taken only if the bounds of every cell so far show it cannot
// saturate, which holds for each prefix whenever it holds for the whole
// tile. ok is false when that pass does not apply (the caller then
// gathers the tile and takes f.stats).
func (f *field) partsStats(parts [][]byte) (st tileStats, ok bool) {
	if f.isVar || f.nullable {
		return tileStats{}, false
	}
	switch f.kind {
	case statNone, statBytes:
		return tileStats{}, true // as f.stats: nothing to summarize
	case statInt, statUint, statFloat:
		if !f.hasMinMax && !f.hasSum {
			return tileStats{}, true
		}
		if !f.hasMinMax || !f.hasSum {
			return tileStats{}, false
		}
	default:
		return tileStats{}, false
	}
	switch f.typ.Size() {
	case 1:
		if f.kind == statInt {
			return fusedParts[int8](parts, f.kind)
		}
		return fusedParts[uint8](parts, f.kind)
	case 2:
		if f.kind == statInt {
			return fusedParts[int16](parts, f.kind)
		}
		return fusedParts[uint16](parts, f.kind)
	case 4:
		switch f.kind {
		case statInt:
			return fusedParts[int32](parts, f.kind)
		case statFloat:
			return fusedParts[float32](parts, f.kind)
		}
		return fusedParts[uint32](parts, f.kind)
	case 8:
		switch f.kind {
		case statInt:
			return fusedParts[int64](parts, f.kind)
		case statFloat:
			return fusedParts[float64](parts, f.kind)
		}
		return fusedParts[uint64](parts, f.kind)
	}
	return tileStats{}, false
}

func fusedParts[T number](parts [][]byte, kind statKind) (tileStats, bool) {
	mn, mx := limits[T]()
	var si int64
	var su uint64
	var sf float64
	seen := 0
	for _, p := range parts {
		vals := asSlice[T](p)
		seen += len(vals)
		if !fusedStats(vals, kind, &mn, &mx, &si, &su, &sf, seen) {
			return tileStats{}, false
		}
	}
	st := tileStats{min: toBytes(mn), max: toBytes(mx)}
	switch kind {
	case statInt:
		st.sum = uint64(si)
	case statUint:
		st.sum = su
	case statFloat:
		st.sum = math.Float64bits(sf)
	}
	return st, true
}

// fusedStats folds vals into the bounds *mn, *mx and, when the bounds
// then show the sum cannot saturate (seen cells in all), into the sum of
// kind (statInt, statChar, statUint or statFloat); it reports whether the
// sum was taken. The bounds are always updated, the sums only on success.
func fusedStats[T number](vals []T, kind statKind, mn, mx *T, si *int64, su *uint64, sf *float64, seen int) bool {
	lo, hi := *mn, *mx
	var ai int64
	var au uint64
	var af float64
	switch kind {
	case statFloat:
		af = *sf
		for _, v := range vals {
			if !(lo < v) {
				lo = v
			}
			if !(hi > v) {
				hi = v
			}
			af += float64(v)
		}
	case statUint:
		au = *su
		for _, v := range vals {
			if !(lo < v) {
				lo = v
			}
			if !(hi > v) {
				hi = v
			}
			au += uint64(v)
		}
	default:
		ai = *si
		for _, v := range vals {
			if !(lo < v) {
				lo = v
			}
			if !(hi > v) {
				hi = v
			}
			ai += int64(v)
		}
	}
	*mn, *mx = lo, hi
	if !sumCannotSaturate(kind, seen, float64(lo), float64(hi)) {
		return false
	}
	switch kind {
	case statFloat:
		*sf = af
	case statUint:
		*su = au
	default:
		*si = ai
	}
	return true
}

// sumCannotSaturate reports whether n values within [mn, mx] are
// certainly too small in magnitude for the running sum to reach the
// limits where TileDB saturates it, with a wide margin for rounding (NaN
// and infinite bounds never qualify).
func sumCannotSaturate(kind statKind, n int, mn, mx float64) bool {
	m := max(math.Abs(mn), math.Abs(mx))
	bound := float64(n) * m
	switch kind {
	case statInt, statChar:
		return bound < 1<<61
	case statUint:
		return bound < 1<<62
	case statFloat:
		return bound < math.MaxFloat64/16
	}
	return false
}

// charStats summarizes fixed CHAR / STRING_ASCII cells (any cell_val_num).
func charStats(t *statTile, cvn uint32, sum bool) tileStats {
	cs := t.cellSize
	var st tileStats
	cell := func(c int) []byte { return t.data[c*cs : (c+1)*cs] }
	var mn, mx []byte
	for _, r := range t.ranges() {
		if t.valid == nil {
			if len(t.data) == 0 {
				continue
			}
			start := r[0]
			if mn == nil && start < r[1] {
				mn, mx = cell(start), cell(start)
				start++
			}
			for c := start; c < r[1]; c++ {
				v := cell(c)
				if strncmp(mn, v, cs) > 0 {
					mn = v
				}
				if strncmp(mx, v, cs) < 0 {
					mx = v
				}
			}
		} else {
			for c := r[0]; c < r[1]; c++ {
				if t.valid[c] == 0 {
					st.nulls++
					continue
				}
				v := cell(c)
				if mn == nil || strncmp(mn, v, cs) > 0 {
					mn = v
				}
				if mx == nil || strncmp(mx, v, cs) < 0 {
					mx = v
				}
			}
		}
	}
	st.min, st.max = mn, mx
	if sum && cvn == 1 {
		s := fixedStats[int8](t, statInt, false, true)
		st.sum = s.sum
	}
	return st
}

// varStats summarizes var-sized CHAR / STRING_ASCII cells.
func varStats(t *statTile) tileStats {
	var st tileStats
	if len(t.offs) == 0 {
		return st
	}
	var mn, mx []byte
	set := false
	upd := func(v []byte) {
		if !set {
			mn, mx, set = v, v, true
			return
		}
		if cmp := strncmp(mn, v, min(len(mn), len(v))); cmp > 0 || (cmp == 0 && len(v) < len(mn)) {
			mn = v
		}
		if cmp := strncmp(mx, v, min(len(mx), len(v))); cmp < 0 || (cmp == 0 && len(v) > len(mx)) {
			mx = v
		}
	}
	for _, r := range t.ranges() {
		for c := r[0]; c < r[1]; c++ {
			if t.valid != nil && t.valid[c] == 0 {
				st.nulls++
				continue
			}
			upd(t.varCell(c))
		}
	}
	if set {
		st.min, st.max = mn, mx
		if mn == nil {
			st.min = []byte{}
		}
		if mx == nil {
			st.max = []byte{}
		}
	}
	return st
}

// fieldStats computes one tile's statistics for field f.
func (f *field) stats(t *statTile) tileStats {
	mm, sm := f.hasMinMax, f.hasSum
	if f.isVar {
		if !mm {
			return tileStats{}
		}
		return varStats(t)
	}
	switch f.kind {
	case statChar:
		return charStats(t, f.cvn, sm)
	case statBytes:
		return fixedStats[uint8](t, statNone, false, false)
	case statNone:
		return tileStats{}
	}
	if !mm && !sm && t.valid == nil {
		return tileStats{}
	}
	switch f.typ.Size() {
	case 1:
		if f.kind == statInt {
			return fixedStats[int8](t, f.kind, mm, sm)
		}
		return fixedStats[uint8](t, f.kind, mm, sm)
	case 2:
		if f.kind == statInt {
			return fixedStats[int16](t, f.kind, mm, sm)
		}
		return fixedStats[uint16](t, f.kind, mm, sm)
	case 4:
		switch f.kind {
		case statInt:
			return fixedStats[int32](t, f.kind, mm, sm)
		case statFloat:
			return fixedStats[float32](t, f.kind, mm, sm)
		}
		return fixedStats[uint32](t, f.kind, mm, sm)
	case 8:
		switch f.kind {
		case statInt:
			return fixedStats[int64](t, f.kind, mm, sm)
		case statFloat:
			return fixedStats[float64](t, f.kind, mm, sm)
		}
		return fixedStats[uint64](t, f.kind, mm, sm)
	}
	return tileStats{}
}

func le64(v uint64) []byte { return binary.LittleEndian.AppendUint64(nil, v) }
