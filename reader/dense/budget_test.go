package dense_test

import (
	"context"
	"errors"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/tileflight/tileflight/errkind"
	"github.com/tileflight/tileflight/internal/fixtures"
	"github.com/tileflight/tileflight/query"
	"github.com/tileflight/tileflight/reader"
	"github.com/tileflight/tileflight/reader/internal/readtest"
	"github.com/tileflight/tileflight/reader/tileio"
	"github.com/tileflight/tileflight/storage"
)

// readTimed runs q under a deadline: a read that waits on its own memory
// budget shows up as a deadline error instead of a hung test.
func readTimed(t *testing.T, st storage.Store, q *query.Query, opt reader.Options) ([]arrow.RecordBatch, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	r, err := reader.Open(ctx, st, q, opt)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	var recs []arrow.RecordBatch
	for {
		rec, err := r.Next(ctx)
		if err == io.EOF {
			return recs, nil
		}
		if err != nil {
			for _, r := range recs {
				r.Release()
			}
			if errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("read hung (budget %d): %v", opt.MemoryBudget, err)
			}
			return nil, err
		}
		recs = append(recs, rec)
	}
}

func canonRows(recs []arrow.RecordBatch) []string {
	var out []string
	for _, r := range recs {
		for i := 0; i < int(r.NumRows()); i++ {
			var b strings.Builder
			for c := 0; c < int(r.NumCols()); c++ {
				b.WriteString(readtest.Canon(r.Column(c), i))
				b.WriteByte('|')
			}
			out = append(out, b.String())
		}
	}
	return out
}

// tileCharges returns the largest charge of one field tile of the array's
// fragments and the number of fragments.
func tileCharges(t *testing.T, st storage.Store, q *query.Query, key []byte) (int64, int) {
	a, err := reader.OpenArray(context.Background(), st, q, key)
	if err != nil {
		t.Fatal(err)
	}
	ld := tileio.NewLoader(a, tileio.Options{EncryptionKey: key})
	most := int64(1)
	for _, f := range a.Fragments {
		n, err := f.Meta.TileNum()
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		if !f.Meta.Footer().Dense {
			for _, d := range f.Schema.Dimensions {
				names = append(names, d.Name)
			}
		}
		for _, at := range f.Schema.Attributes {
			names = append(names, at.Name)
		}
		for ti := uint64(0); ti < n; ti++ {
			for _, name := range names {
				c, err := ld.Charge(f, name, ti)
				if err != nil {
					t.Fatal(err)
				}
				most = max(most, c)
			}
		}
	}
	return most, len(a.Fragments)
}

// TestTinyBudgets reads every multi-fragment array of the fixture matrix
// in every layout with budgets of 1 byte, one tile and k-1 tiles (k
// fragments): a global merge needs a tile of each fragment at once, a
// sorted slab all of its tiles, a dense chunk several. Every read must
// complete with exactly the cells of an unconstrained read (and, in the
// layout TileDB recorded, TileDB's cells), or fail at once with
// ResourceExhausted; none may wait on its own budget.
func TestTinyBudgets(t *testing.T) {
	own, err := fixtures.LoadDir(filepath.Join("..", "testdata", "dense"))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, c := range append(fixtures.Cases(t), own...) {
		if len(c.Expect.Reads) == 0 {
			continue
		}
		st, key := readtest.OpenCase(t, c)
		rd := c.Expect.Reads[len(c.Expect.Reads)-1]
		var q0 *query.Query
		if c.Expect.Schema.Type == "dense" {
			q0 = readtest.QueryFor(c, rd)
		} else {
			q0 = &query.Query{Array: filepath.Base(c.Dir), Columns: rd.Columns, Layout: query.Layout(rd.Layout), Limit: -1}
			if rd.Timestamp != nil {
				q0.Timestamp = &query.Timestamp{Start: 0, End: *rd.Timestamp}
			}
		}
		tile, k := tileCharges(t, st, q0, key)
		if k < 2 {
			continue
		}
		n++
		layouts := []query.Layout{query.LayoutRowMajor, query.LayoutColMajor, query.LayoutGlobal}
		if c.Expect.Schema.Type != "dense" {
			layouts = append(layouts, query.LayoutUnordered)
		}
		t.Run(c.Name, func(t *testing.T) {
			for _, l := range layouts {
				q := *q0
				q.Layout = l
				q.BatchRows = 7
				ref, err := readTimed(t, st, &q, reader.Options{EncryptionKey: key})
				if err != nil {
					t.Fatalf("%s: %v", l, err)
				}
				want := canonRows(ref)
				for _, budget := range []int64{1, tile, int64(k-1) * tile} {
					got, err := readTimed(t, st, &q, reader.Options{EncryptionKey: key, MemoryBudget: budget, Workers: 3})
					if err != nil {
						t.Fatalf("%s, budget %d: %v", l, budget, err)
					}
					if !slices.Equal(canonRows(got), want) {
						t.Fatalf("%s, budget %d: %d rows differ from the unconstrained read's %d", l, budget, len(canonRows(got)), len(want))
					}
					if string(l) == rd.Layout && c.Expect.Schema.Type == "dense" {
						readtest.CompareRead(t, c, rd, got)
					}
				}
			}
		})
	}
	if n == 0 {
		t.Fatal("no multi-fragment arrays")
	}
}

// TestWorkingSetFailsFast: a read whose inherent working set (a tile of
// every fragment merged, a sorted slab, one space tile) is beyond
// MaxWorkingSet fails at once with ResourceExhausted naming the sizes and
// what to change, whatever the budget.
func TestWorkingSetFailsFast(t *testing.T) {
	// Both are in the golden subset, so the test runs without Python too.
	for _, name := range []string{"sparse_string_dim", "dense_1d"} {
		c, ok := fixtures.Find(t, name)
		if !ok {
			t.Fatalf("no %s fixture", name)
		}
		st, key := readtest.OpenCase(t, c)
		for _, l := range []query.Layout{query.LayoutGlobal, query.LayoutRowMajor} {
			q := &query.Query{Array: c.Name, Layout: l, Limit: -1}
			start := time.Now()
			_, err := readTimed(t, st, q, reader.Options{EncryptionKey: key, MemoryBudget: 1, MaxWorkingSet: 1})
			if err == nil {
				t.Fatalf("%s %s: read with a 1-byte working set succeeded", name, l)
			}
			if errkind.Of(err) != errkind.ResourceExhausted {
				t.Fatalf("%s %s: %v is not ResourceExhausted", name, l, err)
			}
			for _, w := range []string{"-memory-budget", "consolidate", "bytes of decoded tiles"} {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%s %s: error %q does not say %q", name, l, err, w)
				}
			}
			if d := time.Since(start); d > 5*time.Second {
				t.Errorf("%s %s: failing took %s", name, l, d)
			}
		}
	}
}
