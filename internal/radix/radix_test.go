package radix

import (
	"cmp"
	"math/rand/v2"
	"slices"
	"testing"
)

// Sort is a stable sort of keys by their low nbits, the permutation moved
// alike, whatever the keys' spread (constant digits are skipped).
func TestSortIsAStableSort(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	var s Sorter // reused across cases, as callers do
	for _, c := range []struct {
		name  string
		n     int
		nbits int
		key   func() uint64
	}{
		{"empty", 0, 64, rng.Uint64},
		{"one", 1, 64, rng.Uint64},
		{"ties", 5000, 6, func() uint64 { return rng.Uint64N(40) }},
		{"full range", 5000, 64, rng.Uint64},
		{"one byte set high", 3000, 40, func() uint64 { return rng.Uint64N(4) << 33 }},
		{"no bits", 100, 0, func() uint64 { return 0 }},
	} {
		t.Run(c.name, func(t *testing.T) {
			type kv struct {
				k uint64
				p uint32
			}
			keys := make([]uint64, c.n)
			perm := make([]uint32, c.n)
			want := make([]kv, c.n)
			for i := range keys {
				keys[i], perm[i] = c.key(), uint32(i)
				want[i] = kv{keys[i], perm[i]}
			}
			slices.SortStableFunc(want, func(a, b kv) int { return cmp.Compare(a.k, b.k) })
			s.Sort(keys, perm, c.nbits)
			for i := range want {
				if keys[i] != want[i].k || perm[i] != want[i].p {
					t.Fatalf("position %d: (%d, %d), want (%d, %d)", i, keys[i], perm[i], want[i].k, want[i].p)
				}
			}
		})
	}
}

func BenchmarkSort(b *testing.B) {
	rng := rand.New(rand.NewPCG(5, 6))
	const n = 1 << 20
	src := make([]uint64, n)
	for i := range src {
		src[i] = rng.Uint64N(1 << 40)
	}
	keys := make([]uint64, n)
	perm := make([]uint32, n)
	var s Sorter
	b.SetBytes(n * 12)
	b.ReportAllocs()
	for b.Loop() {
		copy(keys, src)
		for i := range perm {
			perm[i] = uint32(i)
		}
		s.Sort(keys, perm, 40)
	}
}
