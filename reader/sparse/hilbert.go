package sparse

// hilbertBits is the number of bits per dimension of a Hilbert value: the
// 63 usable bits of a uint64 split evenly between the dimensions.
func hilbertBits(dims int) int { return 63 / dims }

// hilbertValue returns the position of the point x (each coordinate in
// [0, 2^bits)) along the Hilbert curve, using Skilling's transposed form
// (the same curve orientation as TileDB, so that cells sort alike). x is
// modified.
func hilbertValue(x []uint64, bits int) uint64 {
	n := len(x)
	if n == 0 || bits <= 0 {
		return 0
	}
	// Undo the curve's rotations and reflections, from the top bit down.
	for q := uint64(1) << (bits - 1); q > 1; q >>= 1 {
		p := q - 1
		for i := 0; i < n; i++ {
			if x[i]&q != 0 {
				x[0] ^= p
				continue
			}
			t := (x[0] ^ x[i]) & p
			x[0] ^= t
			x[i] ^= t
		}
	}
	// Gray-encode the transposed bits. Like TileDB, fold every bit of the
	// last coordinate down (not only the low bits-1): in one dimension the
	// domain's upper bound maps to 2^63, one bit above the 63 that are kept,
	// and TileDB's fold carries it into the value (it sorts last).
	for i := 1; i < n; i++ {
		x[i] ^= x[i-1]
	}
	last := x[n-1]
	folded := last
	for s := 1; s < bits; s <<= 1 {
		folded ^= folded >> uint(s)
	}
	t := last ^ folded
	for i := 0; i < n; i++ {
		x[i] ^= t
	}
	// Interleave: bit j of every coordinate, dimension 0 most significant.
	var h uint64
	for j := bits - 1; j >= 0; j-- {
		for i := 0; i < n; i++ {
			h = h<<1 | (x[i]>>uint(j))&1
		}
	}
	return h
}
