package sparse

import "testing"

// In one dimension TileDB maps a domain's upper bound to bucket 2^63 (the
// 2^63-1 bucket count rounds up in double precision). Its Gray encoding
// folds that bit into the value, so the upper bound sorts last; a fold
// limited to the 63 kept bits would give it value 0 and sort it first.
func TestHilbertOneDimensionUpperBoundSortsLast(t *testing.T) {
	cases := []struct {
		x    uint64
		want uint64
	}{
		{0, 0},
		{1, 1},
		{1 << 63, 1<<63 - 1},
	}
	for _, c := range cases {
		if got := hilbertValue([]uint64{c.x}, hilbertBits(1)); got != c.want {
			t.Errorf("hilbertValue(%#x) = %#x, want %#x", c.x, got, c.want)
		}
	}
}
