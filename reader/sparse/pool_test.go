package sparse

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	arrowarray "github.com/apache/arrow-go/v18/arrow/array"

	"github.com/tileflight/tileflight/arrowconv"
	"github.com/tileflight/tileflight/format/schema"
	"github.com/tileflight/tileflight/internal/bufpool"
	"github.com/tileflight/tileflight/query"
	"github.com/tileflight/tileflight/reader/plan"
	"github.com/tileflight/tileflight/reader/tileio"
	"github.com/tileflight/tileflight/storage"
	"github.com/tileflight/tileflight/tdbarray"
	"github.com/tileflight/tileflight/writer"
)

// TestMain poisons every pooled buffer as it goes back to the free lists,
// so that any test of this package reading a tile's data after it was
// recycled (a batch built too late, a column kept past its release) sees
// garbage instead of passing by luck.
func TestMain(m *testing.M) {
	bufpool.SetPoison(bufpool.Poison)
	os.Exit(m.Run())
}

// TestPooledScan: an unordered scan whose tiles' data is pooled returns
// exactly the written cells while the records are held past the reader's
// end (their Arrow buffers keep the tiles alive), and gives every pooled
// buffer back once the records are released (none when the cache holds
// them: then at eviction). Batches wrap parts of tiles (700 rows), or
// gather several tiles into copies (2500: the records hold no pooled
// buffer then); filters decode into pooled buffers (zstd), or the read
// buffer is the tile (no filter, local store), or nothing is pooled (no
// filter, memory store: the store's own buffer is the tile; a shuffle
// first: its tiles are zeroed).
func TestPooledScan(t *testing.T) {
	const n = 10_000
	for _, c := range []struct {
		name      string
		filters   string
		local     bool
		held      bool // records hold pooled buffers
		batchRows int
		cache     int64
	}{
		{"zstd local split", `[{"name": "zstd", "level": 1}]`, true, true, 700, 0},
		{"zstd local gather", `[{"name": "zstd", "level": 1}]`, true, false, 2500, 0},
		{"zstd mem", `[{"name": "zstd", "level": 1}]`, false, true, 700, 0},
		{"plain local", `[]`, true, true, 700, 0},
		{"plain mem", `[]`, false, false, 700, 0},
		{"shuffle zstd local", `[{"name": "byteshuffle"}, {"name": "zstd", "level": 1}]`, true, false, 700, 0},
		{"zstd local cached", `[{"name": "zstd", "level": 1}]`, true, true, 700, 1 << 20},
	} {
		t.Run(c.name, func(t *testing.T) {
			a := pooledArray(t, c.filters, c.local, n)
			p, err := plan.Resolve(a, &query.Query{Array: "a", Columns: []string{"v", "x", "y"}, Layout: query.LayoutUnordered, Limit: -1, BatchRows: c.batchRows})
			if err != nil {
				t.Fatal(err)
			}
			fields := fieldsOf(t, a.Schema, []string{"v", "x", "y"})
			live := bufpool.Live()
			var cache *tileio.Cache
			if c.cache > 0 {
				cache = tileio.NewCache(c.cache)
			}
			for pass := 0; pass < 2; pass++ { // the second pass hits the cache
				recs := readPooled(t, p, fields, cache)
				if c.held && cache == nil && bufpool.Live() == live {
					t.Fatal("the records hold no pooled tile")
				}
				if !c.held && bufpool.Live() != live {
					t.Fatalf("the records hold %d pooled tiles, want none", bufpool.Live()-live)
				}
				checkPooled(t, recs, n)
				for _, rec := range recs {
					rec.Release()
				}
				if cache == nil && bufpool.Live() != live {
					t.Fatalf("%d pooled buffers not recycled after every record was released", bufpool.Live()-live)
				}
			}
		})
	}
}

// pooledArray writes n cells (x = i / 100, y = i % 100, v = i / 2) in one
// fragment of tiles of 1000 cells, with filters on every field (the
// coordinates' default, zstd, too).
func pooledArray(t *testing.T, filters string, local bool, n int) *tdbarray.Array {
	t.Helper()
	var st storage.Store = storage.NewMem()
	if local {
		l, err := storage.NewLocal(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		st = l
	}
	ctx := context.Background()
	js := fmt.Sprintf(`{"type": "sparse", "capacity": 1000, "coords_filters": %[1]s,
	 "dimensions": [{"name": "x", "type": "int64", "domain": [0, 999], "tile": 10, "filters": %[1]s},
	                {"name": "y", "type": "int64", "domain": [0, 99], "tile": 100, "filters": %[1]s}],
	 "attributes": [{"name": "v", "type": "float64", "filters": %[1]s}]}`, filters)
	sch, err := schema.FromJSON([]byte(js))
	if err != nil {
		t.Fatal(err)
	}
	if err := writer.CreateArray(ctx, st, "a", sch); err != nil {
		t.Fatal(err)
	}
	x, y, v := make([]byte, 8*n), make([]byte, 8*n), make([]byte, 8*n)
	for i := 0; i < n; i++ {
		binary.LittleEndian.PutUint64(x[8*i:], uint64(i/100))
		binary.LittleEndian.PutUint64(y[8*i:], uint64(i%100))
		binary.LittleEndian.PutUint64(v[8*i:], math.Float64bits(float64(i)/2))
	}
	cols := map[string]writer.Column{"x": {Data: x}, "y": {Data: y}, "v": {Data: v}}
	if _, err := writer.WriteSparse(ctx, st, "a", sch, cols, writer.Options{Timestamp: 1}); err != nil {
		t.Fatal(err)
	}
	a, err := tdbarray.Open(ctx, st, "a", tdbarray.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// readPooled reads p to the end and closes the reader, keeping the
// records.
func readPooled(t *testing.T, p *plan.Plan, fields []arrowconv.Field, cache *tileio.Cache) []arrow.RecordBatch {
	t.Helper()
	ctx := context.Background()
	r, err := NewReader(ctx, Input{Plan: p, Loader: tileio.NewLoader(p.Array, tileio.Options{Cache: cache}), Fields: fields})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var recs []arrow.RecordBatch
	for {
		rec, err := r.Next(ctx)
		if errors.Is(err, io.EOF) {
			return recs
		}
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, rec)
	}
}

// checkPooled checks that recs hold the n cells pooledArray wrote, in
// order (one fragment, stored in global order).
func checkPooled(t *testing.T, recs []arrow.RecordBatch, n int) {
	t.Helper()
	i := 0
	for _, rec := range recs {
		v := rec.Column(0).(*arrowarray.Float64).Float64Values()
		x := rec.Column(1).(*arrowarray.Int64).Int64Values()
		y := rec.Column(2).(*arrowarray.Int64).Int64Values()
		for k := range v {
			if x[k] != int64(i/100) || y[k] != int64(i%100) || v[k] != float64(i)/2 {
				t.Fatalf("cell %d: (%d, %d) = %v, want (%d, %d) = %v", i, x[k], y[k], v[k], i/100, i%100, float64(i)/2)
			}
			i++
		}
	}
	if i != n {
		t.Fatalf("%d cells, want %d", i, n)
	}
}

// BenchmarkScan is an unordered full scan of 1 M cells (x, y int64 and v
// float64, zstd 1, tiles of 100 000 cells) from local files, each record
// released before the next as gRPC does, with the tiles' data pooled (as
// the reader does) or left to the collector (before): compare B/op and
// the time per scan.
//
//	go test -run '^$' -bench Scan -benchmem ./reader/sparse/
func BenchmarkScan(b *testing.B) {
	const n = 1_000_000
	a := scanArray(b, n)
	p, err := plan.Resolve(a, &query.Query{Array: "a", Columns: []string{"x", "y", "v"}, Layout: query.LayoutUnordered, Limit: -1})
	if err != nil {
		b.Fatal(err)
	}
	fields := fieldsOf(b, a.Schema, p.Columns)
	ctx := context.Background()
	defer bufpool.SetPoison(nil)() // TestMain's poisoning is not the reader's cost
	for _, pooled := range []bool{true, false} {
		b.Run(map[bool]string{true: "pooled", false: "unpooled"}[pooled], func(b *testing.B) {
			defer func(old bool) { pooledScans = old }(pooledScans)
			pooledScans = pooled
			b.SetBytes(n * 24)
			b.ReportAllocs()
			for b.Loop() {
				r, err := NewReader(ctx, Input{Plan: p, Loader: tileio.NewLoader(a, tileio.Options{}), Fields: fields})
				if err != nil {
					b.Fatal(err)
				}
				rows := 0
				for {
					rec, err := r.Next(ctx)
					if errors.Is(err, io.EOF) {
						break
					}
					if err != nil {
						b.Fatal(err)
					}
					rows += int(rec.NumRows())
					rec.Release()
				}
				r.Close()
				if rows != n {
					b.Fatalf("%d rows, want %d", rows, n)
				}
			}
		})
	}
}

// scanArray writes n cells of random values into a local array in tiles
// of 100 000 cells with zstd (level 1) on every field.
func scanArray(b *testing.B, n int) *tdbarray.Array {
	b.Helper()
	st, err := storage.NewLocal(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	js := `{"type": "sparse", "capacity": 100000, "coords_filters": [{"name": "zstd", "level": 1}],
	 "dimensions": [{"name": "x", "type": "int64", "domain": [0, 9999], "tile": 1000},
	                {"name": "y", "type": "int64", "domain": [0, 99], "tile": 100}],
	 "attributes": [{"name": "v", "type": "float64", "filters": [{"name": "zstd", "level": 1}]}]}`
	sch, err := schema.FromJSON([]byte(js))
	if err != nil {
		b.Fatal(err)
	}
	if err := writer.CreateArray(ctx, st, "a", sch); err != nil {
		b.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(3, 4))
	x, y, v := make([]byte, 8*n), make([]byte, 8*n), make([]byte, 8*n)
	for i := 0; i < n; i++ {
		binary.LittleEndian.PutUint64(x[8*i:], uint64(i/100))
		binary.LittleEndian.PutUint64(y[8*i:], uint64(i%100))
		binary.LittleEndian.PutUint64(v[8*i:], math.Float64bits(rng.NormFloat64()))
	}
	cols := map[string]writer.Column{"x": {Data: x}, "y": {Data: y}, "v": {Data: v}}
	if _, err := writer.WriteSparse(ctx, st, "a", sch, cols, writer.Options{Timestamp: 1}); err != nil {
		b.Fatal(err)
	}
	a, err := tdbarray.Open(ctx, st, "a", tdbarray.Options{})
	if err != nil {
		b.Fatal(err)
	}
	return a
}
