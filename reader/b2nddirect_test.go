package reader

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"testing"

	"github.com/tileflight/tileflight/errkind"
	"github.com/tileflight/tileflight/query"
	"github.com/tileflight/tileflight/storage"
)

// TestB2NDDirectBuffersReturn: the batches of the direct path go back to
// the free lists when their records are released, so that repeated reads
// do not allocate (and zero) fresh batch buffers.
func TestB2NDDirectBuffersReturn(t *testing.T) {
	ctx := context.Background()
	st, err := storage.NewLocal(filepath.Join("..", "testdata", "b2nd", "arrays"))
	if err != nil {
		t.Fatal(err)
	}
	rng := func(dim string, lo, hi int) query.DimRanges {
		return query.DimRanges{Dim: dim, Ranges: []query.Range{{Lo: query.Value{Num: json.Number(fmt.Sprint(lo))}, Hi: query.Value{Num: json.Number(fmt.Sprint(hi))}}}}
	}
	for _, tc := range []struct {
		array string
		sub   []query.DimRanges
	}{
		{"g_lef8.b2nd", []query.DimRanges{rng("dim1", 4, 6)}},                    // contiguous frame
		{"g_lei4.b2nd", []query.DimRanges{rng("dim1", 2, 3), rng("dim2", 3, 4)}}, // sparse frame
	} {
		t.Run(tc.array, func(t *testing.T) {
			frees0, direct0 := b2ndDirectFrees.Load(), b2ndDirectReads.Load()
			q := &query.Query{Array: tc.array, Columns: []string{"value"}, Subarray: tc.sub, BatchRows: 5, Limit: -1}
			r, err := Open(ctx, st, q, Options{Workers: 2})
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			n := int64(0)
			for {
				rec, err := r.Next(ctx)
				if err == io.EOF {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				n++
				rec.Release()
			}
			if b2ndDirectReads.Load() == direct0 {
				t.Fatal("the read did not take the direct path")
			}
			if n < 2 {
				t.Fatalf("%d batches", n)
			}
			if got := b2ndDirectFrees.Load() - frees0; got != n {
				t.Fatalf("%d of %d batch buffers returned to the free lists", got, n)
			}
		})
	}
}

// TestB2NDDirectWorkingSet: a read whose block-row does not fit the working
// set does not take the direct path; the block-row path refuses it with
// ResourceExhausted, as before.
func TestB2NDDirectWorkingSet(t *testing.T) {
	ctx := context.Background()
	st, err := storage.NewLocal(filepath.Join("..", "testdata", "b2nd", "arrays"))
	if err != nil {
		t.Fatal(err)
	}
	sub := []query.DimRanges{{Dim: "dim1", Ranges: []query.Range{{Lo: query.Value{Num: "4"}, Hi: query.Value{Num: "6"}}}}}
	for _, ws := range []int64{0, 8} {
		direct0 := b2ndDirectReads.Load()
		q := &query.Query{Array: "g_lef8.b2nd", Columns: []string{"value"}, Subarray: sub, Limit: -1}
		r, err := Open(ctx, st, q, Options{Workers: 2, MaxWorkingSet: ws})
		if err == nil {
			_, err = r.Next(ctx)
			r.Close()
		}
		took := b2ndDirectReads.Load() != direct0
		if ws == 0 && (err != nil || !took) {
			t.Fatalf("no working set: %v, direct path %v", err, took)
		}
		if ws > 0 && (errkind.Of(err) != errkind.ResourceExhausted || took) {
			t.Fatalf("working set %d: got %v (direct path %v), want ResourceExhausted", ws, err, took)
		}
	}
}
