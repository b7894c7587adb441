package fragmeta

import (
	"fmt"

	"github.com/tileflight/tileflight/format/wire"
)

// NonEmptyDomain returns dimension d's non-empty range (ok false when the
// fragment recorded none).
func (fr *Fragment) NonEmptyDomain(d int) (Range, bool) {
	ned := fr.footer.NonEmptyDomain
	if d < 0 || d >= len(ned) {
		return Range{}, false
	}
	return ned[d], true
}

// tileCountField is a field whose tile offsets list has one entry per tile.
func (fr *Fragment) tileCountField() int {
	l := &fr.footer.Layout
	if len(l.Attrs) > 0 {
		return 0
	}
	if fr.footer.Version < versionSplitCoords {
		return l.CoordsIndex()
	}
	return l.DimIndex(0)
}

// TileNum is the number of tiles of the fragment. It is taken from a tile
// offsets section (whose size bounds it) and, for sparse fragments,
// checked against the footer's sparse tile count.
func (fr *Fragment) TileNum() (uint64, error) {
	offs, err := fr.TileOffsets(fr.tileCountField())
	if err != nil {
		return 0, err
	}
	n := uint64(len(offs))
	if !fr.footer.Dense && fr.footer.Version >= versionFooterSections && n != fr.footer.SparseTileNum {
		return 0, fmt.Errorf("fragment metadata: %w: %d tile offsets, footer says %d sparse tiles", wire.ErrCorrupt, n, fr.footer.SparseTileNum)
	}
	return n, nil
}

// TileCellNum is the number of cells in tile t: Layout.CellsPerTile, or
// the footer's last tile cell count for a sparse fragment's last tile.
func (fr *Fragment) TileCellNum(t uint64) (uint64, error) {
	n, err := fr.TileNum()
	if err != nil {
		return 0, err
	}
	if t >= n {
		return 0, fmt.Errorf("fragment metadata: tile %d of %d", t, n)
	}
	if fr.footer.Layout.CellsPerTile == 0 {
		return 0, fmt.Errorf("fragment metadata: layout does not give the cells per tile")
	}
	if !fr.footer.Dense && t == n-1 {
		return fr.footer.LastTileCellNum, nil
	}
	return fr.footer.Layout.CellsPerTile, nil
}

func at(list []uint64, t uint64, what string, field int) (uint64, error) {
	if t >= uint64(len(list)) {
		return 0, fmt.Errorf("fragment metadata %s: field %d: tile %d of %d", what, field, t, len(list))
	}
	return list[t], nil
}

// persisted returns the on-disk size of tile t given the tile offsets of a
// file and the file's size.
func persisted(list []uint64, t, fileSize uint64, what string, field int) (uint64, error) {
	start, err := at(list, t, what, field)
	if err != nil {
		return 0, err
	}
	end := fileSize
	if t+1 < uint64(len(list)) {
		end = list[t+1]
	}
	if end < start {
		return 0, fmt.Errorf("fragment metadata %s: field %d: tile %d: %w: ends at %d before its start %d", what, field, t, wire.ErrCorrupt, end, start)
	}
	return end - start, nil
}

func sizeAt(sizes []uint64, field int) uint64 {
	if field < len(sizes) {
		return sizes[field]
	}
	return 0
}

// TileOffset is the offset of field's tile t in its data (or offsets) file.
func (fr *Fragment) TileOffset(field int, t uint64) (uint64, error) {
	l, err := fr.TileOffsets(field)
	if err != nil {
		return 0, err
	}
	return at(l, t, "tile offsets", field)
}

// PersistedTileSize is the on-disk (filtered) size of field's tile t.
func (fr *Fragment) PersistedTileSize(field int, t uint64) (uint64, error) {
	l, err := fr.TileOffsets(field)
	if err != nil {
		return 0, err
	}
	return persisted(l, t, sizeAt(fr.footer.FileSizes, field), "tile offsets", field)
}

// TileVarOffset is the offset of field's var tile t in its _var file.
func (fr *Fragment) TileVarOffset(field int, t uint64) (uint64, error) {
	l, err := fr.TileVarOffsets(field)
	if err != nil {
		return 0, err
	}
	return at(l, t, "tile var offsets", field)
}

// PersistedTileVarSize is the on-disk size of field's var tile t.
func (fr *Fragment) PersistedTileVarSize(field int, t uint64) (uint64, error) {
	l, err := fr.TileVarOffsets(field)
	if err != nil {
		return 0, err
	}
	return persisted(l, t, sizeAt(fr.footer.FileVarSizes, field), "tile var offsets", field)
}

// TileVarSize is the unfiltered size of field's var tile t.
func (fr *Fragment) TileVarSize(field int, t uint64) (uint64, error) {
	l, err := fr.TileVarSizes(field)
	if err != nil {
		return 0, err
	}
	return at(l, t, "tile var sizes", field)
}

// TileValidityOffset is the offset of field's validity tile t.
func (fr *Fragment) TileValidityOffset(field int, t uint64) (uint64, error) {
	l, err := fr.TileValidityOffsets(field)
	if err != nil {
		return 0, err
	}
	return at(l, t, "tile validity offsets", field)
}

// PersistedTileValiditySize is the on-disk size of field's validity tile t.
func (fr *Fragment) PersistedTileValiditySize(field int, t uint64) (uint64, error) {
	l, err := fr.TileValidityOffsets(field)
	if err != nil {
		return 0, err
	}
	return persisted(l, t, sizeAt(fr.footer.FileValiditySizes, field), "tile validity offsets", field)
}

func (fr *Fragment) bound(field int, t uint64, mm MinMax) ([]byte, bool, error) {
	fd, ok := fr.footer.Field(field)
	if !ok {
		return nil, false, fmt.Errorf("fragment metadata: no field %d", field)
	}
	v, ok, err := mm.Value(t, fd.CellSize())
	if err != nil {
		return nil, false, fmt.Errorf("fragment metadata: field %q: %w", fd.Name, err)
	}
	return v, ok, nil
}

// TileMin is field's minimum in tile t: one cell for fixed-size fields,
// the value bytes for var-sized ones. ok is false when TileDB keeps no
// minimum for the field (dimensions, non-ASCII strings, ...).
func (fr *Fragment) TileMin(field int, t uint64) (v []byte, ok bool, err error) {
	if fr.zippedDimension(field) {
		return nil, false, nil
	}
	mm, err := fr.TileMins(field)
	if err != nil {
		return nil, false, err
	}
	return fr.bound(field, t, mm)
}

// TileMax is field's maximum in tile t (see TileMin).
func (fr *Fragment) TileMax(field int, t uint64) (v []byte, ok bool, err error) {
	if fr.zippedDimension(field) {
		return nil, false, nil
	}
	mm, err := fr.TileMaxes(field)
	if err != nil {
		return nil, false, err
	}
	return fr.bound(field, t, mm)
}

// TileSum is field's sum over tile t as raw 8 bytes (int64 for signed
// integers, uint64 for unsigned, float64 for floats); ok is false when
// there is none.
func (fr *Fragment) TileSum(field int, t uint64) (sum uint64, ok bool, err error) {
	if fr.zippedDimension(field) {
		return 0, false, nil
	}
	l, err := fr.TileSums(field)
	if err != nil || t >= uint64(len(l)) {
		return 0, false, err
	}
	return l[t], true, nil
}

// TileNullCount is the number of nulls of field in tile t; ok is false
// when the field keeps no null counts.
func (fr *Fragment) TileNullCount(field int, t uint64) (n uint64, ok bool, err error) {
	if fr.zippedDimension(field) {
		return 0, false, nil
	}
	l, err := fr.TileNullCounts(field)
	if err != nil || t >= uint64(len(l)) {
		return 0, false, err
	}
	return l[t], true, nil
}

// MBR is the bounding rectangle of sparse tile t.
func (fr *Fragment) MBR(t uint64) (MBR, error) {
	rt, err := fr.RTree()
	if err != nil {
		return nil, err
	}
	leaves := rt.Leaves()
	if t >= uint64(len(leaves)) {
		return nil, fmt.Errorf("fragment metadata R-tree: tile %d of %d", t, len(leaves))
	}
	return leaves[t], nil
}
