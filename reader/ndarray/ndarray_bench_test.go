package ndarray_test

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"sort"
	"testing"
	"time"

	"github.com/tileflight/tileflight/query"
	"github.com/tileflight/tileflight/reader"
	"github.com/tileflight/tileflight/reader/ndarray"
	"github.com/tileflight/tileflight/storage"
)

// BenchmarkB2NDRead reads $TILEFLIGHT_B2ND_BENCH (a data directory holding
// bench/field.b2nd, as benchmarks/b2nd_read.py --data leaves it) whole and
// as a 1 % box.
func BenchmarkB2NDRead(b *testing.B) {
	dir := os.Getenv("TILEFLIGHT_B2ND_BENCH")
	if dir == "" {
		b.Skip("TILEFLIGHT_B2ND_BENCH is not set")
	}
	st, err := storage.NewLocal(dir)
	if err != nil {
		b.Fatal(err)
	}
	for _, tc := range []struct{ name, q string }{
		{"whole", `{"array": "bench/field.b2nd", "columns": ["value"]}`},
		{"box", `{"array": "bench/field.b2nd", "columns": ["value"], "subarray": {"dim0": [[1843, 2251]], "dim1": [[3686, 4504]]}}`},
	} {
		b.Run(tc.name, func(b *testing.B) {
			q, err := query.Parse([]byte(tc.q))
			if err != nil {
				b.Fatal(err)
			}
			_ = json.Valid
			// first-ms: from Open to the first record, the latency a
			// client waits before anything arrives.
			var first time.Duration
			for i := 0; i < b.N; i++ {
				t0 := time.Now()
				r, err := reader.Open(context.Background(), st, q, reader.Options{})
				if err != nil {
					b.Fatal(err)
				}
				for k := 0; ; k++ {
					rec, err := r.Next(context.Background())
					if k == 0 {
						first += time.Since(t0)
					}
					if err == io.EOF {
						break
					}
					if err != nil {
						b.Fatal(err)
					}
					rec.Release()
				}
				r.Close()
			}
			b.ReportMetric(float64(first.Microseconds())/1000/float64(b.N), "first-ms")
		})
	}
}

// TestB2NDGroupSizeAB compares, round by round, reads with groups of one
// block-row against the default group size (set TILEFLIGHT_B2ND_BENCH).
func TestB2NDGroupSizeAB(t *testing.T) {
	dir := os.Getenv("TILEFLIGHT_B2ND_BENCH")
	if dir == "" {
		t.Skip("TILEFLIGHT_B2ND_BENCH is not set")
	}
	st, _ := storage.NewLocal(dir)
	q, _ := query.Parse([]byte(`{"array": "bench/field.b2nd", "columns": ["value"], "subarray": {"dim0": [[1843, 2251]], "dim1": [[3686, 4504]]}}`))
	run := func() time.Duration {
		t0 := time.Now()
		r, err := reader.Open(context.Background(), st, q, reader.Options{})
		if err != nil {
			t.Fatal(err)
		}
		for {
			rec, err := r.Next(context.Background())
			if err != nil {
				break
			}
			rec.Release()
		}
		r.Close()
		return time.Since(t0)
	}
	def := *ndarray.GroupBytes
	defer func() { *ndarray.GroupBytes = def }()
	var ratios []float64
	for i := 0; i < 9; i++ {
		*ndarray.GroupBytes = 1
		one := run()
		*ndarray.GroupBytes = def
		grouped := run()
		ratios = append(ratios, float64(one)/float64(grouped))
	}
	sort.Float64s(ratios)
	t.Logf("one block-row per group / default groups: median %.2fx (%v)", ratios[len(ratios)/2], ratios)
}
