package sqlsvc

// Ranges of integer and float dimensions, as the subarray of a scan: the
// engine's index lookups (index.go) are turned into them exactly.

import (
	"encoding/json"
	"math"
	"math/big"
	"sort"
	"strconv"

	"github.com/shopspring/decimal"

	"github.com/tileflight/tileflight/format/datatype"
	"github.com/tileflight/tileflight/query"
	"github.com/tileflight/tileflight/sqlsvc/tables"
)

// rng is an inclusive range of a dimension: lo/hi for integer dimensions
// (as int64; uint64 dimensions only below 2^63), flo/fhi for floats.
type rng struct {
	lo, hi   int64
	flo, fhi float64
}

// dimRanges are the ranges pushed down per dimension index.
type dimRanges map[int][]rng

func (d dimRanges) clone() dimRanges {
	out := dimRanges{}
	for k, v := range d {
		out[k] = append([]rng(nil), v...)
	}
	return out
}

type dimKind int

const (
	kindNone dimKind = iota
	kindInt
	kindFloat32
	kindFloat64
)

func kindOf(t datatype.Datatype) dimKind {
	switch {
	case t == datatype.Float32:
		return kindFloat32
	case t == datatype.Float64:
		return kindFloat64
	case t.IsInteger() && !t.IsDatetime() && !t.IsTime():
		return kindInt
	}
	return kindNone
}

func (d dimRanges) intersect(dim int, rs []rng) {
	cur, ok := d[dim]
	if !ok {
		d[dim] = rs
		return
	}
	var out []rng
	for _, a := range cur {
		for _, b := range rs {
			r := rng{lo: max(a.lo, b.lo), hi: min(a.hi, b.hi), flo: math.Max(a.flo, b.flo), fhi: math.Min(a.fhi, b.fhi)}
			out = append(out, r)
		}
	}
	d[dim] = out
}

// subarray renders the ranges as the query's subarray, clipped to the
// non-empty domain (a dense array's table is the cells of its non-empty
// domain, as an unrestricted read returns them) with overlaps merged (a
// dense read returns a cell once per range holding it). empty: no cell
// can match.
func (d dimRanges) subarray(a *tables.Array) ([]query.DimRanges, bool) {
	if len(d) == 0 {
		return nil, false
	}
	ned := a.NonEmpty
	if ned == nil {
		return nil, true
	}
	dims := a.Dims
	idx := make([]int, 0, len(d))
	for k := range d {
		idx = append(idx, k)
	}
	sort.Ints(idx)
	var out []query.DimRanges
	for _, i := range idx {
		dim := &dims[i]
		kind := kindOf(dim.Type)
		if kind == kindNone && tickUnit(dim.Type) > 0 {
			kind = kindInt // datetime ranges are ticks (filter.go)
		}
		var kept []rng
		for _, r := range d[i] {
			if kind == kindInt {
				var lo, hi int64
				if dim.Type == datatype.Uint64 {
					ulo, uhi := ned[i].Lo.Uint, ned[i].Hi.Uint
					if ulo > math.MaxInt64 || uhi > math.MaxInt64 {
						return nil, false // not pushed (see dimTerm); unreachable
					}
					lo, hi = int64(ulo), int64(uhi)
				} else {
					lo, hi = ned[i].Lo.Int, ned[i].Hi.Int
				}
				r.lo, r.hi = max(r.lo, lo), min(r.hi, hi)
				if r.lo <= r.hi {
					kept = append(kept, r)
				}
			} else {
				lo, hi := ned[i].Lo.Float, ned[i].Hi.Float
				r.flo, r.fhi = math.Max(r.flo, lo), math.Min(r.fhi, hi)
				if r.flo <= r.fhi {
					kept = append(kept, r)
				}
			}
		}
		if len(kept) == 0 {
			return nil, true
		}
		kept = merge(kind, kept)
		dr := query.DimRanges{Dim: dim.Name}
		for _, r := range kept {
			if kind == kindInt {
				dr.Ranges = append(dr.Ranges, query.Range{
					Lo: query.Value{Num: jsonInt(r.lo)}, Hi: query.Value{Num: jsonInt(r.hi)}})
			} else {
				bits := 64
				if kind == kindFloat32 {
					bits = 32
				}
				dr.Ranges = append(dr.Ranges, query.Range{
					Lo: query.Value{Num: jsonFloat(r.flo, bits)}, Hi: query.Value{Num: jsonFloat(r.fhi, bits)}})
			}
		}
		out = append(out, dr)
	}
	return out, false
}

func merge(kind dimKind, rs []rng) []rng {
	if kind == kindInt {
		sort.Slice(rs, func(i, j int) bool { return rs[i].lo < rs[j].lo })
	} else {
		sort.Slice(rs, func(i, j int) bool { return rs[i].flo < rs[j].flo })
	}
	out := rs[:1]
	for _, r := range rs[1:] {
		last := &out[len(out)-1]
		if kind == kindInt {
			if last.hi == math.MaxInt64 || r.lo <= last.hi+1 {
				last.hi = max(last.hi, r.hi)
				continue
			}
		} else if r.flo <= last.fhi {
			last.fhi = math.Max(last.fhi, r.fhi)
			continue
		}
		out = append(out, r)
	}
	return out
}

func jsonInt(v int64) json.Number { return json.Number(strconv.FormatInt(v, 10)) }

func jsonFloat(v float64, bits int) json.Number {
	return json.Number(strconv.FormatFloat(v, 'g', -1, bits))
}

// keyDecimal is a numeric index key as an exact decimal.
func keyDecimal(key any) (decimal.Decimal, bool) {
	switch v := key.(type) {
	case int8:
		return decimal.NewFromInt(int64(v)), true
	case int16:
		return decimal.NewFromInt(int64(v)), true
	case int32:
		return decimal.NewFromInt(int64(v)), true
	case int64:
		return decimal.NewFromInt(v), true
	case uint8:
		return decimal.NewFromInt(int64(v)), true
	case uint16:
		return decimal.NewFromInt(int64(v)), true
	case uint32:
		return decimal.NewFromInt(int64(v)), true
	case uint64:
		return decimal.NewFromBigInt(new(big.Int).SetUint64(v), 0), true
	case float64:
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return decimal.Decimal{}, false
		}
		return decimal.NewFromFloat(v), true
	case float32:
		return decimal.NewFromFloat32(v), true
	case decimal.Decimal:
		return v, true
	}
	return decimal.Decimal{}, false
}

// bound is the range of dimension values v op c selects.
func bound(kind dimKind, op string, c decimal.Decimal) (rng, bool) {
	all := rng{lo: math.MinInt64, hi: math.MaxInt64, flo: math.Inf(-1), fhi: math.Inf(1)}
	switch kind {
	case kindInt:
		fl, ce := c.Floor(), c.Ceil()
		if !fl.IsInteger() || fl.Cmp(decimal.NewFromInt(math.MinInt64)) < 0 || ce.Cmp(decimal.NewFromInt(math.MaxInt64)) > 0 {
			return rng{}, false
		}
		f, cl := fl.IntPart(), ce.IntPart()
		exact := c.IsInteger()
		r := all
		switch op {
		case "=":
			if !exact {
				r.lo, r.hi = 1, 0 // no integer equals a fraction
			} else {
				r.lo, r.hi = f, f
			}
		case ">=":
			r.lo = cl
		case ">":
			if exact {
				if f == math.MaxInt64 {
					return rng{}, false
				}
				r.lo = f + 1
			} else {
				r.lo = cl
			}
		case "<=":
			r.hi = f
		case "<":
			if exact {
				if f == math.MinInt64 {
					return rng{}, false
				}
				r.hi = f - 1
			} else {
				r.hi = f
			}
		}
		return r, true
	case kindFloat64, kindFloat32:
		// The engine compares a float column with a constant as doubles
		// (as MySQL does), so the constant is taken as its nearest double.
		v, _ := c.Float64()
		r := all
		up := func(x float64) float64 { return math.Nextafter(x, math.Inf(1)) }
		down := func(x float64) float64 { return math.Nextafter(x, math.Inf(-1)) }
		if kind == kindFloat32 {
			// the float32 values whose double passes the comparison
			up = func(x float64) float64 { return float64(math.Nextafter32(float32(x), float32(math.Inf(1)))) }
			down = func(x float64) float64 { return float64(math.Nextafter32(float32(x), float32(math.Inf(-1)))) }
			// smallest float32 >= v, largest float32 <= v
			ceil32 := float64(float32(v))
			if ceil32 < v {
				ceil32 = up(ceil32)
			}
			floor32 := float64(float32(v))
			if floor32 > v {
				floor32 = down(floor32)
			}
			switch op {
			case "=":
				if ceil32 != v {
					return rng{flo: 1, fhi: 0}, true
				}
				r.flo, r.fhi = v, v
			case ">=":
				r.flo = ceil32
			case ">":
				if ceil32 == v {
					r.flo = up(v)
				} else {
					r.flo = ceil32
				}
			case "<=":
				r.fhi = floor32
			case "<":
				if floor32 == v {
					r.fhi = down(v)
				} else {
					r.fhi = floor32
				}
			}
			return r, true
		}
		switch op {
		case "=":
			r.flo, r.fhi = v, v
		case ">=":
			r.flo = v
		case ">":
			r.flo = up(v)
		case "<=":
			r.fhi = v
		case "<":
			r.fhi = down(v)
		}
		return r, true
	}
	return rng{}, false
}
