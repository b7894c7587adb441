package b2nd

import "testing"

// FuzzMeta parses arbitrary b2nd metalayers and dtype strings.
func FuzzMeta(f *testing.F) {
	m := &Meta{Shape: []int64{10, 20}, ChunkShape: []int64{5, 5}, BlockShape: []int64{2, 5}, Dtype: "<f8"}
	f.Add(m.Encode(), "<f8")
	f.Add([]byte{0x97}, "[('a', '<i4'), ('b', '>M8[ms]')]")
	f.Add([]byte{0x97}, "[('a', '<i4'), ('p', [('x', '<f8'), ('y', '>f4')]), ('v', '<f4', (2, 3))]")
	f.Add([]byte{0x97}, "[('q', [('r', [('s', '|b1')])]), ('', '|V7'), ('m', '>i2', (4,))]")
	f.Fuzz(func(t *testing.T, b []byte, dt string) {
		if m, err := ParseMeta(b); err == nil {
			if d, err := ParseDtype(m.Dtype); err == nil {
				_, _ = NewGeometry(m.Shape, m.ChunkShape, m.BlockShape, d.ItemSize)
			}
		}
		_, _ = ParseDtype(dt)
	})
}
