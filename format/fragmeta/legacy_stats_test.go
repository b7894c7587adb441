package fragmeta

import (
	"testing"

	"github.com/tileflight/tileflight/format/gentile"
)

// TestLegacyDimensionsHaveNoStats: asked for a dimension's tile statistics
// (by Layout.DimIndex), a pre-v5 fragment has none; an index past its
// dimensions is still an error.
func TestLegacyDimensionsHaveNoStats(t *testing.T) {
	for _, v := range []uint32{1, 2} {
		tile, err := gentile.Encode(legacyPayload(v), v, nil)
		if err != nil {
			t.Fatal(err)
		}
		mf := &memFile{b: tile}
		l := layout2i32
		fr, err := Open(mf.read, uint64(len(tile)), l, v, nil)
		if err != nil {
			t.Fatal(err)
		}
		for d := range l.Dims {
			i := l.DimIndex(d)
			if _, ok, err := fr.TileMin(i, 0); ok || err != nil {
				t.Errorf("v%d: TileMin of dimension %d: %v %v", v, d, ok, err)
			}
			if _, ok, err := fr.TileMax(i, 0); ok || err != nil {
				t.Errorf("v%d: TileMax of dimension %d: %v %v", v, d, ok, err)
			}
			if _, ok, err := fr.TileSum(i, 0); ok || err != nil {
				t.Errorf("v%d: TileSum of dimension %d: %v %v", v, d, ok, err)
			}
			if _, ok, err := fr.TileNullCount(i, 0); ok || err != nil {
				t.Errorf("v%d: TileNullCount of dimension %d: %v %v", v, d, ok, err)
			}
		}
		if _, _, err := fr.TileMin(l.DimIndex(len(l.Dims)), 0); err == nil {
			t.Errorf("v%d: a field past the dimensions answered", v)
		}
	}
}
