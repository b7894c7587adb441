package sparse

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"math"
	"path/filepath"
	"testing"

	"github.com/tileflight/tileflight/format/commits"
	"github.com/tileflight/tileflight/format/datatype"
	"github.com/tileflight/tileflight/query"
	"github.com/tileflight/tileflight/reader/plan"
	"github.com/tileflight/tileflight/reader/tileio"
)

func le32(v int32) []byte {
	b := make([]byte, 4)
	binary.LittleEndian.PutUint32(b, uint32(v))
	return b
}
func lef64(v float64) []byte {
	b := make([]byte, 8)
	binary.LittleEndian.PutUint64(b, math.Float64bits(v))
	return b
}

// TestEvalKeep checks the stored (negated) condition semantics TileDB
// applies to sparse cells, nulls and missing fields included.
func TestEvalKeep(t *testing.T) {
	ints := &condField{typ: datatype.Int32, size: 4, nullable: true,
		tile: &tileio.Tile{Data: append(append(le32(1), le32(5)...), le32(9)...), Validity: []byte{1, 0, 1}, Cells: 3}}
	strs := &condField{typ: datatype.StringUTF8, isVar: true,
		tile: &tileio.Tile{Data: []byte("abbc"), Offsets: offs(0, 1, 3, 4), Cells: 3}}
	flts := &condField{typ: datatype.Float64, size: 8,
		tile: &tileio.Tile{Data: append(append(lef64(1), lef64(math.NaN())...), lef64(3)...), Cells: 3}}
	fields := map[string]*condField{"i": ints, "s": strs, "f": flts, "gone": {typ: datatype.Int32, size: 4}}
	val := func(f string, op commits.Op, v []byte) *commits.Node {
		return &commits.Node{Kind: commits.KindValue, Field: f, Op: op, Value: v}
	}
	set := func(f string, op commits.Op, members ...[]byte) *commits.Node {
		n := &commits.Node{Kind: commits.KindValue, Field: f, Op: op}
		for _, m := range members {
			n.Offsets = append(n.Offsets, uint64(len(n.Value)))
			n.Value = append(n.Value, m...)
		}
		return n
	}
	expr := func(c commits.Combination, ch ...*commits.Node) *commits.Node {
		return &commits.Node{Kind: commits.KindExpr, Combination: c, Children: ch}
	}
	cases := []struct {
		name string
		n    *commits.Node
		want [3]bool
	}{
		{"lt, null cell false", val("i", commits.OpLT, le32(6)), [3]bool{true, false, false}},
		{"ne, null cell false", val("i", commits.OpNE, le32(1)), [3]bool{false, false, true}},
		{"is null", val("i", commits.OpEQ, nil), [3]bool{false, true, false}},
		{"is not null", val("i", commits.OpNE, nil), [3]bool{true, false, true}},
		{"in", set("i", commits.OpIn, le32(9), le32(5)), [3]bool{false, false, true}},
		{"not in, null cell false", set("i", commits.OpNotIn, le32(9)), [3]bool{true, false, false}},
		{"string ge", val("s", commits.OpGE, []byte("bb")), [3]bool{false, true, true}},
		{"string eq", val("s", commits.OpEQ, []byte("c")), [3]bool{false, false, true}},
		{"nan compares false", val("f", commits.OpLE, lef64(3)), [3]bool{true, false, true}},
		{"nan ne true", val("f", commits.OpNE, lef64(3)), [3]bool{true, true, false}},
		{"missing field", val("gone", commits.OpGE, le32(0)), [3]bool{false, false, false}},
		{"and/or", expr(commits.Or, expr(commits.And, val("i", commits.OpGE, le32(1)), val("s", commits.OpEQ, []byte("a"))),
			val("f", commits.OpGT, lef64(2))), [3]bool{true, false, true}},
		{"not", expr(commits.Not, val("s", commits.OpEQ, []byte("a"))), [3]bool{false, true, true}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for i := 0; i < 3; i++ {
				if got := evalKeep(c.n, fields, i); got != c.want[i] {
					t.Errorf("cell %d: %v, want %v", i, got, c.want[i])
				}
			}
		})
	}
}

func offs(v ...uint64) []byte {
	b := make([]byte, 8*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint64(b[8*i:], x)
	}
	return b
}

func goldenPlan(t *testing.T, name string, layout query.Layout) *plan.Plan {
	t.Helper()
	a := openRange(t, filepath.Join("testdata", "golden", name), nil)
	cols := []string{}
	for _, d := range a.Schema.Dimensions {
		cols = append(cols, d.Name)
	}
	for _, at := range a.Schema.Attributes {
		cols = append(cols, at.Name)
	}
	return &plan.Plan{Array: a, Columns: cols, Subarray: subarrayOf(t, a, nil), Layout: layout, BatchRows: 7, Limit: -1}
}

// TestLimit: exactly Limit rows, in the same order as the full read.
func TestLimit(t *testing.T) {
	for _, l := range []query.Layout{query.LayoutGlobal, query.LayoutRowMajor, query.LayoutUnordered} {
		for _, limit := range []int64{0, 1, 7, 50, 1000} {
			p := goldenPlan(t, "multi_range_int", l)
			fields := fieldsOf(t, p.Array.Schema, p.Columns)
			full := rowsOf(t, readAll(t, p, fields, 0))
			p.Limit = limit
			got := rowsOf(t, readAll(t, p, fields, 0))
			want := min(int(limit), len(full[0]))
			n := 0
			if got != nil {
				n = len(got[0])
			}
			if n != want {
				t.Fatalf("%s limit %d: %d rows, want %d", l, limit, n, want)
			}
			for i := 0; i < n; i++ {
				if got[2][i] != full[2][i] {
					t.Fatalf("%s limit %d: row %d differs", l, limit, i)
				}
			}
		}
	}
}

// TestCancel: a canceled context stops Next.
func TestCancel(t *testing.T) {
	p := goldenPlan(t, "hilbert_frags", query.LayoutGlobal)
	ctx, cancel := context.WithCancel(context.Background())
	r, err := NewReader(ctx, Input{Plan: p, Loader: tileio.NewLoader(p.Array, tileio.Options{}), Fields: fieldsOf(t, p.Array.Schema, p.Columns)})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	rec, err := r.Next(ctx)
	if err != nil {
		t.Fatal(err)
	}
	rec.Release()
	cancel()
	if _, err := r.Next(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("after cancel: %v", err)
	}
}

// tileBudget fits the fields of one delete_meta tile (5 cells of x, a,
// timestamps and delete timestamps: 140 bytes) but not two.
const tileBudget = 150

// TestTinyBudget: a memory budget of one tile still reads a single
// fragment (tiles then load one at a time), deduplicating merge included.
// (Merges of k fragments need k tiles at once, row/col-major slabs all of
// their tiles.)
func TestTinyBudget(t *testing.T) {
	for _, l := range []query.Layout{query.LayoutGlobal, query.LayoutUnordered} {
		p := goldenPlan(t, "delete_meta", l)
		fields := fieldsOf(t, p.Array.Schema, p.Columns)
		want := rowsOf(t, readAll(t, p, fields, 0))
		got := rowsOf(t, readAll(t, p, fields, tileBudget))
		if len(got[0]) != len(want[0]) {
			t.Fatalf("%s: %d rows with a tiny budget, %d without", l, len(got[0]), len(want[0]))
		}
	}
}

// TestCloseEarly: closing mid-stream releases the prefetched tiles (a
// budget one tile large would otherwise block the next reader).
func TestCloseEarly(t *testing.T) {
	p := goldenPlan(t, "delete_meta", query.LayoutUnordered)
	fields := fieldsOf(t, p.Array.Schema, p.Columns)
	ld := tileio.NewLoader(p.Array, tileio.Options{MemoryBudget: tileBudget})
	for k := 0; k < 3; k++ {
		r, err := NewReader(context.Background(), Input{Plan: p, Loader: ld, Fields: fields})
		if err != nil {
			t.Fatal(err)
		}
		rec, err := r.Next(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		rec.Release()
		r.Close()
	}
	r, err := NewReader(context.Background(), Input{Plan: p, Loader: ld, Fields: fields})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	n := 0
	for {
		rec, err := r.Next(context.Background())
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		n += int(rec.NumRows())
		rec.Release()
	}
	if n != 18 {
		t.Fatalf("%d rows, want 18", n)
	}
}
