package sparse

import (
	"slices"
	"testing"

	"github.com/tileflight/tileflight/internal/fixtures"
	"github.com/tileflight/tileflight/query"
	"github.com/tileflight/tileflight/reader/plan"
)

// TestConformance runs every sparse read TileDB recorded in the fixture
// matrix and compares the result cell by cell: in order for global and
// row-major reads, as a multiset of rows (with the coordinate sequence
// still exact) where the array allows duplicates.
func TestConformance(t *testing.T) {
	n := 0
	for _, c := range fixtures.Cases(t) {
		if c.Expect.Schema.Type != "sparse" {
			continue
		}
		t.Run(c.Name, func(t *testing.T) {
			for _, rd := range c.Expect.Reads {
				t.Run(rd.Name, func(t *testing.T) {
					n++
					runExpectRead(t, c, rd)
				})
			}
		})
	}
	if n == 0 {
		t.Fatal("no sparse reads in the fixtures")
	}
}

func runExpectRead(t *testing.T, c fixtures.Case, rd fixtures.Read) {
	var end uint64
	if rd.Timestamp != nil {
		end = *rd.Timestamp
	}
	key := ""
	if c.Expect.Encryption != nil {
		key = c.Expect.Encryption.Key
	}
	a := openArray(t, c.Dir, end, key)
	es := &c.Expect.Schema
	if rd.Schema != nil {
		es = rd.Schema
	}
	for _, batch := range []int{3, 1 << 16} {
		p := &plan.Plan{Array: a, Columns: rd.Columns, Subarray: subarrayOf(t, a, rd.Subarray),
			Layout: layoutOf(rd.Layout), BatchRows: batch, Limit: -1}
		got := rowsOf(t, readAll(t, p, fieldsOf(t, a.Schema, rd.Columns), 0))
		if len(got) == 0 {
			got = make([][]string, len(rd.Columns))
		}
		want := make([][]string, len(rd.Columns))
		for k, col := range rd.Columns {
			typ, cellN := fieldType(es, col)
			for _, v := range rd.Data[col] {
				want[k] = append(want[k], expectCell(t, typ, cellN, v))
			}
		}
		if len(got[0]) != rd.NumCells {
			t.Fatalf("batch %d: %d cells, TileDB read %d", batch, len(got[0]), rd.NumCells)
		}
		nd := len(es.Dimensions)
		gotRows, wantRows := rowStrings(got, rd.NumCells, len(got)), rowStrings(want, rd.NumCells, len(want))
		if es.AllowsDuplicates {
			if !slices.Equal(rowStrings(got, rd.NumCells, nd), rowStrings(want, rd.NumCells, nd)) {
				t.Errorf("batch %d: coordinate sequence differs from TileDB's", batch)
			}
			gotRows, wantRows = sortedCopy(gotRows), sortedCopy(wantRows)
		}
		for i := range wantRows {
			if gotRows[i] != wantRows[i] {
				t.Fatalf("batch %d: cell %d: got %s, TileDB read %s (columns %v)", batch, i, gotRows[i], wantRows[i], rd.Columns)
			}
		}
		// The same read unordered holds the same cells.
		if p.Layout != query.LayoutUnordered {
			p.Layout = query.LayoutUnordered
			u := rowsOf(t, readAll(t, p, fieldsOf(t, a.Schema, rd.Columns), 0))
			if len(u) == 0 {
				u = make([][]string, len(rd.Columns))
			}
			if len(u[0]) != rd.NumCells && rd.Subarray == nil {
				t.Fatalf("unordered: %d cells, want %d", len(u[0]), rd.NumCells)
			}
		}
	}
}
