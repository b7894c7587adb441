package sqlsvc

// A GROUP BY of plain columns over one scan of one of our tables, with
// COUNT(*), COUNT(col), SUM, AVG, MIN and MAX, runs as a vectorized hash
// aggregation over the scan's Arrow batches (package sqlsvc/groupagg)
// instead of the engine's row-at-a-time grouping: the engine sees one row
// per group, of the values and Go types its own GroupBy would have given,
// and applies HAVING, ORDER BY and the projection above it as before.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"strings"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"
	gms "github.com/dolthub/go-mysql-server/sql"
	"github.com/dolthub/go-mysql-server/sql/expression"
	"github.com/dolthub/go-mysql-server/sql/expression/function/aggregation"
	"github.com/dolthub/go-mysql-server/sql/plan"

	"github.com/tileflight/tileflight/errkind"
	"github.com/tileflight/tileflight/query"
	"github.com/tileflight/tileflight/sqlsvc/groupagg"
)

// groupByBudget bounds the memory of one statement's groups when the
// statement has no -sql-memory bound. Past it the statement falls back to
// the engine's own grouping. With a bound, the groups get what the
// statement has left of it, and past that the statement fails as the
// engine's grouping would.
var groupByBudget int64 = groupagg.DefaultBudget

// groupOut is where one output column of the grouped row comes from: a key
// (key >= 0) or an aggregate (agg >= 0).
type groupOut struct{ key, agg int }

// aggAny is a column selected but not grouped by: any value of the
// group (only a GROUP BY has those).
const aggAny aggKind = -1

// nativeGroupBy is a GROUP BY answered by groupagg over one scan.
type nativeGroupBy struct {
	srv  *Server
	t    *table
	q    *query.Query
	keys []string // the array's column names of the keys
	aggs []aggItem
	outs []groupOut
	sch  gms.Schema
	// orig is the engine's plan, run instead when the groups outgrow
	// their bound.
	orig gms.Node
}

var _ gms.ExecSourceRel = (*nativeGroupBy)(nil)

func (a *nativeGroupBy) Resolved() bool       { return true }
func (a *nativeGroupBy) IsReadOnly() bool     { return true }
func (a *nativeGroupBy) Schema() gms.Schema   { return a.sch }
func (a *nativeGroupBy) Children() []gms.Node { return nil }
func (a *nativeGroupBy) String() string {
	return "NativeGroupBy(" + a.describe() + ")"
}
func (a *nativeGroupBy) DebugString() string { return a.String() }
func (a *nativeGroupBy) describe() string {
	var ags []string
	for _, it := range a.aggs {
		if it.kind == aggCountStar {
			ags = append(ags, "count(*)")
			continue
		}
		ags = append(ags, groupOp(it.kind).String()+"("+it.col+")")
	}
	return fmt.Sprintf("keys %s, aggregates %s, over scan %s", strings.Join(a.keys, ", "), strings.Join(ags, ", "), queryJSON(a.q))
}
func (a *nativeGroupBy) WithChildren(ch ...gms.Node) (gms.Node, error) {
	if len(ch) != 0 {
		return nil, fmt.Errorf("NativeGroupBy takes no children, got %d", len(ch))
	}
	return a, nil
}

func groupOp(k aggKind) groupagg.Op {
	switch k {
	case aggCountStar:
		return groupagg.CountStar
	case aggCount:
		return groupagg.Count
	case aggSum:
		return groupagg.Sum
	case aggAvg:
		return groupagg.Avg
	case aggMin:
		return groupagg.Min
	case aggAny:
		return groupagg.Any
	}
	return groupagg.Max
}

// columnField finds the table's Arrow field a GetField of the scan's
// columns names.
func (t *table) columnField(e gms.Expression, cols gms.ColSet) (arrow.Field, bool) {
	gf, ok := e.(*expression.GetField)
	if !ok || cols.Len() == 0 || !cols.Contains(gf.Id()) {
		return arrow.Field{}, false
	}
	for _, af := range t.arrow.Fields() {
		if strings.EqualFold(af.Name, gf.Name()) {
			return af, true
		}
	}
	return arrow.Field{}, false
}

// nativeGroupBy turns a GroupBy of plain columns over one scan into a
// nativeGroupBy, or returns nil when some part is not answered exactly.
func (s *Server) nativeGroupBy(sctx *gms.Context, g *plan.GroupBy) *nativeGroupBy {
	var cols gms.ColSet
	scan := g.Child
	if ta, ok := scan.(*plan.TableAlias); ok {
		cols = ta.Columns()
		scan = ta.Child
	} else if tn, ok := scan.(plan.TableIdNode); ok {
		cols = tn.Columns()
	}
	t, ranges, _, ok := scanOf(sctx, scan)
	if !ok || t.arr.B2ND {
		return nil
	}
	// plain columns only, each with a type the keys take; enumerations
	// and datetimes stay with the engine
	plainCol := func(f arrow.Field) bool {
		if k := t.arr.AttrIndex(f.Name); k >= 0 {
			at := &t.arr.Attrs[k]
			return at.Enumeration == "" && !at.Type.IsDatetime() && !at.Type.IsTime()
		}
		if k := t.arr.DimIndex(f.Name); k >= 0 {
			d := &t.arr.Dims[k]
			return !d.Type.IsDatetime() && !d.Type.IsTime()
		}
		return false
	}
	var keys []string
	keyIDs := map[gms.ColumnId]int{}
	for _, e := range g.GroupByExprs {
		f, ok := t.columnField(e, cols)
		if !ok || !plainCol(f) || !groupagg.KeyType(f.Type) {
			return nil
		}
		keyIDs[e.(*expression.GetField).Id()] = len(keys)
		keys = append(keys, f.Name)
	}
	var items []aggItem
	var outs []groupOut
	for _, e := range g.SelectedExprs {
		if al, ok := e.(*expression.Alias); ok {
			e = al.Child
		}
		if gf, ok := e.(*expression.GetField); ok {
			if k, ok := keyIDs[gf.Id()]; ok {
				outs = append(outs, groupOut{key: k, agg: -1})
				continue
			}
			// a column not grouped by (the engine adds those HAVING
			// names): any value of the group
			f, ok := t.columnField(gf, cols)
			if !ok || !plainCol(f) || !groupagg.AggType(groupagg.Any, f.Type) {
				return nil
			}
			outs = append(outs, groupOut{key: -1, agg: len(items)})
			items = append(items, aggItem{kind: aggAny, col: f.Name, nullable: f.Nullable})
			continue
		}
		it, ok := t.aggItem(e, cols)
		if !ok {
			// MIN and MAX of strings too (the reader's aggregates take
			// numbers only)
			var kind aggKind
			switch e.(type) {
			case *aggregation.Min:
				kind = aggMin
			case *aggregation.Max:
				kind = aggMax
			default:
				return nil
			}
			f, ok := t.columnField(unaryChild(e), cols)
			if !ok || f.Type.ID() == arrow.BOOL {
				return nil
			}
			it = aggItem{kind: kind, col: f.Name, nullable: f.Nullable}
		}
		if it.kind != aggCountStar {
			f, _ := t.columnField(unaryChild(e), cols)
			if !plainCol(f) || !groupagg.AggType(groupOp(it.kind), f.Type) {
				return nil
			}
		}
		outs = append(outs, groupOut{key: -1, agg: len(items)})
		items = append(items, it)
	}
	q, empty := t.nativeQuery(ranges, -1)
	if empty {
		return nil // the engine answers "no rows" itself
	}
	// the scan reads the keys and the aggregated columns, once each
	seen := map[string]bool{}
	var qcols []string
	for _, c := range keys {
		if !seen[c] {
			seen[c] = true
			qcols = append(qcols, c)
		}
	}
	for _, it := range items {
		if it.kind != aggCountStar && !seen[it.col] {
			seen[it.col] = true
			qcols = append(qcols, it.col)
		}
	}
	if len(qcols) == 0 {
		qcols = []string{t.arr.Dims[0].Name}
	}
	q.Columns, q.Layout = qcols, query.LayoutDefault
	return &nativeGroupBy{srv: s, t: t, q: q, keys: keys, aggs: items, outs: outs, sch: g.Schema(), orig: g}
}

// unaryChild is the argument of a one-argument aggregate.
func unaryChild(e gms.Expression) gms.Expression {
	if ch := e.Children(); len(ch) == 1 {
		return ch[0]
	}
	return nil
}

func (a *nativeGroupBy) RowIter(ctx *gms.Context, row gms.Row) (gms.RowIter, error) {
	out, err := a.compute(ctx)
	if errors.Is(err, groupagg.ErrTooManyGroups) {
		if b := budgetFrom(ctx); b != nil {
			return nil, b.errMemory("GROUP BY groups")
		}
		// the engine's grouping, unbounded as the operator asked
		return a.srv.engine.Analyzer.ExecBuilder.Build(ctx, a.orig, row)
	}
	if err != nil {
		return nil, err
	}
	return gms.RowsToRowIter(out...), nil
}

// compute runs the scan and groups its batches: workers each fold the
// batches they take into a Table of their own; the Tables merge at the end.
func (a *nativeGroupBy) compute(ctx context.Context) ([]gms.Row, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	bs, err := a.srv.eng.Scan(ctx, a.q)
	if err != nil {
		return nil, err
	}
	defer bs.Close()
	budget := &groupagg.Budget{Max: groupByBudget}
	if b := budgetFrom(ctx); b != nil {
		// What the statement has left; at least a byte, as 0 means the default.
		budget.Max = max(b.limit-b.Used(), 1)
	}
	workers := min(runtime.GOMAXPROCS(0), 4)
	recs := make(chan arrow.RecordBatch, workers)
	tabs := make([]*groupagg.Table, workers)
	errs := make([]error, workers)
	var wg sync.WaitGroup
	var sc *arrow.Schema
	keyIdx := make([]int, len(a.keys))
	aggs := make([]groupagg.Agg, len(a.aggs))
	start := func(s *arrow.Schema) error {
		idx := func(name string) (int, error) {
			for i, f := range s.Fields() {
				if f.Name == name {
					return i, nil
				}
			}
			return 0, errkind.Errorf(errkind.Internal, "array %q: the GROUP BY scan gave no column %q", a.t.path, name)
		}
		for i, k := range a.keys {
			var err error
			if keyIdx[i], err = idx(k); err != nil {
				return err
			}
		}
		for i, it := range a.aggs {
			aggs[i].Op = groupOp(it.kind)
			if it.kind == aggCountStar {
				continue
			}
			var err error
			if aggs[i].Col, err = idx(it.col); err != nil {
				return err
			}
		}
		for w := range tabs {
			t, err := groupagg.New(s, keyIdx, aggs, budget)
			if err != nil {
				return fmt.Errorf("array %q: %w", a.t.path, err)
			}
			tabs[w] = t
		}
		for w := range tabs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for rec := range recs {
					if errs[w] == nil {
						errs[w] = tabs[w].Add(rec)
						if errs[w] != nil {
							cancel()
						}
					}
					rec.Release()
				}
			}()
		}
		return nil
	}
	var readErr error
	for {
		rec, err := bs.Next(ctx)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			readErr = err
			break
		}
		scannedRows.Add(rec.NumRows())
		a.srv.eng.NoteCall(ctx, "", 0, a.srv.eng.RecordBytes(rec))
		if sc == nil {
			sc = rec.Schema()
			if err := start(sc); err != nil {
				rec.Release()
				readErr = err
				break
			}
		}
		select {
		case recs <- rec:
		case <-ctx.Done():
			rec.Release()
		}
		if ctx.Err() != nil {
			break
		}
	}
	close(recs)
	wg.Wait()
	defer func() {
		for _, t := range tabs {
			if t != nil {
				t.Release()
			}
		}
	}()
	for _, err := range errs {
		if err != nil {
			return nil, fmt.Errorf("array %q: %w", a.t.path, err)
		}
	}
	if readErr != nil {
		return nil, readErr
	}
	if sc == nil {
		return nil, nil // no rows: no groups
	}
	all := tabs[0]
	for _, t := range tabs[1:] {
		if err := all.Merge(t); err != nil {
			return nil, fmt.Errorf("array %q: %w", a.t.path, err)
		}
	}
	out := make([]gms.Row, all.Len())
	nk := len(a.keys)
	for g := range out {
		vals := all.Row(g)
		row := make(gms.Row, len(a.outs))
		for i, o := range a.outs {
			switch {
			case o.key >= 0:
				row[i] = engineValue(vals[o.key])
			case a.aggs[o.agg].kind == aggAny:
				row[i] = engineValue(vals[nk+o.agg])
			default:
				row[i] = vals[nk+o.agg]
			}
		}
		out[g] = row
	}
	return out, nil
}

// engineValue is a key value as the engine holds it (booleans as int8).
func engineValue(v any) any {
	if b, ok := v.(bool); ok {
		if b {
			return int8(1)
		}
		return int8(0)
	}
	return v
}
