package tileio

import (
	"fmt"

	"github.com/tileflight/tileflight/format/names"
	"github.com/tileflight/tileflight/format/wire"
	"github.com/tileflight/tileflight/tdbarray"
)

// zippedCoords describes the coordinates of a fragment before format v5
// (TileDB 1.x): every dimension's values are in one tile of __coords.tdb,
// all dimensions of one fixed-size type. Once unfiltered the tile holds,
// for n cells and d dimensions of s bytes each, either
//   - split: the n values of the first dimension, then the n of the next
//     (what TileDB wrote from format v2 on, and in v1 whenever the
//     coordinates' pipeline had a compressor), or
//   - zipped: cell by cell, the d values of each cell (v1 without a
//     compressor).
type zippedCoords struct {
	dim, dims, size int
	split           bool
}

// legacyCoordsField is the field of dimension i of a pre-v5 fragment: the
// __coords.tdb tile, of the domain's type with one value per dimension in
// each cell.
func legacyCoordsField(frag *tdbarray.Fragment, i int, name string) (*fieldInfo, error) {
	s := frag.Schema
	d := &s.Dimensions[i]
	nd := len(s.Dimensions)
	if d.Type.Size() == 0 || d.CellValNum != 1 {
		return nil, fmt.Errorf("%w: dimension %q of a format v%d fragment is not fixed-size", wire.ErrCorrupt, name, frag.Meta.Footer().Version)
	}
	split := frag.Meta.Footer().Version > 1
	for _, f := range s.CoordsFilters.Filters {
		if f.Type.IsCompression() {
			split = true
		}
	}
	return &fieldInfo{name: name, typ: d.Type, cellValNum: uint32(nd), dim: true, index: i,
		metaIndex: frag.Layout.CoordsIndex(), filters: s.CoordsFilters, file: names.CoordsFile,
		zipped: &zippedCoords{dim: i, dims: nd, size: d.Type.Size(), split: split}}, nil
}

// column copies this dimension's values out of an unfiltered coordinates
// tile of cells cells.
func (z *zippedCoords) column(data []byte, cells uint64) ([]byte, error) {
	if z.dim < 0 || z.dim >= z.dims || z.size <= 0 {
		return nil, fmt.Errorf("coordinates: dimension %d of %d (%d bytes)", z.dim, z.dims, z.size)
	}
	s := uint64(z.size)
	if cells > uint64(len(data)) || cells*s*uint64(z.dims) != uint64(len(data)) {
		return nil, fmt.Errorf("%w: coordinates tile of %d bytes for %d cells of %d dimensions of %d bytes",
			wire.ErrCorrupt, len(data), cells, z.dims, z.size)
	}
	if z.split {
		lo := uint64(z.dim) * cells * s
		return append([]byte(nil), data[lo:lo+cells*s]...), nil
	}
	out := make([]byte, cells*s)
	stride := s * uint64(z.dims)
	for c, o := uint64(0), uint64(z.dim)*s; c < cells; c, o = c+1, o+stride {
		copy(out[c*s:], data[o:o+s])
	}
	return out, nil
}
