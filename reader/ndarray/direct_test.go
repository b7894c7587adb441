package ndarray_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/tileflight/tileflight/errkind"
	"github.com/tileflight/tileflight/query"
	"github.com/tileflight/tileflight/reader"
	"github.com/tileflight/tileflight/reader/ndarray"
	"github.com/tileflight/tileflight/storage"
)

// TestB2NDDirectBuffersReturn: the batches of the direct path go back to
// the free lists when their records are released, so that repeated reads
// do not allocate (and zero) fresh batch buffers.
func TestB2NDDirectBuffersReturn(t *testing.T) {
	ctx := context.Background()
	st, err := storage.NewLocal(filepath.Join("..", "..", "testdata", "b2nd", "arrays"))
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
			frees0, direct0 := ndarray.DirectFrees.Load(), ndarray.DirectReads.Load()
			q := &query.Query{Array: tc.array, Columns: []string{"value"}, Subarray: tc.sub, BatchRows: 5, Limit: -1}
			r, err := reader.Open(ctx, st, q, reader.Options{Workers: 2})
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
			if ndarray.DirectReads.Load() == direct0 {
				t.Fatal("the read did not take the direct path")
			}
			if n < 2 {
				t.Fatalf("%d batches", n)
			}
			if got := ndarray.DirectFrees.Load() - frees0; got != n {
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
	st, err := storage.NewLocal(filepath.Join("..", "..", "testdata", "b2nd", "arrays"))
	if err != nil {
		t.Fatal(err)
	}
	sub := []query.DimRanges{{Dim: "dim1", Ranges: []query.Range{{Lo: query.Value{Num: "4"}, Hi: query.Value{Num: "6"}}}}}
	for _, ws := range []int64{0, 8} {
		direct0 := ndarray.DirectReads.Load()
		q := &query.Query{Array: "g_lef8.b2nd", Columns: []string{"value"}, Subarray: sub, Limit: -1}
		r, err := reader.Open(ctx, st, q, reader.Options{Workers: 2, MaxWorkingSet: ws})
		if err == nil {
			_, err = r.Next(ctx)
			r.Close()
		}
		took := ndarray.DirectReads.Load() != direct0
		if ws == 0 && (err != nil || !took) {
			t.Fatalf("no working set: %v, direct path %v", err, took)
		}
		if ws > 0 && (errkind.Of(err) != errkind.ResourceExhausted || took) {
			t.Fatalf("working set %d: got %v (direct path %v), want ResourceExhausted", ws, err, took)
		}
	}
}

// TestB2NDDirectEarlyBatches: a batch of the direct path goes out as soon
// as the blocks writing into it are decoded, not when its group is: with
// every block but the first held back, the first batch (inside the first
// block) still arrives, and the whole read is then the same as one whose
// blocks are not held.
func TestB2NDDirectEarlyBatches(t *testing.T) {
	ctx := context.Background()
	st, err := storage.NewLocal(filepath.Join("..", "..", "testdata", "b2nd", "arrays"))
	if err != nil {
		t.Fatal(err)
	}
	// g_lef8.b2nd: 13 x 11 float64, chunks 5 x 4, blocks 2 x 3; one group
	// (the whole array is far below the group size); the first batch of
	// 3 rows is cells (0, 0..2), in block 0 of chunk 0.
	q := &query.Query{Array: "g_lef8.b2nd", Columns: []string{"value"}, BatchRows: 3, Limit: -1}
	read := func(hold bool) []uint64 {
		release := make(chan struct{})
		if hold {
			*ndarray.DirectBlock = func(k ndarray.BlockKey) {
				if k != ndarray.Key(0, 0) {
					<-release
				}
			}
			defer func() { *ndarray.DirectBlock = nil }()
		}
		direct0 := ndarray.DirectReads.Load()
		r, err := reader.Open(ctx, st, q, reader.Options{Workers: 2})
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		var out []uint64
		first := make(chan error, 1)
		go func() {
			rec, err := r.Next(ctx)
			if err == nil {
				out = appendBits(out, rec.Column(0).(*array.Float64).Float64Values())
				rec.Release()
			}
			first <- err
		}()
		select {
		case err := <-first:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(10 * time.Second):
			close(release)
			t.Fatal("the first batch did not arrive while the other blocks were held")
		}
		if hold {
			close(release)
		}
		rest := readAllRecords(t, r)[0]
		out = appendBits(out, rest.(*array.Float64).Float64Values())
		rest.Release()
		if ndarray.DirectReads.Load() == direct0 {
			t.Fatal("the read did not take the direct path")
		}
		return out
	}
	held, free := read(true), read(false)
	if len(held) != 13*11 || len(free) != 13*11 {
		t.Fatalf("%d and %d values, want %d", len(held), len(free), 13*11)
	}
	for i := range held {
		if held[i] != free[i] {
			t.Fatalf("value %d: %#x with blocks held, %#x without", i, held[i], free[i])
		}
	}
}

// appendBits appends the bits of vs (NaNs compare as bits).
func appendBits(out []uint64, vs []float64) []uint64 {
	for _, v := range vs {
		out = append(out, math.Float64bits(v))
	}
	return out
}
