// Package readerbench benchmarks the dense read path against TileDB on
// 256 MiB float64 arrays (1 MiB tiles, no filter and zstd level 1) that
// dense_arrays.py writes with the tiledb package at benchmark start; the
// same script times TileDB reading them in the same run, reported as the
// tiledb-GB/s metric (its best of 3) next to ours (mean, and best-GB/s).
//
//	go test -bench . -benchtime 3x ./benchmarks/reader/
//
// TILEFLIGHT_PYTHON names the Python with tiledb (default: the repo's
// .venv); without it the benchmarks are skipped.
package readerbench

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/tileflight/tileflight/query"
	"github.com/tileflight/tileflight/reader"
	"github.com/tileflight/tileflight/storage"
)

const arrayBytes = 4096 * 8192 * 8

var (
	setupOnce sync.Once
	dataDir   string
	tiledbGBs map[string]float64
	setupErr  string
)

func python() string {
	if p := os.Getenv("TILEFLIGHT_PYTHON"); p != "" {
		return p
	}
	p, _ := filepath.Abs("../../.venv/bin/python")
	return p
}

func setup(b *testing.B) {
	setupOnce.Do(func() {
		py := python()
		if _, err := os.Stat(py); err != nil {
			setupErr = "no python with tiledb: " + err.Error()
			return
		}
		dir, err := os.MkdirTemp("", "tileflight-readerbench-")
		if err != nil {
			setupErr = err.Error()
			return
		}
		dataDir = dir
		if out, err := exec.Command(py, "dense_arrays.py", "write", dir).CombinedOutput(); err != nil {
			setupErr = "writing arrays: " + err.Error() + ": " + string(out)
			return
		}
		out, err := exec.Command(py, "dense_arrays.py", "time", dir, "3").Output()
		if err != nil {
			setupErr = "timing tiledb: " + err.Error()
			return
		}
		if err := json.Unmarshal(out, &tiledbGBs); err != nil {
			setupErr = "timing tiledb: " + err.Error()
		}
	})
	if setupErr != "" {
		b.Skip(setupErr)
	}
}

func BenchmarkDenseRead(b *testing.B) {
	setup(b)
	b.Cleanup(func() {})
	for _, arr := range []string{"plain", "zstd1"} {
		for _, layout := range []query.Layout{query.LayoutGlobal, query.LayoutRowMajor} {
			b.Run(arr+"/"+string(layout), func(b *testing.B) {
				st, err := storage.NewLocal(dataDir)
				if err != nil {
					b.Fatal(err)
				}
				q := &query.Query{Array: arr, Columns: []string{"v"}, Layout: layout, Limit: -1}
				b.SetBytes(arrayBytes)
				b.ReportAllocs()
				b.ResetTimer()
				best := time.Duration(0)
				for i := 0; i < b.N; i++ {
					start := time.Now()
					r, err := reader.Open(context.Background(), st, q, reader.Options{})
					if err != nil {
						b.Fatal(err)
					}
					rows := int64(0)
					for {
						rec, err := r.Next(context.Background())
						if err == io.EOF {
							break
						}
						if err != nil {
							b.Fatal(err)
						}
						rows += rec.NumRows()
						rec.Release()
					}
					r.Close()
					if rows != arrayBytes/8 {
						b.Fatalf("%d rows", rows)
					}
					if d := time.Since(start); best == 0 || d < best {
						best = d
					}
				}
				b.StopTimer()
				sec := b.Elapsed().Seconds() / float64(b.N)
				b.ReportMetric(arrayBytes/sec/1e9, "GB/s")
				// TileDB's figure is its best of N runs: ours alike.
				b.ReportMetric(arrayBytes/best.Seconds()/1e9, "best-GB/s")
				b.ReportMetric(tiledbGBs[arr+"/"+string(layout)], "tiledb-GB/s")
			})
		}
	}
}

func TestMain(m *testing.M) {
	code := m.Run()
	if dataDir != "" {
		os.RemoveAll(dataDir)
	}
	os.Exit(code)
}
