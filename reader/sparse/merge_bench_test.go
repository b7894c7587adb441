package sparse

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/tileflight/tileflight/format/schema"
	"github.com/tileflight/tileflight/query"
	"github.com/tileflight/tileflight/reader/plan"
	"github.com/tileflight/tileflight/reader/tileio"
	"github.com/tileflight/tileflight/storage"
	"github.com/tileflight/tileflight/tdbarray"
	"github.com/tileflight/tileflight/writer"
)

// The sparse path's kernels on 1 M cells in 4 overlapping fragments
// written to memory (no filters, so that only merging and sorting are
// timed): global order (a k-way merge of the fragments, newest wins) and
// row-major order (slabs radix-sorted).
//
//	go test -run '^$' -bench Merge -benchmem ./reader/sparse/
func BenchmarkMerge(b *testing.B) {
	const frags, per = 4, 250_000
	st := storage.NewMem()
	ctx := context.Background()
	js := `{"type": "sparse", "capacity": 10000,
	 "dimensions": [{"name": "x", "type": "int64", "domain": [0, 9999], "tile": 1000},
	                {"name": "y", "type": "int64", "domain": [0, 9999], "tile": 1000}],
	 "attributes": [{"name": "v", "type": "float64"}]}`
	sch, err := schema.FromJSON([]byte(js))
	if err != nil {
		b.Fatal(err)
	}
	if err := writer.CreateArray(ctx, st, "a", sch); err != nil {
		b.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for f := 0; f < frags; f++ {
		x, y, v := make([]byte, 8*per), make([]byte, 8*per), make([]byte, 8*per)
		seen := map[[2]uint64]bool{}
		for i := 0; i < per; {
			p := [2]uint64{rng.Uint64N(10000), rng.Uint64N(10000)}
			if seen[p] {
				continue
			}
			seen[p] = true
			binary.LittleEndian.PutUint64(x[8*i:], p[0])
			binary.LittleEndian.PutUint64(y[8*i:], p[1])
			binary.LittleEndian.PutUint64(v[8*i:], math.Float64bits(rng.Float64()))
			i++
		}
		cols := map[string]writer.Column{"x": {Data: x}, "y": {Data: y}, "v": {Data: v}}
		if _, err := writer.WriteSparse(ctx, st, "a", sch, cols, writer.Options{Timestamp: uint64(f + 1)}); err != nil {
			b.Fatal(err)
		}
	}
	a, err := tdbarray.Open(ctx, st, "a", tdbarray.Options{})
	if err != nil {
		b.Fatal(err)
	}
	for _, layout := range []query.Layout{query.LayoutGlobal, query.LayoutRowMajor} {
		b.Run(string(layout), func(b *testing.B) {
			p, err := plan.Resolve(a, &query.Query{Array: "a", Layout: layout, Limit: -1})
			if err != nil {
				b.Fatal(err)
			}
			fields := fieldsOf(b, a.Schema, []string{"x", "y", "v"})
			b.SetBytes(frags * per * 24)
			b.ReportAllocs()
			for b.Loop() {
				r, err := NewReader(ctx, Input{Plan: p, Loader: tileio.NewLoader(a, tileio.Options{}), Fields: fields})
				if err != nil {
					b.Fatal(err)
				}
				for {
					rec, err := r.Next(ctx)
					if errors.Is(err, io.EOF) {
						break
					}
					if err != nil {
						b.Fatal(err)
					}
					rec.Release()
				}
				r.Close()
			}
		})
	}
}
