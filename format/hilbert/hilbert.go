// Package hilbert is TileDB's Hilbert cell order: how a coordinate maps
// to a bucket on each axis of the curve (numbers by their relative place
// in the domain, strings by their first eight bytes) and the position of
// a point of buckets along the curve (Skilling's transposed form, with
// TileDB's orientation and its fold of the last coordinate). The writer
// orders cells with it and the sparse reader re-derives it to merge
// fragments; both must agree with TileDB bit for bit.
package hilbert

import "math"

// Bits is the number of bits per dimension of a Hilbert value: the 63
// usable bits of a uint64 split evenly between the dimensions.
func Bits(dims int) int { return 63 / dims }

// Value returns the position of the point x (each coordinate in
// [0, 2^bits)) along the Hilbert curve. x is modified.
func Value(x []uint64, bits int) uint64 {
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

// NumberBucket maps a numeric coordinate x of a domain starting at lo and
// spanning rng (hi - lo) onto [0, maxBucket] as TileDB does: its relative
// position in double precision, truncated (NaN and below the domain: 0).
func NumberBucket(x, lo, rng float64, maxBucket uint64) uint64 {
	f := (x - lo) / rng * float64(maxBucket)
	if f != f || f <= 0 {
		return 0
	}
	if f >= 1<<64 {
		return math.MaxUint64
	}
	return uint64(f)
}

// StringBucket maps a string coordinate to a bucket as TileDB does: its
// first eight bytes, each widened like a C char (bytes >= 0x80 spill ones
// into the higher bits), shifted down to bits.
func StringBucket(v []byte, bits int) uint64 {
	var r uint64
	for i := 0; i < 8; i++ {
		r <<= 8
		if i < len(v) {
			r |= uint64(int64(int8(v[i])))
		}
	}
	return r >> (64 - bits)
}
