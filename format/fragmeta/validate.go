package fragmeta

import (
	"fmt"
	"math"

	"github.com/tileflight/tileflight/format/datatype"
	"github.com/tileflight/tileflight/format/wire"
)

// The fields a footer and its R-tree hold decide which fragments and tiles
// a query reads: a fragment whose non-empty domain misses a subarray is
// skipped without being read. __fragment_metadata.tdb carries no checksum,
// so one damaged byte there would make reads silently drop rows. The
// checks below catch the damage that decoding alone cannot see; their
// errors wrap wire.ErrCorrupt (DataLoss for the outside).

// Validate checks the footer's pruning fields against the array's domain
// (one Range per dimension, its bounds; a Range with nil bounds, as for a
// var-sized dimension, is not bounded): a non-empty domain with one range
// per dimension, each of the dimension's size, ordered (start <= end, no
// NaN) and inside the domain; and a sparse fragment's last tile holding
// between 1 and capacity cells.
func (f *Footer) Validate(domain MBR) error {
	dims := f.Layout.Dims
	if ned := f.NonEmptyDomain; ned != nil {
		if len(ned) != len(dims) {
			return corruptf("non-empty domain has %d ranges for %d dimensions", len(ned), len(dims))
		}
		for d, r := range ned {
			if err := checkRange(dims[d], r, "non-empty domain"); err != nil {
				return err
			}
			if d < len(domain) && domain[d].Start != nil && domain[d].End != nil {
				if Compare(dims[d], r.Start, domain[d].Start) < 0 || Compare(dims[d], r.End, domain[d].End) > 0 {
					return corruptf("non-empty domain of dimension %q, [%s, %s], is outside the array's domain [%s, %s]",
						dims[d].Name, show(dims[d], r.Start), show(dims[d], r.End), show(dims[d], domain[d].Start), show(dims[d], domain[d].End))
				}
			}
		}
	} else if !f.Dense && f.Version >= versionFooterSections && f.SparseTileNum > 0 {
		return corruptf("sparse fragment of %d tiles records no non-empty domain", f.SparseTileNum)
	}
	if !f.Dense && f.Version >= versionFooterSections && f.SparseTileNum > 0 {
		if c := f.Layout.CellsPerTile; f.LastTileCellNum == 0 || c > 0 && f.LastTileCellNum > c {
			return corruptf("last tile holds %d cells (capacity %d)", f.LastTileCellNum, c)
		}
	}
	return nil
}

// ValidateRTree checks a sparse fragment's tile MBRs against its footer:
// one leaf per tile, each ordered and inside the non-empty domain.
func (f *Footer) ValidateRTree(t *RTree) error {
	if f.Dense || f.Version < versionFooterSections {
		return nil
	}
	leaves := t.Leaves()
	if uint64(len(leaves)) != f.SparseTileNum {
		return corruptf("R-tree has %d tile MBRs, footer says %d sparse tiles", len(leaves), f.SparseTileNum)
	}
	dims := f.Layout.Dims
	ned := f.NonEmptyDomain
	for i, mbr := range leaves {
		if len(mbr) != len(dims) {
			return corruptf("MBR of tile %d has %d ranges for %d dimensions", i, len(mbr), len(dims))
		}
		for d, r := range mbr {
			if err := checkRange(dims[d], r, fmt.Sprintf("MBR of tile %d", i)); err != nil {
				return err
			}
			if d < len(ned) && (Compare(dims[d], r.Start, ned[d].Start) < 0 || Compare(dims[d], r.End, ned[d].End) > 0) {
				return corruptf("MBR of tile %d on dimension %q, [%s, %s], is outside the fragment's non-empty domain [%s, %s]",
					i, dims[d].Name, show(dims[d], r.Start), show(dims[d], r.End), show(dims[d], ned[d].Start), show(dims[d], ned[d].End))
			}
		}
	}
	return nil
}

// checkRange checks one range of dimension dim: values of its size (fixed
// dimensions), no NaN, start <= end.
func checkRange(dim Field, r Range, what string) error {
	if !dim.Var() {
		if n := dim.Type.Size(); len(r.Start) != n || len(r.End) != n {
			return corruptf("%s of dimension %q: bounds of %d and %d bytes, want %d", what, dim.Name, len(r.Start), len(r.End), n)
		}
		if isNaN(dim, r.Start) || isNaN(dim, r.End) {
			return corruptf("%s of dimension %q is NaN", what, dim.Name)
		}
	}
	if Compare(dim, r.Start, r.End) > 0 {
		return corruptf("%s of dimension %q is inverted: start %s > end %s", what, dim.Name, show(dim, r.Start), show(dim, r.End))
	}
	return nil
}

func isNaN(dim Field, b []byte) bool {
	switch dim.Type {
	case datatype.Float32:
		return math.IsNaN(float64(math.Float32frombits(leU32(b))))
	case datatype.Float64:
		return math.IsNaN(math.Float64frombits(leU64(b)))
	}
	return false
}

func leU32(b []byte) uint32 {
	return uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16 | uint32(b[3])<<24
}

func leU64(b []byte) uint64 { return uint64(leU32(b)) | uint64(leU32(b[4:]))<<32 }

// show renders a coordinate for an error message: the number for integer
// and float dimensions, quoted bytes otherwise.
func show(dim Field, b []byte) string {
	if dim.Var() || len(b) != dim.Type.Size() {
		return fmt.Sprintf("%q", b)
	}
	switch dim.Type {
	case datatype.Float32:
		return fmt.Sprint(math.Float32frombits(leU32(b)))
	case datatype.Float64:
		return fmt.Sprint(math.Float64frombits(leU64(b)))
	case datatype.Int8:
		return fmt.Sprint(int8(b[0]))
	case datatype.Uint8, datatype.Bool:
		return fmt.Sprint(b[0])
	case datatype.Int16:
		return fmt.Sprint(int16(uint16(b[0]) | uint16(b[1])<<8))
	case datatype.Uint16:
		return fmt.Sprint(uint16(b[0]) | uint16(b[1])<<8)
	case datatype.Int32:
		return fmt.Sprint(int32(leU32(b)))
	case datatype.Uint32:
		return fmt.Sprint(leU32(b))
	case datatype.Uint64:
		return fmt.Sprint(leU64(b))
	}
	if len(b) == 8 {
		return fmt.Sprint(int64(leU64(b)))
	}
	return fmt.Sprintf("%q", b)
}

func corruptf(format string, args ...any) error {
	return fmt.Errorf("fragment metadata: %w: %s", wire.ErrCorrupt, fmt.Sprintf(format, args...))
}
