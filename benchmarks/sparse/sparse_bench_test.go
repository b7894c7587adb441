// Package sparsebench benchmarks the sparse read path against TileDB on a
// 10 M-cell array (two int64 dimensions, a float64 attribute, zstd). The
// array is written by TileDB (sparse_tiledb.py) into the user cache
// directory on first use and reused; TileDB's own timings of the same
// reads are taken in the same run, and each benchmark reports the ratio.
// Not run by `go test` without -bench; skipped without the Python venv.
package sparsebench

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/tileflight/tileflight/arrowconv"
	"github.com/tileflight/tileflight/format/datatype"
	"github.com/tileflight/tileflight/query"
	"github.com/tileflight/tileflight/reader/plan"
	"github.com/tileflight/tileflight/reader/sparse"
	"github.com/tileflight/tileflight/reader/tileio"
	"github.com/tileflight/tileflight/storage"
	"github.com/tileflight/tileflight/tdbarray"
)

func python(b *testing.B) string {
	py, err := filepath.Abs(filepath.Join("..", "..", ".venv", "bin", "python"))
	if err != nil {
		b.Skip(err)
	}
	if _, err := os.Stat(py); err != nil {
		b.Skipf("no Python venv with tiledb (%s)", py)
	}
	return py
}

func dataDir(b *testing.B) string {
	d, err := os.UserCacheDir()
	if err != nil {
		d = os.TempDir()
	}
	d = filepath.Join(d, "tileflight-bench", "sparse")
	if err := os.MkdirAll(d, 0o755); err != nil {
		b.Fatal(err)
	}
	out, err := exec.Command(python(b), "sparse_tiledb.py", "gen", d).CombinedOutput()
	if err != nil {
		b.Fatalf("generating the array: %v\n%s", err, out)
	}
	return d
}

type tiledbTimes struct {
	WholeS     float64 `json:"whole_s"`
	SubS       float64 `json:"sub_s"`
	WholeCells int     `json:"whole_cells"`
	SubCells   int     `json:"sub_cells"`
}

func tiledbTiming(b *testing.B, dir, layout string) tiledbTimes {
	out, err := exec.Command(python(b), "sparse_tiledb.py", "time", dir, layout).Output()
	if err != nil {
		b.Fatalf("timing TileDB: %v", err)
	}
	var t tiledbTimes
	if err := json.Unmarshal(out, &t); err != nil {
		b.Fatalf("timing TileDB: %v: %s", err, out)
	}
	return t
}

func i64(v int64) []byte { x := make([]byte, 8); binary.LittleEndian.PutUint64(x, uint64(v)); return x }

func run(b *testing.B, layout query.Layout, sub bool) {
	dir := dataDir(b)
	tt := tiledbTiming(b, dir, string(layout))
	st, err := storage.NewLocal(dir)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	a, err := tdbarray.Open(ctx, st, "sparse10m", tdbarray.Options{})
	if err != nil {
		b.Fatal(err)
	}
	subarray := plan.Subarray{{{Lo: i64(0), Hi: i64(9999)}}, {{Lo: i64(0), Hi: i64(999)}}}
	want, ref := tt.WholeCells, tt.WholeS
	if sub {
		subarray = plan.Subarray{{{Lo: i64(2000), Hi: i64(2999)}}, {{Lo: i64(100), Hi: i64(199)}}}
		want, ref = tt.SubCells, tt.SubS
	}
	fields := []arrowconv.Field{
		{Name: "x", Type: datatype.Int64, CellValNum: 1, Role: arrowconv.Dimension},
		{Name: "y", Type: datatype.Int64, CellValNum: 1, Role: arrowconv.Dimension},
		{Name: "v", Type: datatype.Float64, CellValNum: 1},
	}
	p := &plan.Plan{Array: a, Columns: []string{"x", "y", "v"}, Subarray: subarray, Layout: layout, BatchRows: 1 << 16, Limit: -1}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		r, err := sparse.NewReader(ctx, sparse.Input{Plan: p, Loader: tileio.NewLoader(a, tileio.Options{}), Fields: fields})
		if err != nil {
			b.Fatal(err)
		}
		n := 0
		for {
			rec, err := r.Next(ctx)
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				b.Fatal(err)
			}
			n += int(rec.NumRows())
			rec.Release()
		}
		r.Close()
		if n != want {
			b.Fatalf("%d cells, TileDB read %d", n, want)
		}
	}
	b.StopTimer()
	per := b.Elapsed().Seconds() / float64(b.N)
	b.SetBytes(int64(want) * 24)
	b.ReportMetric(ref/per, "x_tiledb_speed")
	b.ReportMetric(ref*1e3, "tiledb_ms")
}

func BenchmarkWholeUnordered(b *testing.B) { run(b, query.LayoutUnordered, false) }
func BenchmarkSubUnordered(b *testing.B)   { run(b, query.LayoutUnordered, true) }
func BenchmarkWholeRowMajor(b *testing.B)  { run(b, query.LayoutRowMajor, false) }
func BenchmarkSubRowMajor(b *testing.B)    { run(b, query.LayoutRowMajor, true) }
func BenchmarkWholeGlobal(b *testing.B)    { run(b, query.LayoutGlobal, false) }
