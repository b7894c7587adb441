package sparse

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/tileflight/tileflight/internal/fixtures"
	"github.com/tileflight/tileflight/query"
	"github.com/tileflight/tileflight/reader/plan"
	"github.com/tileflight/tileflight/storage"
	"github.com/tileflight/tileflight/tdbarray"
)

// goldenFile is testdata/golden/cases.json, written by
// python_tests/golden/reader_sparse_cases.py.
type goldenFile struct {
	TileDBVersion string `json:"tiledb_version"`
	Cases         []struct {
		Case  string       `json:"case"`
		Reads []goldenRead `json:"reads"`
	} `json:"cases"`
}

type goldenRead struct {
	Name      string                        `json:"name"`
	Timestamp []uint64                      `json:"timestamp"` // [start, end] or nil (now)
	Layout    string                        `json:"layout"`
	Subarray  map[string][][]fixtures.Value `json:"subarray"`
	Columns   []string                      `json:"columns"`
	NumCells  int                           `json:"num_cells"`
	Data      map[string][]fixtures.Value   `json:"data"`
}

func loadGolden(t *testing.T) (string, *goldenFile) {
	t.Helper()
	dir := filepath.Join("testdata", "golden")
	b, err := os.ReadFile(filepath.Join(dir, "cases.json"))
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	dec.DisallowUnknownFields()
	var g goldenFile
	if err := dec.Decode(&g); err != nil {
		t.Fatal(err)
	}
	return dir, &g
}

// TestGolden compares reads TileDB ran on the golden arrays: multi-range
// subarrays (TileDB repeats a cell once per range combination holding it
// in row/col-major results, and returns it once unordered), Hilbert and
// col-major global orders across fragments, deletes between overlapping
// writes, consolidation with timestamps read at intermediate ranges,
// consolidated delete metadata, duplicates.
func TestGolden(t *testing.T) {
	dir, g := loadGolden(t)
	for _, c := range g.Cases {
		t.Run(c.Case, func(t *testing.T) {
			for _, rd := range c.Reads {
				t.Run(rd.Name, func(t *testing.T) {
					runGoldenRead(t, filepath.Join(dir, c.Case), rd)
				})
			}
		})
	}
}

func openRange(t *testing.T, dir string, ts []uint64) *tdbarray.Array {
	t.Helper()
	st, err := storage.NewLocal(filepath.Dir(dir))
	if err != nil {
		t.Fatal(err)
	}
	opt := tdbarray.Options{}
	if ts != nil {
		opt.Start, opt.End = ts[0], ts[1]
	}
	a, err := tdbarray.Open(t.Context(), st, filepath.Base(dir), opt)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func runGoldenRead(t *testing.T, dir string, rd goldenRead) {
	a := openRange(t, dir, rd.Timestamp)
	es := expectSchemaOf(a)
	want := make([][]string, len(rd.Columns))
	for k, col := range rd.Columns {
		typ, cellN := fieldType(es, col)
		for _, v := range rd.Data[col] {
			want[k] = append(want[k], expectCell(t, typ, cellN, v))
		}
	}
	nd := len(a.Schema.Dimensions)
	for _, batch := range []int{1, 5, 1 << 16} {
		// Tiny slabs make row/col-major reads cut the leading dimension
		// into many chunks, with tiles carried from one to the next.
		if batch == 5 {
			old := chunkCells
			chunkCells = 9
			defer func() { chunkCells = old }()
		}
		p := &plan.Plan{Array: a, Columns: rd.Columns, Subarray: subarrayOf(t, a, rd.Subarray),
			Layout: layoutOf(rd.Layout), BatchRows: batch, Limit: -1}
		got := rowsOf(t, readAll(t, p, fieldsOf(t, a.Schema, rd.Columns), 0))
		if len(got) == 0 {
			got = make([][]string, len(rd.Columns))
		}
		if len(got[0]) != rd.NumCells {
			t.Fatalf("batch %d: %d cells, TileDB read %d", batch, len(got[0]), rd.NumCells)
		}
		gotRows, wantRows := rowStrings(got, rd.NumCells, len(got)), rowStrings(want, rd.NumCells, len(want))
		exact := p.Layout != query.LayoutUnordered
		if a.Schema.AllowsDups && exact {
			if !slices.Equal(rowStrings(got, rd.NumCells, nd), rowStrings(want, rd.NumCells, nd)) {
				t.Errorf("batch %d: coordinate sequence differs from TileDB's", batch)
			}
		}
		if !exact || a.Schema.AllowsDups {
			gotRows, wantRows = sortedCopy(gotRows), sortedCopy(wantRows)
		}
		for i := range wantRows {
			if gotRows[i] != wantRows[i] {
				t.Fatalf("batch %d: cell %d: got %s, TileDB read %s (columns %v)", batch, i, gotRows[i], wantRows[i], rd.Columns)
			}
		}
	}
}

// expectSchemaOf describes the array's schema as the expect JSON does,
// as far as rendering values needs.
func expectSchemaOf(a *tdbarray.Array) *fixtures.Schema {
	s := &fixtures.Schema{AllowsDuplicates: a.Schema.AllowsDups}
	for _, d := range a.Schema.Dimensions {
		s.Dimensions = append(s.Dimensions, fixtures.Dimension{Name: d.Name, Type: d.Type.String()})
	}
	for _, at := range a.Schema.Attributes {
		cv := fixtures.CellValNum{Var: at.IsVar(), N: at.CellValNum}
		s.Attributes = append(s.Attributes, fixtures.Attribute{Name: at.Name, Type: at.Type.String(), CellValNum: cv, Nullable: at.Nullable})
	}
	return s
}
