package writer

import (
	"github.com/tileflight/tileflight/format/datatype"
	"github.com/tileflight/tileflight/format/schema"
)

// hilbertBits is the number of bits per dimension of TileDB's Hilbert
// values: 63 bits shared by the dimensions.
func hilbertBits(dims int) int { return 63 / dims }

// hilbertCoord maps a coordinate to its bucket on the Hilbert curve the
// way TileDB does: numeric coordinates are scaled from the domain into
// [0, 2^bits-1] in double precision and truncated; strings take their
// first eight bytes, each sign-extended as a C char (so bytes >= 0x80
// spill ones into the higher bits, as in TileDB), shifted down to bits.
func hilbertCoord(d *schema.Dimension, v []byte, bits int) uint64 {
	if d.IsVar() {
		var r uint64
		for i := 0; i < 8; i++ {
			r <<= 8
			if i < len(v) {
				r |= uint64(int64(int8(v[i])))
			}
		}
		return r >> (64 - bits)
	}
	maxBucket := uint64(1)<<bits - 1
	t := d.Type
	lo := asDouble(t, d.Lo())
	hi := asDouble(t, d.Hi())
	x := (asDouble(t, v) - lo) / (hi - lo) * float64(maxBucket)
	return uint64(x)
}

// asDouble converts one value to double as C++ does for the type.
func asDouble(t datatype.Datatype, b []byte) float64 {
	return schema.AsFloat64(t, b)
}

// hilbertIndex is the Hilbert index of the point x (one value of bits
// bits per dimension), by Skilling's transpose method; x is clobbered.
func hilbertIndex(x []uint64, bits int) uint64 {
	n := len(x)
	for q := uint64(1) << (bits - 1); q > 1; q >>= 1 {
		p := q - 1
		if x[0]&q != 0 {
			x[0] ^= p
		}
		for i := 1; i < n; i++ {
			if x[i]&q != 0 {
				x[0] ^= p
			} else {
				t := (x[0] ^ x[i]) & p
				x[0] ^= t
				x[i] ^= t
			}
		}
	}
	for i := 1; i < n; i++ {
		x[i] ^= x[i-1]
	}
	t := x[n-1]
	for i := 1; i < bits; i <<= 1 {
		x[n-1] ^= x[n-1] >> i
	}
	t ^= x[n-1]
	for i := n - 2; i >= 0; i-- {
		x[i] ^= t
	}
	// Interleave: bit j of dimension i lands at position j*n + (n-1-i).
	var h uint64
	pos := uint(0)
	for j := 0; j < bits; j++ {
		for i := n - 1; i >= 0; i-- {
			if x[i]&(1<<uint(j)) != 0 {
				h |= 1 << pos
			}
			pos++
		}
	}
	return h
}

func hilbertValues(s *schema.ArraySchema, dims []*col, n int) []uint64 {
	nd := len(s.Dimensions)
	bits := hilbertBits(nd)
	out := make([]uint64, n)
	x := make([]uint64, nd)
	for i := 0; i < n; i++ {
		for d := range s.Dimensions {
			dd := &s.Dimensions[d]
			x[d] = hilbertCoord(dd, dimValue(dd, dims[d], i), bits)
		}
		out[i] = hilbertIndex(x, bits)
	}
	return out
}
