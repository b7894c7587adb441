package writer

import (
	"bytes"
	"encoding/binary"
	"math"
	"math/rand"
	"testing"
)

// TestPlainSumFastPath: the unchecked sum taken when the bounds prove no
// saturation gives exactly the checked sum (forced here by an all-valid
// validity buffer), also near the limits, with NaN, infinities and in
// several slabs.
func TestPlainSumFastPath(t *testing.T) {
	rng := rand.New(rand.NewSource(3))
	f64 := func(vs ...float64) []byte {
		var b []byte
		for _, v := range vs {
			b = binary.LittleEndian.AppendUint64(b, math.Float64bits(v))
		}
		return b
	}
	randF := func(n int, scale float64) []byte {
		vs := make([]float64, n)
		for i := range vs {
			vs[i] = (rng.Float64() - 0.3) * scale
		}
		return f64(vs...)
	}
	randI := func(n int, lo, hi int64) []byte {
		vs := make([]int64, n)
		for i := range vs {
			vs[i] = lo + rng.Int63n(hi-lo)
		}
		return i64s(vs...)
	}
	cases := []struct {
		name  string
		kind  statKind
		data  []byte
		slabs [][2]int
		f     func(*statTile, statKind, bool, bool) tileStats
	}{
		{"float small", statFloat, randF(1000, 1e3), nil, fixedStats[float64]},
		{"float huge", statFloat, randF(1000, math.MaxFloat64/4), nil, fixedStats[float64]},
		{"float saturates", statFloat, f64(math.MaxFloat64/2, math.MaxFloat64/2, math.MaxFloat64/2, 1), nil, fixedStats[float64]},
		{"float nan", statFloat, f64(1, math.NaN(), 2), nil, fixedStats[float64]},
		{"float inf", statFloat, f64(1, math.Inf(1), 2, math.Inf(-1)), nil, fixedStats[float64]},
		{"float slabs", statFloat, randF(1000, 1e300), [][2]int{{0, 10}, {500, 800}, {900, 1000}}, fixedStats[float64]},
		{"int small", statInt, randI(1000, -1e6, 1e6), [][2]int{{0, 400}, {600, 1000}}, fixedStats[int64]},
		{"int near limit", statInt, randI(1000, math.MaxInt64/4, math.MaxInt64/2), nil, fixedStats[int64]},
		{"int negative limit", statInt, randI(1000, math.MinInt64/2, math.MinInt64/4), nil, fixedStats[int64]},
		{"uint near limit", statUint, randI(1000, 0, math.MaxInt64), nil, fixedStats[uint64]},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			n := len(c.data) / 8
			fast := c.f(&statTile{n: n, data: c.data, slabs: c.slabs}, c.kind, true, true)
			slow := c.f(&statTile{n: n, data: c.data, slabs: c.slabs, valid: bytes.Repeat([]byte{1}, n)}, c.kind, true, true)
			if fast.sum != slow.sum || !bytes.Equal(fast.min, slow.min) || !bytes.Equal(fast.max, slow.max) {
				t.Fatalf("fast %+v, checked %+v", fast, slow)
			}
		})
	}
}
