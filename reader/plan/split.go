package plan

import (
	"encoding/binary"
	"math"
	"math/big"

	"github.com/tileflight/tileflight/format/datatype"
	"github.com/tileflight/tileflight/format/fragmeta"
	"github.com/tileflight/tileflight/format/schema"
	"github.com/tileflight/tileflight/query"
)

// EstimateRows returns the number of rows the plan produces and whether
// that number is exact. Dense results are exact (the cells of the
// subarray). Sparse results are exact only when it is cheap to know: no
// fragment, or a single fragment entirely inside the subarray and the
// timestamp range, with no delete or update commits. Otherwise -1, false.
func EstimateRows(p *Plan) (int64, bool) {
	n, ok := estimate(p)
	if !ok {
		return -1, false
	}
	if p.Limit >= 0 && n > p.Limit {
		n = p.Limit
	}
	return n, true
}

func estimate(p *Plan) (int64, bool) {
	if p.Empty {
		return 0, true
	}
	a := p.Array
	s := a.Schema
	if s.IsDense() {
		total := big.NewInt(1)
		for i := range s.Dimensions {
			sum := new(big.Int)
			for _, r := range p.Subarray[i] {
				sum.Add(sum, rangeLen(&s.Dimensions[i], r))
			}
			total.Mul(total, sum)
		}
		if !total.IsInt64() {
			return 0, false
		}
		return total.Int64(), true
	}
	if len(a.Fragments) == 0 {
		return 0, true
	}
	if len(a.Fragments) > 1 || (a.View != nil && len(a.View.Conditions) > 0) {
		return 0, false
	}
	f := a.Fragments[0]
	if f.Start < a.Start || f.End > a.End {
		return 0, false
	}
	ned := f.NonEmptyDomain()
	if len(ned) != len(s.Dimensions) {
		return 0, false
	}
	for i := range s.Dimensions {
		fd := dimField(&s.Dimensions[i])
		inside := false
		for _, r := range p.Subarray[i] {
			if fragmeta.Compare(fd, r.Lo, ned[i].Start) <= 0 && fragmeta.Compare(fd, ned[i].End, r.Hi) <= 0 {
				inside = true
				break
			}
		}
		// Several ranges may overlap and count a cell twice: only one
		// range per dimension keeps the count exact.
		if !inside || len(p.Subarray[i]) != 1 {
			return 0, false
		}
	}
	n, err := f.CellNum()
	if err != nil || n > math.MaxInt64 {
		return 0, false
	}
	return int64(n), true
}

// rangeLen is the number of integer coordinates of an integer range.
func rangeLen(d *schema.Dimension, r Range) *big.Int {
	lo, hi := intValue(d.Type, r.Lo), intValue(d.Type, r.Hi)
	n := new(big.Int).Sub(hi, lo)
	return n.Add(n, big.NewInt(1))
}

func intValue(t datatype.Datatype, b []byte) *big.Int {
	if t == datatype.Uint64 || t == datatype.Uint32 || t == datatype.Uint16 || t == datatype.Uint8 {
		return new(big.Int).SetUint64(schema.AsUint64(t, b))
	}
	return big.NewInt(schema.AsInt64(t, b))
}

// Split returns at most n queries covering disjoint parts of p's result
// whose union is exactly the result. Each is a complete ticket: every
// dimension's ranges are written out and the timestamp range is pinned to
// the one p was opened at, so that all parts read the same fragments.
// The first dimension's ranges are cut (dense: at space tile boundaries;
// sparse: by value, at tile extent boundaries where the dimension has
// one); a plan with a limit, an empty plan, or a string first dimension
// is not split.
func Split(p *Plan, n int) []*query.Query {
	base := *p.Query
	base.Partitions = 0
	base.Timestamp = &query.Timestamp{Start: p.Array.Start, End: p.Array.End}
	if p.Array.B2ND != nil {
		base.Timestamp = nil // a .b2nd has no time travel
	}
	if n <= 1 || p.Limit >= 0 || p.Empty || len(p.Subarray) == 0 {
		return []*query.Query{&base}
	}
	s := p.Array.Schema
	d0 := &s.Dimensions[0]
	var parts [][]Range
	switch {
	case d0.IsVar():
		return []*query.Query{&base}
	case d0.Type.IsFloat():
		parts = splitFloat(d0, p.Subarray[0], n)
	default:
		parts = splitInt(d0, p.Subarray[0], n)
	}
	if len(parts) <= 1 {
		return []*query.Query{&base}
	}
	out := make([]*query.Query, 0, len(parts))
	for _, part := range parts {
		q := base
		q.Subarray = make([]query.DimRanges, len(s.Dimensions))
		for i := range s.Dimensions {
			rs := p.Subarray[i]
			if i == 0 {
				rs = part
			}
			dr := query.DimRanges{Dim: s.Dimensions[i].Name}
			for _, r := range rs {
				dr.Ranges = append(dr.Ranges, query.Range{Lo: formatValue(&s.Dimensions[i], r.Lo), Hi: formatValue(&s.Dimensions[i], r.Hi)})
			}
			q.Subarray[i] = dr
		}
		out = append(out, &q)
	}
	return out
}

// splitInt cuts integer ranges into n groups of about equal coordinate
// counts, each cut snapped down to a tile boundary (the domain's low bound
// plus a multiple of the tile extent) when the dimension has an extent.
func splitInt(d *schema.Dimension, rs []Range, n int) [][]Range {
	t := d.Type
	dlo := intValue(t, d.Lo())
	var ext *big.Int
	if e, ok := d.TileExtentUint64(); ok && e > 0 && d.Lo() != nil {
		ext = new(big.Int).SetUint64(e)
	}
	total := new(big.Int)
	for _, r := range rs {
		total.Add(total, rangeLen(d, r))
	}
	var parts [][]Range
	var cur []Range
	ri := 0
	pos := new(big.Int) // coordinates consumed so far
	lo := intValue(t, rs[0].Lo)
	for k := 1; k < n; k++ {
		target := new(big.Int).Mul(total, big.NewInt(int64(k)))
		target.Quo(target, big.NewInt(int64(n)))
		// Walk to the range holding the target position.
		for ri < len(rs) {
			hi := intValue(t, rs[ri].Hi)
			left := new(big.Int).Sub(hi, lo)
			left.Add(left, big.NewInt(1))
			if new(big.Int).Add(pos, left).Cmp(target) > 0 {
				break
			}
			cur = append(cur, Range{Lo: encodeInt(t, lo), Hi: clone(rs[ri].Hi)})
			pos.Add(pos, left)
			ri++
			if ri < len(rs) {
				lo = intValue(t, rs[ri].Lo)
			}
		}
		if ri >= len(rs) {
			break
		}
		cut := new(big.Int).Add(lo, new(big.Int).Sub(target, pos))
		if ext != nil {
			// Snap down to the start of the tile holding cut.
			off := new(big.Int).Sub(cut, dlo)
			off.Sub(off, new(big.Int).Mod(off, ext))
			cut = off.Add(off, dlo)
		}
		if cut.Cmp(lo) > 0 {
			prev := new(big.Int).Sub(cut, big.NewInt(1))
			cur = append(cur, Range{Lo: encodeInt(t, lo), Hi: encodeInt(t, prev)})
			pos.Add(pos, new(big.Int).Sub(cut, lo))
			lo = cut
		}
		if len(cur) > 0 {
			parts = append(parts, cur)
			cur = nil
		}
	}
	for ; ri < len(rs); ri++ {
		cur = append(cur, Range{Lo: encodeInt(t, lo), Hi: clone(rs[ri].Hi)})
		if ri+1 < len(rs) {
			lo = intValue(t, rs[ri+1].Lo)
		}
	}
	if len(cur) > 0 {
		parts = append(parts, cur)
	}
	return parts
}

func encodeInt(t datatype.Datatype, v *big.Int) []byte {
	var u uint64
	if v.Sign() < 0 {
		u = uint64(v.Int64())
	} else {
		u = v.Uint64()
	}
	out := make([]byte, t.Size())
	for k := range out {
		out[k] = byte(u >> (8 * k))
	}
	return out
}

// splitFloat cuts each float range into pieces of about equal width and
// deals whole pieces to n groups; a cut at v ends the lower piece at the
// float just below v, so no value falls in two pieces.
func splitFloat(d *schema.Dimension, rs []Range, n int) [][]Range {
	t := d.Type
	get := func(b []byte) float64 { return schema.AsFloat64(t, b) }
	put := func(f float64) []byte {
		if t == datatype.Float32 {
			b := make([]byte, 4)
			binary.LittleEndian.PutUint32(b, math.Float32bits(float32(f)))
			return b
		}
		b := make([]byte, 8)
		binary.LittleEndian.PutUint64(b, math.Float64bits(f))
		return b
	}
	below := func(f float64) float64 {
		if t == datatype.Float32 {
			return float64(math.Nextafter32(float32(f), float32(math.Inf(-1))))
		}
		return math.Nextafter(f, math.Inf(-1))
	}
	var width float64
	for _, r := range rs {
		width += get(r.Hi) - get(r.Lo)
	}
	if width == 0 || math.IsInf(width, 0) || math.IsNaN(width) {
		return [][]Range{rs}
	}
	step := width / float64(n)
	var parts [][]Range
	var cur []Range
	acc := 0.0
	for _, r := range rs {
		lo, hi := get(r.Lo), get(r.Hi)
		for len(parts) < n-1 && acc+(hi-lo) > step {
			cut := lo + (step - acc)
			if t == datatype.Float32 {
				cut = float64(float32(cut))
			}
			if cut <= lo || cut > hi {
				break
			}
			cur = append(cur, Range{Lo: put(lo), Hi: put(below(cut))})
			parts = append(parts, cur)
			cur, acc, lo = nil, 0, cut
		}
		cur = append(cur, Range{Lo: put(lo), Hi: put(hi)})
		acc += hi - lo
	}
	if len(cur) > 0 {
		parts = append(parts, cur)
	}
	return parts
}
