// Package radix is the LSD radix sort both the writer (cells into global
// order) and the sparse reader (a slab's cells into row- or col-major
// order) use: keys sorted stably with a permutation carried along, 11
// bits per pass, passes whose digit is the same for every key skipped.
package radix

// digit is the bits sorted per pass: 2048 counters stay in L1.
const digit = 11

// Sorter sorts with reusable scratch memory. The zero value is ready; it
// is not safe for concurrent use.
type Sorter struct {
	keys []uint64
	perm []uint32
}

// Sort sorts keys (only their low nbits count) ascending and applies the
// same moves to perm; equal keys keep their order.
func (s *Sorter) Sort(keys []uint64, perm []uint32, nbits int) {
	const size = 1 << digit
	n := len(keys)
	if n < 2 || nbits <= 0 {
		return
	}
	nbits = min(nbits, 64)
	passes := (nbits + digit - 1) / digit
	counts := make([][size]int, passes)
	for _, k := range keys {
		for p := 0; p < passes; p++ {
			counts[p][(k>>(uint(p)*digit))&(size-1)]++
		}
	}
	if cap(s.keys) < n {
		s.keys = make([]uint64, n)
		s.perm = make([]uint32, n)
	}
	src, dst := keys, s.keys[:n]
	psrc, pdst := perm, s.perm[:n]
	for p := 0; p < passes; p++ {
		c := &counts[p]
		skip := false
		sum := 0
		for d := range c {
			if c[d] == n {
				skip = true
				break
			}
			cnt := c[d]
			c[d] = sum
			sum += cnt
		}
		if skip {
			continue
		}
		sh := uint(p) * digit
		for i, k := range src {
			d := (k >> sh) & (size - 1)
			j := c[d]
			c[d]++
			dst[j] = k
			pdst[j] = psrc[i]
		}
		src, dst = dst, src
		psrc, pdst = pdst, psrc
	}
	if &src[0] != &keys[0] {
		copy(keys, src)
		copy(perm, psrc)
	}
}

// Sort sorts keys and perm as Sorter.Sort does, with scratch memory of its
// own.
func Sort(keys []uint64, perm []uint32, nbits int) {
	var s Sorter
	s.Sort(keys, perm, nbits)
}
