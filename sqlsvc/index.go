package sqlsvc

// Dimension ranges reach the scan through the engine's index interface:
// a table offers an index over its integer and float dimensions (one
// over all of them in schema order, and one per dimension), and the
// planner hands it the ranges it derived from WHERE (comparisons,
// BETWEEN, IN, and their AND/OR combinations) as an index lookup. The
// ranges are exact (PreciseMatch), so the engine drops the terms they
// answer; each box of the lookup becomes the subarray of one scan.

import (
	"fmt"
	"math"
	"sort"
	"strings"

	gms "github.com/dolthub/go-mysql-server/sql"

	"github.com/tileflight/tileflight/format/datatype"
	"github.com/tileflight/tileflight/query"
)

// dimIndex is an index over dimensions of a table.
type dimIndex struct {
	t    *table
	id   string
	dims []int
}

var _ gms.OrderedIndex = (*dimIndex)(nil)

func (x *dimIndex) ID() string       { return x.id }
func (x *dimIndex) Database() string { return dbOf(x.t.path) }
func (x *dimIndex) Table() string    { return x.t.name }
func (x *dimIndex) Expressions() []string {
	out := make([]string, len(x.dims))
	for i, d := range x.dims {
		out[i] = strings.ToLower(x.t.name) + "." + strings.ToLower(x.t.arr.Dims[d].Name)
	}
	return out
}
func (x *dimIndex) IsUnique() bool                        { return false }
func (x *dimIndex) IsSpatial() bool                       { return false }
func (x *dimIndex) IsFullText() bool                      { return false }
func (x *dimIndex) IsVector() bool                        { return false }
func (x *dimIndex) Comment() string                       { return "the array's dimensions: ranges become the subarray" }
func (x *dimIndex) IndexType() string                     { return "BTREE" }
func (x *dimIndex) IsGenerated() bool                     { return false }
func (x *dimIndex) PrefixLengths() []uint16               { return nil }
func (x *dimIndex) CanSupportOrderBy(gms.Expression) bool { return false }

// Order: a scan returns cells in the array's order, not the index's, so
// the engine must keep its sorts.
func (x *dimIndex) Order() gms.IndexOrder { return gms.IndexOrderNone }
func (x *dimIndex) Reversible() bool      { return false }

func (x *dimIndex) ColumnExpressionTypes() []gms.ColumnExpressionType {
	exprs := x.Expressions()
	out := make([]gms.ColumnExpressionType, len(x.dims))
	for i, d := range x.dims {
		out[i] = gms.ColumnExpressionType{Expression: exprs[i], Type: x.t.full[d].Type}
	}
	return out
}

// CanSupport: every bound must turn into an exact dimension range.
func (x *dimIndex) CanSupport(_ *gms.Context, ranges ...gms.Range) bool {
	for _, r := range ranges {
		mr, ok := r.(gms.MySQLRange)
		if !ok || len(mr) > len(x.dims) {
			return false
		}
		for j, ce := range mr {
			if _, _, ok := cutRange(kindOf(x.t.arr.Dims[x.dims[j]].Type), ce); !ok {
				return false
			}
		}
	}
	return true
}

// pushable are the dimensions whose ranges the subarray can hold.
func (t *table) pushable() []int {
	var out []int
	for i := range t.arr.Dims {
		d := &t.arr.Dims[i]
		if kindOf(d.Type) == kindNone || d.Var {
			continue
		}
		if d.Type == datatype.Uint64 && d.Domain.Hi.Uint > math.MaxInt64 {
			continue // ranges are held as int64
		}
		out = append(out, i)
	}
	return out
}

func (t *table) GetIndexes(*gms.Context) ([]gms.Index, error) {
	dims := t.pushable()
	if len(dims) == 0 {
		return nil, nil
	}
	// One index per dimension, then one over all of them (schema order):
	// the planner keeps the first index that serves a WHERE term unless a
	// later one serves more, and a composite index whose leading column is
	// unconstrained would win a tie but serve nothing. The engine takes a
	// lookup's rows to come in index order (it drops an ORDER BY on the
	// index's columns), so only the indexes a layout can serve are
	// offered: the leading dimension (row-major) and the trailing one
	// (col-major).
	var out []gms.Index
	if len(dims) > 1 {
		last := len(t.arr.Dims) - 1
		for _, d := range dims {
			if d != 0 && d != last {
				continue
			}
			out = append(out, &dimIndex{t: t, id: "dimension_" + t.arr.Dims[d].Name, dims: []int{d}})
		}
	}
	if dims[0] == 0 {
		out = append(out, &dimIndex{t: t, id: "dimensions", dims: dims})
	}
	return out, nil
}

func (t *table) IndexedAccess(_ *gms.Context, lookup gms.IndexLookup) gms.IndexedTable {
	if x, ok := lookup.Index.(*dimIndex); ok && x.t.path == t.path {
		return t
	}
	return nil
}

// PreciseMatch: the scan returns exactly the cells in the ranges.
func (t *table) PreciseMatch() bool { return true }

func (t *table) LookupPartitions(_ *gms.Context, lookup gms.IndexLookup) (gms.PartitionIter, error) {
	parts, err := t.lookupPartitions(lookup)
	if err != nil {
		return nil, err
	}
	return gms.PartitionsToPartitionIter(parts...), nil
}

// lookupPartitions turns a lookup's boxes into scans: boxes that differ
// only in the index's first dimension share one scan (a list of ranges
// on that dimension); the others get one scan each. The planner's boxes
// do not overlap, so no cell is read twice.
func (t *table) lookupPartitions(lookup gms.IndexLookup) ([]gms.Partition, error) {
	x, ok := lookup.Index.(*dimIndex)
	if !ok {
		return nil, fmt.Errorf("lookup on a foreign index %s", lookup.Index.ID())
	}
	if lookup.IsEmptyRange {
		return []gms.Partition{partition{none: true}}, nil
	}
	rc, ok := lookup.Ranges.(gms.MySQLRangeCollection)
	if !ok {
		return nil, fmt.Errorf("index lookup ranges of type %T", lookup.Ranges)
	}
	// Rows must come in index order: row-major for an index led by the
	// first dimension, col-major for one on the last.
	layout := query.LayoutRowMajor
	if x.dims[0] != 0 {
		layout = query.LayoutColMajor
	}
	var parts []gms.Partition
	lastKey := ""
	first := x.dims[0]
	for _, r := range rc {
		box := dimRanges{}
		empty := false
		for j, ce := range r {
			dim := x.dims[j]
			rr, e, ok := cutRange(kindOf(t.arr.Dims[dim].Type), ce)
			if !ok {
				return nil, fmt.Errorf("array %q: dimension %q: index range %v cannot be pushed down", t.path, t.arr.Dims[dim].Name, ce)
			}
			if e {
				empty = true
				break
			}
			if rr.lo == math.MinInt64 && rr.hi == math.MaxInt64 && math.IsInf(rr.flo, -1) && math.IsInf(rr.fhi, 1) {
				continue // the whole dimension
			}
			box[dim] = []rng{rr}
		}
		if empty {
			continue
		}
		var keyParts []string
		for dim, rs := range box {
			if dim != first {
				keyParts = append(keyParts, fmt.Sprint(dim, rs))
			}
		}
		sort.Strings(keyParts)
		key := strings.Join(keyParts, ";")
		// Consecutive boxes (in the lookup's ascending order) that differ
		// only in the first dimension share a scan; merging others would
		// break the order.
		if n := len(parts); n > 0 && key == lastKey {
			g := parts[n-1].(partition)
			_, had := g.ranges[first]
			_, has := box[first]
			if had && has {
				g.ranges[first] = append(g.ranges[first], box[first]...)
				parts[n-1] = g
				continue
			}
		}
		parts = append(parts, partition{ranges: box, layout: layout})
		lastKey = key
	}
	if len(parts) == 0 {
		return []gms.Partition{partition{none: true}}, nil
	}
	return parts, nil
}

// cutRange is the dimension range of one column of an index range: ok
// false when a bound is not a number the dimension can hold exactly,
// empty when no value passes.
func cutRange(kind dimKind, ce gms.MySQLRangeColumnExpr) (r rng, empty bool, ok bool) {
	r = rng{lo: math.MinInt64, hi: math.MaxInt64, flo: math.Inf(-1), fhi: math.Inf(1)}
	if kind == kindNone {
		return r, false, false
	}
	apply := func(op string, key any) bool {
		d, ok := keyDecimal(key)
		if !ok {
			return false
		}
		b, ok := bound(kind, op, d)
		if !ok {
			return false
		}
		switch op {
		case ">=", ">":
			r.lo, r.flo = max(r.lo, b.lo), math.Max(r.flo, b.flo)
		case "<=", "<":
			r.hi, r.fhi = min(r.hi, b.hi), math.Min(r.fhi, b.fhi)
		}
		return true
	}
	switch c := ce.LowerBound.(type) {
	case gms.Below:
		if !apply(">=", c.Key) {
			return r, false, false
		}
	case gms.Above:
		if !apply(">", c.Key) {
			return r, false, false
		}
	case gms.BelowNull, gms.AboveNull:
		// dimensions hold no nulls: no lower bound
	case gms.AboveAll:
		return r, true, true
	default:
		return r, false, false
	}
	switch c := ce.UpperBound.(type) {
	case gms.Above:
		if !apply("<=", c.Key) {
			return r, false, false
		}
	case gms.Below:
		if !apply("<", c.Key) {
			return r, false, false
		}
	case gms.AboveAll:
	case gms.AboveNull, gms.BelowNull:
		// only NULL (or nothing) passes, and dimensions hold no nulls
		return r, true, true
	default:
		return r, false, false
	}
	if kind == kindInt {
		return r, r.lo > r.hi, true
	}
	return r, r.flo > r.fhi || math.IsNaN(r.flo) || math.IsNaN(r.fhi), true
}

// RowCount tells the planner the table's size, so that it weighs index
// lookups (pushed-down ranges) against whole scans: the cells of the
// non-empty domain for a dense array, the sum of the fragments' cells for
// a sparse one.
func (t *table) RowCount(*gms.Context) (uint64, bool, error) {
	var n uint64
	if t.arr.Dense {
		ned := t.arr.NonEmpty
		if ned == nil {
			return 0, true, nil
		}
		n = 1
		for i := range t.arr.Dims {
			lo, hi := ned[i].Lo.Int, ned[i].Hi.Int
			if hi < lo {
				return 0, false, nil
			}
			n *= uint64(hi-lo) + 1
		}
		return n, true, nil
	}
	for _, f := range t.arr.Fragments {
		c, ok := f.Cells, f.CellsKnown
		if !ok {
			return 0, false, nil // unknown: the planner's default
		}
		n += c
	}
	return n, false, nil
}

func (t *table) DataLength(ctx *gms.Context) (uint64, error) {
	n, _, err := t.RowCount(ctx)
	return n * 8 * uint64(len(t.full)), err
}
