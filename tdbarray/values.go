package tdbarray

import (
	"github.com/tileflight/tileflight/format/fragmeta"
	"github.com/tileflight/tileflight/format/schema"
)

// CellNum is the number of cells of a fragment as TileDB's fragment info
// reports it: for sparse fragments the cells stored; for dense ones the
// cells of the space tiles the non-empty domain touches.
func (f *Fragment) CellNum() (uint64, error) {
	footer := f.Meta.Footer()
	if !footer.Dense {
		if footer.SparseTileNum == 0 {
			return 0, nil
		}
		return (footer.SparseTileNum-1)*f.Schema.Capacity + footer.LastTileCellNum, nil
	}
	tiles, err := f.Meta.TileNum()
	if err != nil {
		return 0, err
	}
	return tiles * cellsPerTile(f.Schema), nil
}

// NonEmptyDomain returns the fragment's non-empty domain, one range per
// dimension (nil if the fragment recorded none).
func (f *Fragment) NonEmptyDomain() fragmeta.MBR {
	return f.Meta.Footer().NonEmptyDomain
}

// FormatRange renders a dimension range for people: "[lo, hi]".
func FormatRange(d *schema.Dimension, r fragmeta.Range) string {
	if d.IsVar() {
		return "[" + quote(string(r.Start)) + ", " + quote(string(r.End)) + "]"
	}
	return "[" + schema.FormatValue(d.Type, r.Start) + ", " + schema.FormatValue(d.Type, r.End) + "]"
}

func quote(s string) string {
	b := make([]byte, 0, len(s)+2)
	b = append(b, '"')
	for _, c := range []byte(s) {
		if c < 0x20 || c == '"' || c == '\\' || c >= 0x7f {
			const hex = "0123456789abcdef"
			b = append(b, '\\', 'x', hex[c>>4], hex[c&15])
			continue
		}
		b = append(b, c)
	}
	return string(append(b, '"'))
}
