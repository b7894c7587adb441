package sparse

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"github.com/tileflight/tileflight/format/hilbert"
	"math"
	"slices"
	"sort"

	"github.com/tileflight/tileflight/format/datatype"
	"github.com/tileflight/tileflight/format/fragmeta"
	"github.com/tileflight/tileflight/format/schema"
	"github.com/tileflight/tileflight/reader/plan"
)

// kind is how the values of a dimension compare.
type kind uint8

const (
	kindSigned kind = iota
	kindUnsigned
	kindFloat
	kindBytes // var-sized strings, and anything else compared byte-wise
)

// dimInfo is what the read path needs to know about one dimension.
type dimInfo struct {
	idx   int
	name  string
	typ   datatype.Datatype
	isVar bool
	size  int // byte size of a fixed-size coordinate
	kind  kind
	field fragmeta.Field

	ranges []plan.Range
	// lo/hi hold the ranges decoded for the numeric fast paths.
	ilo, ihi []int64
	ulo, uhi []uint64
	flo, fhi []float64
	// With many ranges, their bounds sorted apart (see rangeCount).
	many       bool
	silo, sihi []int64
	sulo, suhi []uint64
	sflo, sfhi []float64
	sblo, sbhi [][]byte

	// tile order: tile index of a coordinate (fixed dims with an extent).
	hasExtent bool
	domLo     []byte
	extent    []byte

	// Hilbert mapping of a numeric coordinate onto [0, maxBucket].
	hDomLo, hDomRange float64
}

func newDimInfo(i int, d *schema.Dimension, ranges []plan.Range) *dimInfo {
	di := &dimInfo{idx: i, name: d.Name, typ: d.Type, isVar: d.IsVar(), size: d.Type.Size(),
		field: fragmeta.Field{Name: d.Name, Type: d.Type, CellValNum: d.CellValNum}, ranges: ranges}
	switch {
	case di.isVar || di.size == 0:
		di.kind = kindBytes
	case d.Type.IsFloat():
		di.kind = kindFloat
	case d.Type.IsSigned():
		di.kind = kindSigned
	case d.Type.IsInteger():
		di.kind = kindUnsigned
	default:
		di.kind = kindBytes
	}
	for _, r := range ranges {
		switch di.kind {
		case kindSigned:
			di.ilo = append(di.ilo, schema.AsInt64(d.Type, r.Lo))
			di.ihi = append(di.ihi, schema.AsInt64(d.Type, r.Hi))
		case kindUnsigned:
			di.ulo = append(di.ulo, schema.AsUint64(d.Type, r.Lo))
			di.uhi = append(di.uhi, schema.AsUint64(d.Type, r.Hi))
		case kindFloat:
			di.flo = append(di.flo, schema.AsFloat64(d.Type, r.Lo))
			di.fhi = append(di.fhi, schema.AsFloat64(d.Type, r.Hi))
		}
	}
	if len(ranges) > manyRanges {
		di.many = true
		switch di.kind {
		case kindSigned:
			di.silo, di.sihi = sorted(di.ilo), sorted(di.ihi)
		case kindUnsigned:
			di.sulo, di.suhi = sorted(di.ulo), sorted(di.uhi)
		case kindFloat:
			di.sflo, di.sfhi = sorted(di.flo), sorted(di.fhi)
		default:
			for _, r := range ranges {
				di.sblo, di.sbhi = append(di.sblo, r.Lo), append(di.sbhi, r.Hi)
			}
			slices.SortFunc(di.sblo, bytes.Compare)
			slices.SortFunc(di.sbhi, bytes.Compare)
		}
	}
	if !di.isVar && len(d.TileExtent) == di.size && len(d.Domain) == 2*di.size && di.size > 0 {
		di.hasExtent = true
		di.domLo = d.Domain[:di.size]
		di.extent = d.TileExtent
	}
	if !di.isVar && len(d.Domain) == 2*di.size && di.size > 0 {
		lo, hi := schema.AsFloat64(d.Type, d.Lo()), schema.AsFloat64(d.Type, d.Hi())
		if d.Type == datatype.Uint64 {
			lo, hi = float64(schema.AsUint64(d.Type, d.Lo())), float64(schema.AsUint64(d.Type, d.Hi()))
		}
		di.hDomLo, di.hDomRange = lo, hi-lo
	}
	return di
}

// compare orders two coordinates numerically (fixed) or byte-wise (var).
func (d *dimInfo) compare(a, b []byte) int {
	switch d.kind {
	case kindSigned:
		x, y := d.int(a), d.int(b)
		return cmpOrdered(x, y)
	case kindUnsigned:
		return cmpOrdered(d.uint(a), d.uint(b))
	case kindFloat:
		return cmpOrdered(d.float(a), d.float(b))
	}
	return bytes.Compare(a, b)
}

func cmpOrdered[T int64 | uint64 | float64](a, b T) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func (d *dimInfo) int(b []byte) int64 {
	switch d.size {
	case 8:
		return int64(binary.LittleEndian.Uint64(b))
	case 4:
		return int64(int32(binary.LittleEndian.Uint32(b)))
	case 2:
		return int64(int16(binary.LittleEndian.Uint16(b)))
	case 1:
		return int64(int8(b[0]))
	}
	return 0
}

func (d *dimInfo) uint(b []byte) uint64 {
	switch d.size {
	case 8:
		return binary.LittleEndian.Uint64(b)
	case 4:
		return uint64(binary.LittleEndian.Uint32(b))
	case 2:
		return uint64(binary.LittleEndian.Uint16(b))
	case 1:
		return uint64(b[0])
	}
	return 0
}

func (d *dimInfo) float(b []byte) float64 {
	if d.size == 4 {
		return float64(math.Float32frombits(binary.LittleEndian.Uint32(b)))
	}
	return math.Float64frombits(binary.LittleEndian.Uint64(b))
}

// sortKey maps a coordinate to a uint64 whose order agrees with the
// coordinate order wherever the keys differ; equal keys need a full
// compare (string prefixes, -0 and +0).
func (d *dimInfo) sortKey(b []byte) uint64 {
	switch d.kind {
	case kindSigned:
		return uint64(d.int(b)) ^ (1 << 63)
	case kindUnsigned:
		return d.uint(b)
	case kindFloat:
		f := d.float(b)
		if f == 0 {
			f = 0 // -0 and +0 are equal coordinates
		}
		u := math.Float64bits(f)
		if u&(1<<63) != 0 {
			return ^u
		}
		return u | 1<<63
	}
	var k [8]byte
	copy(k[:], b)
	return binary.BigEndian.Uint64(k[:])
}

// manyRanges is the range count beyond which rangeCount searches the
// sorted bounds instead of trying every range: a cell is tested against
// each range otherwise, and 40,000 ranges made a tile of 10,000 cells
// take seconds.
const manyRanges = 16

func sorted[T cmp.Ordered](v []T) []T {
	out := slices.Clone(v)
	slices.Sort(out)
	return out
}

// holding is the number of ranges holding x, given their low and high
// bounds each sorted: those starting at or before x, less those ending
// before it (which start before it too).
func holding[T cmp.Ordered](los, his []T, x T) int {
	le := sort.Search(len(los), func(i int) bool { return los[i] > x })
	lt := sort.Search(len(his), func(i int) bool { return his[i] >= x })
	return le - lt
}

// rangeCount is the number of the dimension's ranges that hold v.
func (d *dimInfo) rangeCount(v []byte) int {
	if d.many {
		switch d.kind {
		case kindSigned:
			return holding(d.silo, d.sihi, d.int(v))
		case kindUnsigned:
			return holding(d.sulo, d.suhi, d.uint(v))
		case kindFloat:
			return holding(d.sflo, d.sfhi, d.float(v))
		default:
			le := sort.Search(len(d.sblo), func(i int) bool { return bytes.Compare(d.sblo[i], v) > 0 })
			lt := sort.Search(len(d.sbhi), func(i int) bool { return bytes.Compare(d.sbhi[i], v) >= 0 })
			return le - lt
		}
	}
	n := 0
	switch d.kind {
	case kindSigned:
		x := d.int(v)
		for i := range d.ilo {
			if d.ilo[i] <= x && x <= d.ihi[i] {
				n++
			}
		}
	case kindUnsigned:
		x := d.uint(v)
		for i := range d.ulo {
			if d.ulo[i] <= x && x <= d.uhi[i] {
				n++
			}
		}
	case kindFloat:
		x := d.float(v)
		for i := range d.flo {
			if d.flo[i] <= x && x <= d.fhi[i] {
				n++
			}
		}
	default:
		for _, r := range d.ranges {
			if bytes.Compare(r.Lo, v) <= 0 && bytes.Compare(v, r.Hi) <= 0 {
				n++
			}
		}
	}
	return n
}

// overlaps reports whether [lo, hi] meets any range, and whether exactly
// one range meets it and covers it whole (every value inside counts once).
func (d *dimInfo) overlaps(lo, hi []byte) (meets, coveredOnce bool) {
	count, covered := 0, false
	for _, r := range d.ranges {
		if d.compare(lo, r.Hi) > 0 || d.compare(r.Lo, hi) > 0 {
			continue
		}
		count++
		if d.compare(r.Lo, lo) <= 0 && d.compare(hi, r.Hi) <= 0 {
			covered = true
		}
	}
	return count > 0, count == 1 && covered
}

// tileIndex is the index of the space tile holding v along this dimension,
// computed the way TileDB does: unsigned integer division of the distance
// from the domain's start (in the dimension's own width), or the truncated
// quotient for floats.
func (d *dimInfo) tileIndex(v []byte) uint64 {
	switch d.kind {
	case kindFloat:
		if d.size == 4 {
			x := math.Float32frombits(binary.LittleEndian.Uint32(v))
			lo := math.Float32frombits(binary.LittleEndian.Uint32(d.domLo))
			e := math.Float32frombits(binary.LittleEndian.Uint32(d.extent))
			return floatToUint64(float64((x - lo) / e))
		}
		x, lo, e := d.float(v), d.float(d.domLo), d.float(d.extent)
		return floatToUint64((x - lo) / e)
	case kindSigned, kindUnsigned:
		mask := uint64(math.MaxUint64)
		if d.size < 8 {
			mask = 1<<(8*d.size) - 1
		}
		diff := (d.uint(v) - d.uint(d.domLo)) & mask
		e := d.uint(d.extent) & mask
		if e == 0 {
			return 0
		}
		return diff / e
	}
	return 0
}

func floatToUint64(f float64) uint64 {
	if f != f || f <= 0 {
		return 0
	}
	if f >= 1<<64 {
		return math.MaxUint64
	}
	return uint64(f)
}

// hilbertCoord maps a coordinate onto [0, maxBucket] as TileDB does before
// computing a Hilbert value (package hilbert).
func (d *dimInfo) hilbertCoord(v []byte, bits int, maxBucket uint64) uint64 {
	if d.kind == kindBytes {
		return hilbert.StringBucket(v, bits)
	}
	var x float64
	switch d.kind {
	case kindSigned:
		x = float64(d.int(v))
	case kindUnsigned:
		x = float64(d.uint(v))
	default:
		x = d.float(v)
	}
	return hilbert.NumberBucket(x, d.hDomLo, d.hDomRange, maxBucket)
}

// rangesMeet reports whether two inclusive ranges of the dimension meet.
func (d *dimInfo) rangesMeet(a, b fragmeta.Range) bool {
	return d.compare(a.Start, b.End) <= 0 && d.compare(b.Start, a.End) <= 0
}
