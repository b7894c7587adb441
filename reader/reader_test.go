package reader_test

import (
	"context"
	"errors"
	"io"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/tileflight/tileflight/errkind"
	"github.com/tileflight/tileflight/internal/fixtures"
	"github.com/tileflight/tileflight/query"
	"github.com/tileflight/tileflight/reader"
	"github.com/tileflight/tileflight/reader/internal/readtest"
	"github.com/tileflight/tileflight/storage"
)

func ownCase(t *testing.T, name string) (storage.Store, fixtures.Case) {
	t.Helper()
	cs, err := fixtures.LoadDir(filepath.Join("testdata", "dense"))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cs {
		if c.Name == name {
			st, _ := readtest.OpenCase(t, c)
			return st, c
		}
	}
	t.Fatalf("no case %s", name)
	return nil, fixtures.Case{}
}

// limit is honoured exactly and the rows are the first ones of the full
// result, in every layout.
func TestLimit(t *testing.T) {
	st, c := ownCase(t, "rd_col_multirange")
	for _, rd := range c.Expect.Reads {
		for _, limit := range []int64{0, 1, 10, 41} {
			q := readtest.QueryFor(c, rd)
			q.Limit, q.BatchRows = limit, 4
			recs, _, err := readtest.ReadAll(t, st, q, reader.Options{})
			if err != nil {
				t.Fatal(err)
			}
			want := rd
			want.NumCells = min(int(limit), rd.NumCells)
			want.Data = map[string][]fixtures.Value{}
			for k, v := range rd.Data {
				want.Data[k] = v[:want.NumCells]
			}
			t.Run(rd.Name, func(t *testing.T) { compareReadBatch(t, c, want, recs, 4) })
		}
	}
}

func compareReadBatch(t *testing.T, c fixtures.Case, rd fixtures.Read, recs []arrow.RecordBatch, batch int) {
	t.Helper()
	for _, r := range recs {
		if int(r.NumRows()) > batch {
			t.Errorf("batch of %d rows, batch_rows %d", r.NumRows(), batch)
		}
	}
	total := 0
	for _, r := range recs {
		total += int(r.NumRows())
	}
	if total != rd.NumCells {
		t.Fatalf("%d rows, want %d", total, rd.NumCells)
	}
	types := readtest.TypeNames(c, rd)
	for ci, col := range rd.Columns {
		row := 0
		for _, r := range recs {
			arr := r.Column(ci)
			for i := 0; i < arr.Len(); i++ {
				want, err := readtest.CanonExpect(rd.Data[col][row], arr.DataType(), types[col])
				if err != nil {
					t.Fatal(err)
				}
				if got := readtest.Canon(arr, i); got != want {
					t.Fatalf("column %q row %d: got %s, want %s", col, row, got, want)
				}
				row++
			}
		}
	}
}

// A query without a subarray spans the non-empty domain (docs/protocol.md, "Queries, tickets and descriptors"), with
// fill values where no fragment in it wrote.
func TestDefaultSubarrayIsNonEmptyDomain(t *testing.T) {
	st, _ := ownCase(t, "rd_fill_evolved") // i uint32 [0, 19]; fragments [3, 8] and [7, 11]
	recs, _, err := readtest.ReadAll(t, st, readtest.Parse(t, `{"array":"rd_fill_evolved","columns":["i","added"]}`), reader.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var is, added []string
	for _, r := range recs {
		for k := 0; k < int(r.NumRows()); k++ {
			is = append(is, readtest.Canon(r.Column(0), k))
			added = append(added, readtest.Canon(r.Column(1), k))
		}
	}
	wantI := []string{"3", "4", "5", "6", "7", "8", "9", "10", "11"}
	// "added" came with the schema evolution: the first fragment reads as
	// its fill, the second wrote -2..2 over [7, 11].
	wantA := []string{"77", "77", "77", "77", "-2", "-1", "0", "1", "2"}
	if len(is) != len(wantI) {
		t.Fatalf("i = %v, want %v", is, wantI)
	}
	for k := range wantI {
		if is[k] != wantI[k] || added[k] != wantA[k] {
			t.Fatalf("i, added = %v, %v; want %v, %v", is, added, wantI, wantA)
		}
	}
}

func TestOpenErrors(t *testing.T) {
	st, _ := ownCase(t, "rd_col_multirange")
	for _, tc := range []struct {
		q    string
		kind error
	}{
		{`{"array":"rd_col_multirange","columns":["zz"]}`, errkind.InvalidArgument},
		{`{"array":"rd_col_multirange","subarray":{"r":[[0,3]]}}`, errkind.InvalidArgument},
		{`{"array":"rd_col_multirange","subarray":{"q":[[1,3]]}}`, errkind.InvalidArgument},
		{`{"array":"no_such_array"}`, errkind.NotFound},
	} {
		_, err := reader.Open(context.Background(), st, readtest.Parse(t, tc.q), reader.Options{})
		if !errors.Is(err, tc.kind) {
			t.Errorf("%s: error %v, want kind %v", tc.q, err, tc.kind)
		}
	}
}

// Cancelling the context stops the read: Next returns the context's error
// at once and the workers exit.
func TestCancel(t *testing.T) {
	st, _ := ownCase(t, "rd_mixed_3d")
	before := runtime.NumGoroutine()
	ctx, cancel := context.WithCancel(context.Background())
	r, err := reader.Open(ctx, st, readtest.Parse(t, `{"array":"rd_mixed_3d","batch_rows":1}`), reader.Options{MemoryBudget: 1, Workers: 4})
	if err != nil {
		t.Fatal(err)
	}
	rec, err := r.Next(ctx)
	if err != nil {
		t.Fatal(err)
	}
	rec.Release()
	cancel()
	start := time.Now()
	for {
		rec, err := r.Next(ctx)
		if err != nil {
			if !errors.Is(err, context.Canceled) {
				t.Errorf("after cancel: %v", err)
			}
			break
		}
		rec.Release()
	}
	r.Close()
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("cancel took %v", d)
	}
	deadline := time.Now().Add(2 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > before {
		t.Errorf("%d goroutines after Close, %d before Open", n, before)
	}

	// A context cancelled before the first Next.
	ctx2, cancel2 := context.WithCancel(context.Background())
	r2, err := reader.Open(ctx2, st, readtest.Parse(t, `{"array":"rd_mixed_3d"}`), reader.Options{})
	if err != nil {
		t.Fatal(err)
	}
	cancel2()
	if _, err := r2.Next(ctx2); !errors.Is(err, context.Canceled) {
		t.Errorf("Next on a cancelled context: %v", err)
	}
	r2.Close()
}

// The RecordReader adapter yields the same rows and closes the reader.
func TestRecordReader(t *testing.T) {
	st, _ := ownCase(t, "rd_mixed_3d")
	r, err := reader.Open(context.Background(), st, readtest.Parse(t, `{"array":"rd_mixed_3d","batch_rows":16}`), reader.Options{})
	if err != nil {
		t.Fatal(err)
	}
	rr := r.RecordReader(context.Background())
	defer rr.Release()
	n := 0
	for rr.Next() {
		n += int(rr.RecordBatch().NumRows())
	}
	if rr.Err() != nil {
		t.Fatal(rr.Err())
	}
	// Non-empty domain: x [6, 14], y [1, 6], z [10, 13].
	if n != 9*6*4 {
		t.Errorf("%d rows, want %d", n, 9*6*4)
	}
	if _, err := r.Next(context.Background()); err != io.EOF {
		t.Errorf("after the end: %v", err)
	}
}

// Sparse arrays go through reader/sparse.
func TestSparseDelegates(t *testing.T) {
	c, ok := fixtures.Find(t, "sparse_string_dim")
	if !ok {
		t.Skip("no sparse_string_dim case")
	}
	st, _ := readtest.OpenCase(t, c)
	rd := c.Expect.Reads[0]
	recs, _, err := readtest.ReadAll(t, st, &query.Query{Array: c.Name, Layout: query.Layout(rd.Layout), Limit: -1}, reader.Options{})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, r := range recs {
		n += int(r.NumRows())
	}
	if n != rd.NumCells {
		t.Errorf("%d rows, TileDB read %d", n, rd.NumCells)
	}
}
