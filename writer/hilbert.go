package writer

import (
	"github.com/tileflight/tileflight/format/hilbert"
	"github.com/tileflight/tileflight/format/schema"
)

// hilbertCoord maps a coordinate to its bucket on the Hilbert curve the
// way TileDB does (package hilbert).
func hilbertCoord(d *schema.Dimension, v []byte, bits int) uint64 {
	if d.IsVar() {
		return hilbert.StringBucket(v, bits)
	}
	t := d.Type
	lo := schema.AsFloat64(t, d.Lo())
	hi := schema.AsFloat64(t, d.Hi())
	return hilbert.NumberBucket(schema.AsFloat64(t, v), lo, hi-lo, uint64(1)<<bits-1)
}

func hilbertValues(s *schema.ArraySchema, dims []*col, n int) []uint64 {
	nd := len(s.Dimensions)
	bits := hilbert.Bits(nd)
	out := make([]uint64, n)
	x := make([]uint64, nd)
	for i := 0; i < n; i++ {
		for d := range s.Dimensions {
			dd := &s.Dimensions[d]
			x[d] = hilbertCoord(dd, dimValue(dd, dims[d], i), bits)
		}
		out[i] = hilbert.Value(x, bits)
	}
	return out
}
