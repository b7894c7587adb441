package dense_test

import (
	"path/filepath"
	"testing"

	"github.com/tileflight/tileflight/internal/fixtures"
	"github.com/tileflight/tileflight/reader"
	"github.com/tileflight/tileflight/reader/internal/readtest"
)

// denseCases are the TileDB-written dense arrays: the fixture matrix (or
// its golden subset) plus the reader's own cases in reader/testdata/dense
// (python_tests/golden/reader_dense_cases.py).
func denseCases(t *testing.T) []fixtures.Case {
	t.Helper()
	var out []fixtures.Case
	for _, c := range fixtures.Cases(t) {
		if c.Expect.Schema.Type == "dense" {
			out = append(out, c)
		}
	}
	own, err := fixtures.LoadDir(filepath.Join("..", "testdata", "dense"))
	if err != nil {
		t.Fatal(err)
	}
	return append(out, own...)
}

// Every dense read TileDB recorded, in every layout, at every timestamp,
// reads back the same cells in the same order.
func TestDenseConformance(t *testing.T) {
	n := 0
	for _, c := range denseCases(t) {
		for _, rd := range c.Expect.Reads {
			t.Run(c.Name+"/"+rd.Name, func(t *testing.T) {
				st, key := readtest.OpenCase(t, c)
				for _, opt := range []reader.Options{{EncryptionKey: key}, {EncryptionKey: key, MemoryBudget: 1, Workers: 3}} {
					q := readtest.QueryFor(c, rd)
					q.BatchRows = 7 // several batches, cut inside tiles
					recs, _, err := readtest.ReadAll(t, st, q, opt)
					if err != nil {
						t.Fatalf("%+v: %v", opt, err)
					}
					readtest.CompareRead(t, c, rd, recs)
					for _, r := range recs {
						r.Release()
					}
				}
				n++
			})
		}
	}
	if n == 0 {
		t.Fatal("no dense reads")
	}
}
