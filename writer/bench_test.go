package writer

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"syscall"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/tileflight/tileflight/format/datatype"
	"github.com/tileflight/tileflight/format/schema"
	"github.com/tileflight/tileflight/storage"
)

// Run with: go test -run '^$' -bench . -benchtime 1x ./writer/
// (benchmarks/write_tiledb.py times TileDB on the same data).

func BenchmarkSparseIngest10M(b *testing.B) {
	const n = 10_000_000
	rng := rand.New(rand.NewPCG(1, 2))
	x, y, v := make([]byte, 8*n), make([]byte, 8*n), make([]byte, 8*n)
	var s Column
	s.Offsets = make([]byte, 0, 8*n)
	for i := 0; i < n; i++ {
		binary.LittleEndian.PutUint64(x[8*i:], uint64(rng.Int64N(1_000_000)))
		binary.LittleEndian.PutUint64(y[8*i:], uint64(i))
		binary.LittleEndian.PutUint64(v[8*i:], math.Float64bits(rng.Float64()))
		s.Offsets = binary.LittleEndian.AppendUint64(s.Offsets, uint64(len(s.Data)))
		s.Data = fmt.Appendf(s.Data, "v%d", i%1000)
	}
	js := `{"type": "sparse", "capacity": 100000,
	 "dimensions": [{"name": "x", "type": "int64", "domain": [0, 999999], "tile": 100000, "filters": [{"name": "zstd", "level": 1}]},
	                {"name": "y", "type": "int64", "domain": [0, 99999999], "tile": 1000000, "filters": [{"name": "zstd", "level": 1}]}],
	 "attributes": [{"name": "v", "type": "float64", "filters": [{"name": "zstd", "level": 1}]},
	                {"name": "s", "type": "string_ascii", "cell_val_num": "var", "filters": [{"name": "zstd", "level": 1}]}]}`
	cols := map[string]Column{"x": {Data: x}, "y": {Data: y}, "v": {Data: v}, "s": s}
	b.SetBytes(int64(len(x) + len(y) + len(v) + len(s.Data) + len(s.Offsets)))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		st := storage.NewMem()
		sch, _ := schema.FromJSON([]byte(js))
		if err := CreateArray(context.Background(), st, "a", sch); err != nil {
			b.Fatal(err)
		}
		if _, err := WriteSparse(context.Background(), st, "a", sch, cols, Options{}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "cells/s")
}

func BenchmarkDenseIngest256MiB(b *testing.B) {
	const rows, cols = 4096, 8192 // 32 Mi float64 = 256 MiB
	data := make([]byte, 8*rows*cols)
	for i := 0; i < rows*cols; i++ {
		binary.LittleEndian.PutUint64(data[8*i:], math.Float64bits(float64(i%1000)*0.5))
	}
	js := `{"type": "dense",
	 "dimensions": [{"name": "r", "type": "int32", "domain": [0, 4095], "tile": 256},
	                {"name": "c", "type": "int32", "domain": [0, 8191], "tile": 256}],
	 "attributes": [{"name": "v", "type": "float64", "filters": [{"name": "zstd", "level": 1}]}]}`
	b.SetBytes(int64(len(data)))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		st := storage.NewMem()
		sch, _ := schema.FromJSON([]byte(js))
		if err := CreateArray(context.Background(), st, "a", sch); err != nil {
			b.Fatal(err)
		}
		if _, err := WriteDense(context.Background(), st, "a", sch, [][2]int64{{0, rows - 1}, {0, cols - 1}}, schema.RowMajor, map[string]Column{"v": {Data: data}}, Options{}); err != nil {
			b.Fatal(err)
		}
	}
}

var pieceField = &field{typ: datatype.Float64, kind: statFloat, cellSize: 8, hasMinMax: true, hasSum: true}

// BenchmarkFixedStats summarizes one 64 Ki-cell tile (the dense
// benchmark's 256x256 space tile) of each numeric kind.
func BenchmarkFixedStats(b *testing.B) {
	const n = 256 * 256
	f64 := make([]byte, 8*n)
	i32 := make([]byte, 4*n)
	for i := 0; i < n; i++ {
		binary.LittleEndian.PutUint64(f64[8*i:], math.Float64bits(float64(i%1000)*0.5))
		binary.LittleEndian.PutUint32(i32[4*i:], uint32(i%1000-500))
	}
	for _, c := range []struct {
		name string
		f    func() tileStats
		size int
	}{
		{"float64", func() tileStats { return fixedStats[float64](&statTile{n: n, data: f64}, statFloat, true, true) }, len(f64)},
		{"int32", func() tileStats { return fixedStats[int32](&statTile{n: n, data: i32}, statInt, true, true) }, len(i32)},
		// The same float64 tile in two pieces (cells from two batches).
		{"float64/pieces", func() tileStats {
			st, _ := pieceField.partsStats([][]byte{f64[:8*n/3], f64[8*n/3:]})
			return st
		}, len(f64)},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(c.size))
			for i := 0; i < b.N; i++ {
				c.f()
			}
		})
	}
}

// BenchmarkDenseStream256MiB is the DoPut path of benchmarks/bench.py's
// put_dense case without the network: 256 MiB of float64 in 8 MiB Arrow
// batches (what pyarrow sends) through a DenseWriter into 16 MiB zstd-1
// tiles, stored in memory. Its allocations per op are the writer's copies.
func BenchmarkDenseStream256MiB(b *testing.B) {
	const rows, cols, batch = 4096, 8192, 1 << 20
	vals := make([]float64, rows*cols)
	for i := range vals {
		vals[i] = float64(i) // the harness's r*cols + c
	}
	var recs []arrow.RecordBatch
	sch := arrow.NewSchema([]arrow.Field{{Name: "v", Type: arrow.PrimitiveTypes.Float64}}, nil)
	for lo := 0; lo < len(vals); lo += batch {
		bld := array.NewFloat64Builder(memory.DefaultAllocator)
		bld.AppendValues(vals[lo:min(lo+batch, len(vals))], nil)
		arr := bld.NewArray()
		recs = append(recs, array.NewRecordBatch(sch, []arrow.Array{arr}, int64(arr.Len())))
		bld.Release()
	}
	js := `{"type": "dense",
	 "dimensions": [{"name": "x", "type": "int64", "domain": [0, 4095], "tile": 256},
	                {"name": "y", "type": "int64", "domain": [0, 8191], "tile": 8192}],
	 "attributes": [{"name": "v", "type": "float64", "filters": [{"name": "zstd", "level": 1}]}]}`
	b.SetBytes(int64(8 * len(vals)))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		st := storage.NewMem()
		s, _ := schema.FromJSON([]byte(js))
		if err := CreateArray(context.Background(), st, "a", s); err != nil {
			b.Fatal(err)
		}
		w, err := NewDenseWriter(context.Background(), st, "a", s, [][2]int64{{0, rows - 1}, {0, cols - 1}}, schema.RowMajor, Options{MaxFragmentBytes: 64 << 20})
		if err != nil {
			b.Fatal(err)
		}
		for _, r := range recs {
			if err := w.Append(r); err != nil {
				b.Fatal(err)
			}
		}
		if _, err := w.Commit(); err != nil {
			b.Fatal(err)
		}
	}
}

// smallPutBatch is one 10,000-cell put of benchmarks/ingest.py: sensor x,
// time y, v float64, w int32, s a short string, in shuffled order.
func smallPutBatch(k int) arrow.RecordBatch {
	const n = 10_000
	rng := rand.New(rand.NewPCG(uint64(k), 7))
	sch := arrow.NewSchema([]arrow.Field{
		{Name: "x", Type: arrow.PrimitiveTypes.Int64}, {Name: "y", Type: arrow.PrimitiveTypes.Int64},
		{Name: "v", Type: arrow.PrimitiveTypes.Float64}, {Name: "w", Type: arrow.PrimitiveTypes.Int32},
		{Name: "s", Type: arrow.BinaryTypes.String},
	}, nil)
	b := array.NewRecordBuilder(memory.DefaultAllocator, sch)
	defer b.Release()
	for _, j := range rng.Perm(n) {
		id := int64(k*n + j)
		b.Field(0).(*array.Int64Builder).Append(id % 1000)
		b.Field(1).(*array.Int64Builder).Append(id / 1000)
		b.Field(2).(*array.Float64Builder).Append(rng.Float64())
		b.Field(3).(*array.Int32Builder).Append(int32(rng.IntN(2000) - 1000))
		b.Field(4).(*array.StringBuilder).Append(fmt.Sprintf("r%d", id%9973))
	}
	return b.NewRecordBatch()
}

const smallPutSchema = `{"type": "sparse", "capacity": 10000,
 "dimensions": [{"name": "x", "type": "int64", "domain": [0, 999], "tile": 100},
                {"name": "y", "type": "int64", "domain": [0, 1099511627775], "tile": 10000}],
 "attributes": [{"name": "v", "type": "float64"}, {"name": "w", "type": "int32"},
                {"name": "s", "type": "string_ascii", "cell_val_num": "var"}]}`

func localStore(p storage.SyncPolicy) func(b *testing.B) storage.Store {
	return func(b *testing.B) storage.Store {
		st, err := storage.NewLocal(b.TempDir())
		if err != nil {
			b.Fatal(err)
		}
		st.SetSync(p)
		return st
	}
}

// BenchmarkSmallSparsePut is one DoPut of benchmarks/ingest.py without
// the network: a 10,000-cell Arrow batch through a SparseWriter and its
// commit, into memory and into a local directory (each file synced, or
// none). One op = one put = one fragment.
func BenchmarkSmallSparsePut(b *testing.B) {
	recs := make([]arrow.RecordBatch, 16)
	for i := range recs {
		recs[i] = smallPutBatch(i)
	}
	stores := []struct {
		name string
		open func(b *testing.B) storage.Store
	}{
		{"mem", func(*testing.B) storage.Store { return storage.NewMem() }},
		{"local-fsync-always", localStore(storage.SyncAlways)},
		{"local-fsync-never", localStore(storage.SyncNever)},
	}
	for _, sc := range stores {
		b.Run(sc.name, func(b *testing.B) {
			st := sc.open(b)
			s, err := schema.FromJSON([]byte(smallPutSchema))
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			if err := CreateArray(ctx, st, "a", s); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.ResetTimer()
			cpu0 := cpuTime()
			for i := 0; i < b.N; i++ {
				// Distinct timestamps keep the fragments apart; the cells
				// repeat, which a sparse array takes as updates.
				w, err := NewSparseWriter(ctx, st, "a", s, Options{Timestamp: uint64(i + 1)})
				if err != nil {
					b.Fatal(err)
				}
				if err := w.Append(recs[i%len(recs)]); err != nil {
					b.Fatal(err)
				}
				if _, err := w.Commit(); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "puts/s")
			// On a shared machine the process's CPU time (user + system)
			// per put is steadier than the wall time.
			b.ReportMetric((cpuTime()-cpu0).Seconds()*1e3/float64(b.N), "cpu-ms/op")
		})
	}
}

// cpuTime is the process's CPU time so far (user + system).
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
