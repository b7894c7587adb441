package fragmeta

import (
	"fmt"

	"github.com/tileflight/tileflight/format/gentile"
	"github.com/tileflight/tileflight/format/wire"
)

// DecodeLegacy decodes the metadata of a fragment written before format
// v3: one generic tile holding the non-empty domain, the tile MBRs, the
// bounding coordinates (skipped), the tile offsets and sizes of every
// attribute plus the coordinates, and the file sizes. The result has a
// Footer like later versions (field indexes: attributes, then __coords);
// the R-tree is built over the MBRs as TileDB does when it loads such a
// fragment. A fragment without MBRs is dense (it has no __coords.tdb).
func DecodeLegacy(b []byte, l Layout, u gentile.Unfilterer) (*Metadata, error) {
	if err := l.check(); err != nil {
		return nil, err
	}
	_, p, _, err := gentile.Decode(b, u)
	if err != nil {
		return nil, fmt.Errorf("fragment metadata (legacy): %w", err)
	}
	m, err := decodeLegacyPayload(p, l)
	if err != nil {
		return nil, fmt.Errorf("fragment metadata (legacy): %w", err)
	}
	return m, nil
}

func decodeLegacyPayload(p []byte, l Layout) (*Metadata, error) {
	r := wire.NewReader(p)
	m := &Metadata{}
	f := &m.Footer
	f.Layout = l
	f.SchemaName = legacySchemaName
	f.Version = r.Uint32("version")
	if r.Err() == nil && f.Version >= versionFooterSections {
		return nil, corrupt("version %d in a pre-v3 metadata tile", f.Version)
	}
	if err := l.checkZipped(); err != nil {
		return nil, err
	}
	var mbrSize uint64
	for _, d := range l.Dims {
		mbrSize += 2 * uint64(d.Type.Size())
	}
	domSize := r.Uint64("non-empty domain size")
	if domSize != 0 {
		if r.Err() == nil && domSize != mbrSize {
			return nil, corrupt("non-empty domain of %d bytes, dimensions need %d", domSize, mbrSize)
		}
		f.NonEmptyDomain = readMBR(r, &l, f.Version, "non-empty domain")
	}
	n := r.Count(8, int(mbrSize), "MBR number")
	leaves := make([]MBR, 0, n)
	for i := 0; i < n && r.Err() == nil; i++ {
		leaves = append(leaves, readMBR(r, &l, f.Version, "MBR"))
	}
	bc := r.Uint64("bounding coords number")
	bcSize := 2 * uint64(len(l.Dims)) * uint64(l.Dims[0].Type.Size())
	if r.Err() == nil && (bc > uint64(r.Len()) || bc*bcSize > uint64(r.Len())) {
		return nil, corrupt("%d bounding coordinates cannot fit in %d bytes", bc, r.Len())
	}
	r.Skip(int(bc*bcSize), "bounding coords")
	a := len(l.Attrs)
	lists := func(k int, what string) [][]uint64 {
		out := make([][]uint64, k)
		for i := range out {
			c := r.Count(8, 8, what+" count")
			if r.Err() != nil {
				return nil
			}
			v := make([]uint64, c)
			for j := range v {
				v[j] = r.Uint64(what)
			}
			out[i] = v
		}
		return out
	}
	m.TileOffsets = lists(a+1, "tile offsets")
	m.TileVarOffsets = lists(a, "tile var offsets")
	m.TileVarSizes = lists(a, "tile var sizes")
	f.LastTileCellNum = r.Uint64("last tile cell num")
	u64s := func(k int, what string) []uint64 {
		if !r.CheckCount(uint64(k), 8, what) {
			return nil
		}
		v := make([]uint64, k)
		for i := range v {
			v[i] = r.Uint64(what)
		}
		return v
	}
	f.FileSizes = u64s(a+1, "file sizes")
	f.FileVarSizes = u64s(a, "file var sizes")
	if r.Err() != nil {
		return nil, r.Err()
	}
	f.SparseTileNum = uint64(len(leaves))
	f.Dense = len(leaves) == 0
	rt, err := BuildRTree(leaves, DefaultFanout, &l)
	if err != nil {
		return nil, err
	}
	m.RTree = *rt
	return m, nil
}

// zippedDimension reports whether field is a dimension's index (Layout.
// DimIndex) in a fragment before v5, which has no field of its own for a
// dimension (its coordinates are one __coords field) and no statistics:
// asked for a dimension's tile minimum, maximum, sum or null count, such a
// fragment has none rather than a missing field.
func (fr *Fragment) zippedDimension(field int) bool {
	return fr.footer.Version < 5 && field > fr.footer.Layout.CoordsIndex() && field <= fr.footer.Layout.CoordsIndex()+len(fr.footer.Layout.Dims)
}
