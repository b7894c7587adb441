package hilbert

import (
	"math"
	"testing"
)

// The 2-D curve of order 1 visits (0,0) (0,1) (1,1) (1,0).
func TestValueOrderOne(t *testing.T) {
	want := map[[2]uint64]uint64{{0, 0}: 0, {0, 1}: 1, {1, 1}: 2, {1, 0}: 3}
	for p, h := range want {
		if got := Value([]uint64{p[0], p[1]}, 1); got != h {
			t.Errorf("hilbert%v = %d, want %d", p, got, h)
		}
	}
}

// The curve on the 2-D order-2 grid, and every cell of the order-3 grid
// on its own value.
func TestValueOrderTwo(t *testing.T) {
	cases := []struct {
		x, y uint64
		want uint64
	}{{0, 0, 0}, {1, 0, 1}, {1, 1, 2}, {0, 1, 3}, {2, 0, 14}, {3, 0, 15}, {0, 2, 4}, {2, 2, 8}}
	for _, c := range cases {
		if got := Value([]uint64{c.x, c.y}, 2); got != c.want {
			t.Errorf("(%d,%d): %d, want %d", c.x, c.y, got, c.want)
		}
	}
	seen := map[uint64]bool{}
	for x := uint64(0); x < 8; x++ {
		for y := uint64(0); y < 8; y++ {
			seen[Value([]uint64{x, y}, 3)] = true
		}
	}
	if len(seen) != 64 {
		t.Errorf("order-3 curve maps 64 cells to %d values", len(seen))
	}
}

// In one dimension TileDB maps a domain's upper bound to bucket 2^63 (the
// 2^63-1 bucket count rounds up in double precision). Its Gray encoding
// folds that bit into the value, so the upper bound sorts last; a fold
// limited to the 63 kept bits would give it value 0 and sort it first.
func TestOneDimensionUpperBoundSortsLast(t *testing.T) {
	for _, c := range []struct{ x, want uint64 }{{0, 0}, {1, 1}, {1 << 63, 1<<63 - 1}} {
		if got := Value([]uint64{c.x}, Bits(1)); got != c.want {
			t.Errorf("Value(%#x) = %#x, want %#x", c.x, got, c.want)
		}
	}
	if got := NumberBucket(100, 0, 100, 1<<63-1); got != 1<<63 { // 2^63-1 rounds up as a double
		t.Errorf("upper bound's bucket %#x, want 2^63", got)
	}
}

func TestBuckets(t *testing.T) {
	for _, c := range []struct {
		x, lo, rng float64
		max, want  uint64
	}{
		{0, 0, 10, 1023, 0}, {5, 0, 10, 1023, 511}, {-3, -3, 6, 7, 0},
		{-4, -3, 6, 7, 0}, {math.NaN(), 0, 1, 7, 0},
	} {
		if got := NumberBucket(c.x, c.lo, c.rng, c.max); got != c.want {
			t.Errorf("NumberBucket(%v, %v, %v, %d) = %d, want %d", c.x, c.lo, c.rng, c.max, got, c.want)
		}
	}
	// A byte >= 0x80 sign-extends over the bytes before it, as a C char
	// ORed into a wider integer does in TileDB ("a" is lost).
	if got, want := StringBucket([]byte{'a', 0x80}, 63), uint64(0xff80000000000000)>>1; got != want {
		t.Errorf("StringBucket = %#x, want %#x", got, want)
	}
}
