package sqlsvc

// After the engine planned a statement, three rewrites move work into the
// native reader (docs/protocol.md, "Flight SQL"):
//
//   - a Filter right above a scan of one of our tables gives the scan the
//     terms it can answer exactly (filter.go) and keeps the rest;
//   - a whole-table aggregate (no GROUP BY) of COUNT(*), COUNT(col), SUM,
//     MIN, MAX and AVG over such a scan becomes one native `aggregates`
//     query, answered by the reader (from tile statistics where it can);
//     the engine then sees one row with the values it would have computed,
//     of the same Go types, so result types do not change;
//   - a GROUP BY of plain columns with those aggregates over such a scan
//     runs as a vectorized hash aggregation over the scan's batches
//     (groupby.go); the engine sees one row per group.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync/atomic"

	"github.com/apache/arrow-go/v18/arrow"
	gms "github.com/dolthub/go-mysql-server/sql"
	"github.com/dolthub/go-mysql-server/sql/expression"
	"github.com/dolthub/go-mysql-server/sql/expression/function/aggregation"
	"github.com/dolthub/go-mysql-server/sql/plan"
	"github.com/dolthub/go-mysql-server/sql/transform"

	"github.com/tileflight/tileflight/errkind"
	"github.com/tileflight/tileflight/query"
)

// noPushdown turns the rewrites off (FuzzPushdown compares results with
// and without them).
var noPushdown atomic.Bool

// pushdown applies the rewrites to a planned statement.
func (s *Server) pushdown(sctx *gms.Context, n gms.Node) (gms.Node, error) {
	if noPushdown.Load() {
		return n, nil
	}
	n, _, err := transform.Node(n, func(n gms.Node) (gms.Node, transform.TreeIdentity, error) {
		f, ok := n.(*plan.Filter)
		if !ok {
			return n, transform.SameTree, nil
		}
		child, rest, ok, err := pushFilterInto(f.Child, f.Expression)
		if err != nil || !ok {
			return n, transform.SameTree, err
		}
		if len(rest) == 0 {
			return child, transform.NewTree, nil
		}
		return plan.NewFilter(expression.JoinAnd(rest...), child), transform.NewTree, nil
	})
	if err != nil {
		return nil, err
	}
	n, _, err = transform.Node(n, func(n gms.Node) (gms.Node, transform.TreeIdentity, error) {
		g, ok := n.(*plan.GroupBy)
		if !ok {
			return n, transform.SameTree, nil
		}
		if len(g.GroupByExprs) != 0 {
			if a := s.nativeGroupBy(sctx, g); a != nil {
				return a, transform.NewTree, nil
			}
			return n, transform.SameTree, nil
		}
		if a := s.nativeAggregate(sctx, g); a != nil {
			return a, transform.NewTree, nil
		}
		return n, transform.SameTree, nil
	})
	return n, err
}

// pushFilterInto gives the scan under a Filter the WHERE terms it can
// answer; rest are the terms left to the engine. ok false: the child is
// not a scan of ours, or no term was pushed.
func pushFilterInto(child gms.Node, e gms.Expression) (gms.Node, []gms.Expression, bool, error) {
	var cols gms.ColSet
	inner := child
	alias, isAlias := child.(*plan.TableAlias)
	if isAlias {
		cols = alias.Columns()
		inner = alias.Child
	}
	var t *table
	switch x := inner.(type) {
	case *plan.ResolvedTable:
		t, _ = ourTable(x.Table)
		if !isAlias {
			cols = x.Columns()
		}
	case *plan.IndexedTableAccess:
		t, _ = ourTable(x.Table)
		if !isAlias {
			cols = x.Columns()
		}
	}
	if t == nil {
		return nil, nil, false, nil
	}
	c, ranges, rest := t.pushFilter(e, cols)
	if c == "" && len(ranges) == 0 {
		return nil, nil, false, nil
	}
	with := func(tb *table) *table {
		nt := *tb
		switch {
		case c == "":
		case nt.filter == "":
			nt.filter = c
		default:
			nt.filter = "(" + nt.filter + ") and (" + c + ")"
		}
		if len(ranges) > 0 {
			nt.extra = nt.extra.clone()
			if nt.extra == nil {
				nt.extra = dimRanges{}
			}
			for d, rs := range ranges {
				nt.extra.intersect(d, rs)
			}
		}
		return &nt
	}
	var out gms.Node
	switch x := inner.(type) {
	case *plan.ResolvedTable:
		_, wrap := ourTable(x.Table)
		nt := *x
		nt.Table = wrap(with(t))
		out = &nt
	case *plan.IndexedTableAccess:
		ni := *x
		_, wrap := ourTable(x.Table)
		it, ok := wrap(with(t)).(gms.IndexedTable)
		if !ok {
			return nil, nil, false, nil
		}
		ni.Table = it
		if rt, ok := x.TableNode.(*plan.ResolvedTable); ok {
			if tb, wrap := ourTable(rt.Table); tb != nil {
				nt := *rt
				nt.Table = wrap(with(tb))
				ni.TableNode = &nt
			}
		}
		out = &ni
	}
	if isAlias {
		n, err := alias.WithChildren(out)
		if err != nil {
			return nil, nil, false, err
		}
		out = n
	}
	return out, rest, true, nil
}

// ourTable finds our table in an engine table (the engine wraps tables in
// a ProcessTable that tracks the query), and gives a function that wraps
// a replacement the same way.
func ourTable(tb gms.Table) (*table, func(*table) gms.Table) {
	switch x := tb.(type) {
	case *table:
		return x, func(n *table) gms.Table { return n }
	case *plan.ProcessTable:
		t, ok := x.Table.(*table)
		if !ok {
			return nil, nil
		}
		return t, func(n *table) gms.Table {
			return plan.NewProcessTable(n, x.OnPartitionDone, x.OnPartitionStart, x.OnRowNext)
		}
	}
	return nil, nil
}

// aggKind is one SQL aggregate the reader answers.
type aggKind int

const (
	aggCountStar aggKind = iota
	aggCount
	aggSum
	aggMin
	aggMax
	aggAvg
)

type aggItem struct {
	kind     aggKind
	col      string // the array's column name
	nullable bool
}

// nativeAgg is a whole-table aggregate answered by the reader: one row.
type nativeAgg struct {
	srv   *Server
	t     *table
	q     *query.Query
	items []aggItem
	sch   gms.Schema
	// orig is the engine's plan of the same aggregate, run instead when
	// the reader refuses (TileDB's sums fail on overflow, SQL's do not).
	orig gms.Node
}

var _ gms.ExecSourceRel = (*nativeAgg)(nil)

func (a *nativeAgg) Resolved() bool       { return true }
func (a *nativeAgg) IsReadOnly() bool     { return true }
func (a *nativeAgg) Schema() gms.Schema   { return a.sch }
func (a *nativeAgg) Children() []gms.Node { return nil }
func (a *nativeAgg) String() string       { return "NativeAggregate(" + a.describe() + ")" }
func (a *nativeAgg) DebugString() string  { return a.String() }
func (a *nativeAgg) describe() string     { return queryJSON(a.q) }
func (a *nativeAgg) WithChildren(ch ...gms.Node) (gms.Node, error) {
	if len(ch) != 0 {
		return nil, fmt.Errorf("NativeAggregate takes no children, got %d", len(ch))
	}
	return a, nil
}

// nativeAggregate turns a GroupBy without grouping into a native
// aggregate query, or returns nil when some part cannot be answered
// exactly by the reader.
func (s *Server) nativeAggregate(sctx *gms.Context, g *plan.GroupBy) *nativeAgg {
	var cols gms.ColSet
	scan := g.Child
	if ta, ok := scan.(*plan.TableAlias); ok {
		cols = ta.Columns()
		scan = ta.Child
	} else if tn, ok := scan.(plan.TableIdNode); ok {
		cols = tn.Columns()
	}
	t, ranges, layout, ok := scanOf(sctx, scan)
	if !ok || t.arr.B2ND {
		return nil
	}
	_ = layout
	dense := t.arr.Dense
	if dense && (t.filter != "" || !t.allWritten(ranges)) {
		// TileDB's dense count counts every cell of the subarray, failing
		// ones too, and its sums skip unwritten cells that the table holds
		// as fill values.
		return nil
	}
	var items []aggItem
	for _, e := range g.SelectedExprs {
		if al, ok := e.(*expression.Alias); ok {
			e = al.Child
		}
		it, ok := t.aggItem(e, cols)
		if !ok {
			return nil
		}
		items = append(items, it)
	}
	if len(items) == 0 {
		return nil
	}
	q, empty := t.nativeQuery(ranges, -1)
	if empty {
		return nil
	}
	q.Columns, q.Layout, q.DropFailing = nil, query.LayoutDefault, false
	want := map[query.Aggregate]bool{}
	add := func(field, op string) {
		a := query.Aggregate{Field: field, Op: op}
		if !want[a] {
			want[a] = true
			q.Aggregates = append(q.Aggregates, a)
		}
	}
	add("*", "count")
	for _, it := range items {
		if it.nullable {
			add(it.col, "null_count")
		}
		switch it.kind {
		case aggSum:
			add(it.col, "sum")
		case aggMin:
			add(it.col, "min")
		case aggMax:
			add(it.col, "max")
		case aggAvg:
			add(it.col, "mean")
		}
	}
	return &nativeAgg{srv: s, t: t, q: q, items: items, sch: g.Schema(), orig: g}
}

// aggItem recognizes one aggregate the reader can answer.
func (t *table) aggItem(e gms.Expression, cols gms.ColSet) (aggItem, bool) {
	var kind aggKind
	var child gms.Expression
	switch x := e.(type) {
	case *aggregation.Count:
		kind, child = aggCount, x.Child
		switch c := child.(type) {
		case *expression.Star:
			return aggItem{kind: aggCountStar}, true
		case *expression.Literal:
			if c.Value() != nil {
				return aggItem{kind: aggCountStar}, true
			}
			return aggItem{}, false
		}
	case *aggregation.Sum:
		kind, child = aggSum, x.Child
	case *aggregation.Min:
		kind, child = aggMin, x.Child
	case *aggregation.Max:
		kind, child = aggMax, x.Child
	case *aggregation.Avg:
		kind, child = aggAvg, x.Child
	default:
		return aggItem{}, false
	}
	gf, ok := child.(*expression.GetField)
	if !ok || cols.Len() == 0 || !cols.Contains(gf.Id()) {
		return aggItem{}, false
	}
	var f arrow.Field
	found := false
	for _, af := range t.arrow.Fields() {
		if strings.EqualFold(af.Name, gf.Name()) {
			f, found = af, true
		}
	}
	if !found {
		return aggItem{}, false
	}
	it := aggItem{kind: kind, col: f.Name, nullable: f.Nullable}
	if kind == aggCount {
		return it, true
	}
	// sum/min/max/mean: numbers of one value per cell, not enumerated
	s := t.arr
	if k := s.AttrIndex(f.Name); k >= 0 {
		at := &s.Attrs[k]
		if at.Enumeration != "" || at.CellValNum != 1 || at.Type.IsDatetime() || at.Type.IsTime() {
			return aggItem{}, false
		}
	} else if k := s.DimIndex(f.Name); k >= 0 {
		d := &s.Dims[k]
		if d.CellValNum != 1 || d.Type.IsDatetime() || d.Type.IsTime() {
			return aggItem{}, false
		}
	}
	switch f.Type.ID() {
	case arrow.INT8, arrow.INT16, arrow.INT32, arrow.INT64, arrow.UINT8, arrow.UINT16, arrow.UINT32, arrow.UINT64, arrow.FLOAT32, arrow.FLOAT64:
		return it, true
	}
	return aggItem{}, false
}

// allWritten says whether fragments wrote every cell the ranges (nil:
// the non-empty domain) select, so that TileDB's dense aggregates, which
// skip unwritten cells, see every cell the table holds.
func (t *table) allWritten(ranges dimRanges) bool {
	sub, empty := t.withExtra(ranges).subarray(t.arr)
	if empty {
		return false
	}
	ned := t.arr.NonEmpty
	if ned == nil {
		return false
	}
	dims := t.arr.Dims
	lo := make([]int64, len(dims))
	hi := make([]int64, len(dims))
	for i := range dims {
		if kindOf(dims[i].Type) != kindInt || dims[i].Type.IsDatetime() {
			return false
		}
		lo[i], hi[i] = ned[i].Lo.Int, ned[i].Hi.Int
	}
	for _, dr := range sub {
		i := t.arr.DimIndex(dr.Dim)
		l, h := int64(1<<62), int64(-1<<62)
		for _, r := range dr.Ranges {
			a, err1 := r.Lo.Num.Int64()
			b, err2 := r.Hi.Num.Int64()
			if err1 != nil || err2 != nil {
				return false
			}
			l, h = min(l, a), max(h, b)
		}
		lo[i], hi[i] = l, h
	}
	// Dense fragments write every cell of their non-empty domain: the
	// box is written when the fragments' boxes cover it. Subtract each
	// fragment's box from what is left uncovered.
	type box struct{ lo, hi []int64 }
	left := []box{{lo, hi}}
	for _, f := range t.arr.Fragments {
		fned := f.NonEmpty
		if len(fned) != len(dims) {
			continue
		}
		flo := make([]int64, len(dims))
		fhi := make([]int64, len(dims))
		for i := range dims {
			flo[i], fhi[i] = fned[i].Lo.Int, fned[i].Hi.Int
		}
		var next []box
		for _, b := range left {
			overlap := true
			for i := range dims {
				if fhi[i] < b.lo[i] || flo[i] > b.hi[i] {
					overlap = false
					break
				}
			}
			if !overlap {
				next = append(next, b)
				continue
			}
			// split b around the fragment's box, one dimension at a time
			cur := box{append([]int64(nil), b.lo...), append([]int64(nil), b.hi...)}
			for i := range dims {
				if cur.lo[i] < flo[i] {
					p := box{append([]int64(nil), cur.lo...), append([]int64(nil), cur.hi...)}
					p.hi[i] = flo[i] - 1
					next = append(next, p)
					cur.lo[i] = flo[i]
				}
				if cur.hi[i] > fhi[i] {
					p := box{append([]int64(nil), cur.lo...), append([]int64(nil), cur.hi...)}
					p.lo[i] = fhi[i] + 1
					next = append(next, p)
					cur.hi[i] = fhi[i]
				}
			}
		}
		left = next
		if len(left) == 0 {
			return true
		}
		if len(left) > 4096 {
			return false // too fragmented to tell cheaply: leave it to the engine
		}
	}
	return len(left) == 0
}

func (a *nativeAgg) RowIter(ctx *gms.Context, row gms.Row) (gms.RowIter, error) {
	out, err := a.compute(ctx)
	if errkind.Of(err) == errkind.InvalidArgument && strings.Contains(err.Error(), "overflow") {
		return a.srv.engine.Analyzer.ExecBuilder.Build(ctx, a.orig, row)
	}
	if err != nil {
		return nil, err
	}
	return gms.RowsToRowIter(out), nil
}

// compute runs the native query and renders its one row as the engine
// would have computed the aggregates: COUNT as int64, SUM and AVG as
// float64 (the engine sums non-decimal values as doubles), MIN and MAX as
// the column's values; NULL when no value counts.
func (a *nativeAgg) compute(ctx context.Context) (gms.Row, error) {
	bs, err := a.srv.eng.Scan(ctx, a.q)
	if err != nil {
		return nil, err
	}
	defer bs.Close()
	rec, err := bs.Next(ctx)
	if errors.Is(err, io.EOF) || (err == nil && rec.NumRows() != 1) {
		if rec != nil {
			rec.Release()
		}
		return nil, fmt.Errorf("array %q: the aggregate query gave no row", a.t.path)
	}
	if err != nil {
		return nil, err
	}
	defer rec.Release()
	col := func(name string) arrow.Array {
		for i, f := range rec.Schema().Fields() {
			if f.Name == name {
				return rec.Column(i)
			}
		}
		return nil
	}
	num := func(name string) (float64, bool) {
		c := col(name)
		if c == nil || c.IsNull(0) {
			return 0, false
		}
		switch v := toGMS(c)(0).(type) {
		case int64:
			return float64(v), true
		case uint64:
			return float64(v), true
		case float64:
			return v, true
		}
		return 0, false
	}
	cells, ok := num("count(*)")
	if !ok {
		return nil, fmt.Errorf("array %q: the aggregate query gave no count(*)", a.t.path)
	}
	out := make(gms.Row, len(a.items))
	for i, it := range a.items {
		values := cells
		if it.nullable {
			n, ok := num("null_count(" + it.col + ")")
			if !ok {
				return nil, fmt.Errorf("array %q: no null_count(%s)", a.t.path, it.col)
			}
			values -= n
		}
		switch it.kind {
		case aggCountStar:
			out[i] = int64(cells)
			continue
		case aggCount:
			out[i] = int64(values)
			continue
		}
		if values == 0 {
			out[i] = nil
			continue
		}
		switch it.kind {
		case aggSum, aggAvg:
			name := "sum(" + it.col + ")"
			if it.kind == aggAvg {
				name = "mean(" + it.col + ")"
			}
			v, ok := num(name)
			if !ok {
				return nil, fmt.Errorf("array %q: no %s", a.t.path, name)
			}
			out[i] = v
		case aggMin, aggMax:
			name := "min(" + it.col + ")"
			if it.kind == aggMax {
				name = "max(" + it.col + ")"
			}
			c := col(name)
			if c == nil {
				return nil, fmt.Errorf("array %q: no %s", a.t.path, name)
			}
			out[i] = toGMS(c)(0)
		}
	}
	return out, nil
}
