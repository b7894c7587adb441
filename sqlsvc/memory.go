package sqlsvc

// The memory bound of one statement (-sql-memory). go-mysql-server keeps
// the rows of its blocking operators in plain Go slices and maps with no
// accounting of its own (its MemoryManager only asks a Reporter, before
// each new entry of a GROUP BY, DISTINCT-of-a-UNION or cached-result
// cache, whether memory is available). So the bound is kept here, by a
// per-statement budget that two things charge:
//
//   - a meter node the plan gets below every operator that keeps what it
//     consumes until its input ends: Sort (ORDER BY without LIMIT),
//     HashLookup (the build side of a hash join), CachedResults (the
//     inner side of a nested-loop or cross join), Window (window
//     functions) and a GroupBy computing an aggregate that keeps every
//     value (json_arrayagg behind median and the quantiles, group_concat
//     behind string_agg). Every row passing into one is charged at its
//     estimated size in the engine (rowBytes);
//   - the MemoryManager's Reporter of the statement's engine context,
//     asked once per new GROUP BY group and per new DISTINCT row (the
//     engine keeps a hash of each) and per new entry of its other caches:
//     each ask charges entryBytes.
//
// Past the bound the charging row or entry fails the statement with
// RESOURCE_EXHAUSTED naming the flag; the engine's iterators are closed
// and what they held becomes garbage, which is returned to the system at
// once. Rows that stream through to the client (scans, filters,
// projections, ORDER BY ... LIMIT n, which keeps n rows) are not charged.
// Charges are never credited back before the statement ends, so an
// operator re-run per outer row (a correlated subquery) is counted each
// time: the count errs high, not low.

import (
	"context"
	"fmt"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	gms "github.com/dolthub/go-mysql-server/sql"
	"github.com/dolthub/go-mysql-server/sql/expression/function/aggregation"
	"github.com/dolthub/go-mysql-server/sql/plan"
	"github.com/dolthub/go-mysql-server/sql/transform"
	"github.com/shopspring/decimal"

	"github.com/tileflight/tileflight/errkind"
)

// DefaultMemory is -sql-memory's default.
const DefaultMemory = 1 << 30

// entryBytes is what one new entry of an engine cache (a GROUP BY group
// with its aggregation state, a seen-row hash) is charged.
const entryBytes = 256

// SetMemory bounds what one statement's engine may hold (-sql-memory);
// 0: no bound.
func (s *Server) SetMemory(n int64) { s.memory = n }

// budget is one statement's memory account.
type budget struct {
	limit int64
	used  atomic.Int64
}

type budgetKey struct{}

// withBudget gives ctx a new budget of limit bytes (limit <= 0: none).
func withBudget(ctx context.Context, limit int64) context.Context {
	if limit <= 0 {
		return ctx
	}
	return context.WithValue(ctx, budgetKey{}, &budget{limit: limit})
}

func budgetFrom(ctx context.Context) *budget {
	b, _ := ctx.Value(budgetKey{}).(*budget)
	return b
}

// errMemory is the error of a statement past its budget.
func (b *budget) errMemory(what string) error {
	return errkind.Errorf(errkind.ResourceExhausted,
		"the statement needs more than the server's -sql-memory (%s) in the SQL engine (%s; counted: rows kept by ORDER BY, joins, window functions, DISTINCT and GROUP BY state); its memory is freed. Narrow it with WHERE, add LIMIT to ORDER BY, or ask the operator for a larger -sql-memory",
		sizeString(b.limit), what)
}

// charge adds n bytes; past the limit it errs.
func (b *budget) charge(n int64, what string) error {
	if b.used.Add(n) > b.limit {
		return b.errMemory(what)
	}
	return nil
}

// Used is what the statement has been charged so far.
func (b *budget) Used() int64 { return b.used.Load() }

// MaxMemory and UsedMemory make the budget the Reporter of the
// statement's engine MemoryManager: the engine asks UsedMemory once
// before keeping each new cache entry, which charges that entry.
func (b *budget) MaxMemory() uint64 { return uint64(b.limit) }

func (b *budget) UsedMemory() uint64 { return uint64(b.used.Add(entryBytes)) }

func sizeString(n int64) string {
	switch {
	case n >= 1<<30 && n%(1<<30) == 0:
		return fmt.Sprintf("%dGiB", n>>30)
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%dMiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%dKiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}

// rowBytes estimates what a row costs the engine while kept: the slice,
// an interface per value and the value itself.
func rowBytes(row gms.Row) int64 {
	n := int64(24 + 16*len(row))
	for _, v := range row {
		switch x := v.(type) {
		case nil, bool, int8, uint8:
		case int16, uint16, int32, uint32, float32:
			n += 4
		case int64, uint64, float64, int, uint:
			n += 8
		case string:
			n += 16 + int64(len(x))
		case []byte:
			n += 24 + int64(len(x))
		case time.Time:
			n += 24
		case decimal.Decimal:
			n += 48
		default:
			n += 32
		}
	}
	return n
}

// metered inserts a meter below every operator that keeps its input
// (see the top of this file), charging b.
func (s *Server) metered(n gms.Node, b *budget) (gms.Node, error) {
	if b == nil {
		return n, nil
	}
	out, _, err := transform.Node(n, func(n gms.Node) (gms.Node, transform.TreeIdentity, error) {
		var what string
		switch g := n.(type) {
		case *plan.Sort:
			what = "ORDER BY"
		case *plan.HashLookup:
			what = "a hash join's build side"
		case *plan.CachedResults:
			what = "a join's cached inner side"
		case *plan.Window:
			what = "a window function"
		case *plan.GroupBy:
			// Most aggregates keep a fixed state per group (charged through
			// the memory manager); these keep every value they are given.
			if !keepsValues(g) {
				return n, transform.SameTree, nil
			}
			what = "an aggregate that keeps its values (median, quantiles, string_agg)"
		default:
			return n, transform.SameTree, nil
		}
		ch := n.Children()
		if len(ch) != 1 {
			return n, transform.SameTree, nil
		}
		if _, ok := ch[0].(*meter); ok {
			return n, transform.SameTree, nil
		}
		m, err := n.WithChildren(&meter{srv: s, child: ch[0], b: b, what: what})
		if err != nil {
			return nil, transform.SameTree, err
		}
		return m, transform.NewTree, nil
	})
	return out, err
}

// keepsValues reports whether g computes an aggregate whose state grows
// with every row (json_arrayagg, behind median and the quantiles;
// group_concat, behind string_agg; json_objectagg).
func keepsValues(g *plan.GroupBy) bool {
	found := false
	for _, e := range g.SelectedExprs {
		transform.InspectExpr(e, func(e gms.Expression) bool {
			switch e.(type) {
			case *aggregation.JsonArray, *aggregation.GroupConcat, *aggregation.JSONObjectAgg:
				found = true
			}
			return found
		})
	}
	return found
}

// meter is a plan node that charges its budget for every row its child
// yields.
type meter struct {
	srv   *Server
	child gms.Node
	b     *budget
	what  string
}

var _ gms.ExecSourceRel = (*meter)(nil)

func (m *meter) Resolved() bool       { return m.child.Resolved() }
func (m *meter) IsReadOnly() bool     { return m.child.IsReadOnly() }
func (m *meter) Schema() gms.Schema   { return m.child.Schema() }
func (m *meter) Children() []gms.Node { return []gms.Node{m.child} }
func (m *meter) String() string       { return m.child.String() }
func (m *meter) DebugString() string  { return gms.DebugString(m.child) }

func (m *meter) WithChildren(ch ...gms.Node) (gms.Node, error) {
	if len(ch) != 1 {
		return nil, fmt.Errorf("meter: %d children, want 1", len(ch))
	}
	n := *m
	n.child = ch[0]
	return &n, nil
}

func (m *meter) RowIter(ctx *gms.Context, row gms.Row) (gms.RowIter, error) {
	it, err := m.srv.engine.Analyzer.ExecBuilder.Build(ctx, m.child, row)
	if err != nil {
		return nil, err
	}
	return &meterIter{it: it, b: m.b, what: m.what}, nil
}

type meterIter struct {
	it   gms.RowIter
	b    *budget
	what string
}

func (m *meterIter) Next(ctx *gms.Context) (gms.Row, error) {
	row, err := m.it.Next(ctx)
	if err != nil {
		return nil, err
	}
	if err := m.b.charge(rowBytes(row), m.what); err != nil {
		return nil, err
	}
	return row, nil
}

func (m *meterIter) Close(ctx *gms.Context) error { return m.it.Close(ctx) }

// freeMemory returns the heap a stopped statement left to the system at
// once (a statement past -sql-memory, cancelled or timed out), at most
// once a second: the collector would otherwise keep it until its next
// cycles.
func freeMemory() {
	freeMu.Lock()
	defer freeMu.Unlock()
	if time.Since(lastFree) < time.Second {
		return
	}
	debug.FreeOSMemory()
	lastFree = time.Now()
}

var (
	freeMu   sync.Mutex
	lastFree time.Time
)
