package sparse

import (
	"cmp"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestRadixSort: the radix sort of slab cells is a stable sort by
// (k0, k1), whatever range the keys span (ties keep append order, which
// is what puts older versions of a coordinate first).
func TestRadixSort(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, c := range []struct {
		name   string
		n      int
		k0, k1 func() uint64
	}{
		{"one cell", 1, func() uint64 { return 5 }, func() uint64 { return 7 }},
		{"all equal", 100, func() uint64 { return 1 << 63 }, func() uint64 { return 3 }},
		{"small ranges with ties", 5000, func() uint64 { return 1<<63 + rng.Uint64N(50) }, func() uint64 { return rng.Uint64N(20) }},
		{"full range", 5000, rng.Uint64, rng.Uint64},
		{"wide k0, constant k1", 3000, func() uint64 { return rng.Uint64N(1 << 40) }, func() uint64 { return 9 }},
	} {
		t.Run(c.name, func(t *testing.T) {
			refs := make([]sref, c.n)
			for i := range refs {
				refs[i] = sref{k0: c.k0(), k1: c.k1(), pos: uint32(i)}
			}
			want := slices.Clone(refs)
			slices.SortStableFunc(want, func(a, b sref) int {
				if x := cmp.Compare(a.k0, b.k0); x != 0 {
					return x
				}
				return cmp.Compare(a.k1, b.k1)
			})
			got, _ := radixSort(slices.Clone(refs), nil)
			if !slices.Equal(got, want) {
				t.Fatal("radix sort differs from a stable sort")
			}
		})
	}
}
