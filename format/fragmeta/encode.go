package fragmeta

import (
	"encoding/binary"
	"fmt"

	"github.com/tileflight/tileflight/format/gentile"
)

// Metadata is a fragment's complete metadata: the footer plus every
// section, fully loaded. Per-field slices are indexed by field index and
// have Footer.FieldNum() entries (nil entries encode as empty sections).
type Metadata struct {
	Footer              Footer
	RTree               RTree
	TileOffsets         [][]uint64
	TileVarOffsets      [][]uint64
	TileVarSizes        [][]uint64
	TileValidityOffsets [][]uint64
	TileMins            []MinMax
	TileMaxes           []MinMax
	TileSums            [][]uint64
	TileNullCounts      [][]uint64
	FragmentStats       []FieldStats
	ProcessedConditions []string
	// GlobalOrderMins/Maxes (per dimension) are written only for sparse
	// v23 fragments and only when non-nil.
	GlobalOrderMins  []MinMax
	GlobalOrderMaxes []MinMax
}

// LoadAll reads every section of fr.
func LoadAll(fr *Fragment) (*Metadata, error) {
	if fr.legacy != nil {
		return fr.legacy, nil
	}
	f := fr.footer
	m := &Metadata{Footer: *f}
	rt, err := fr.RTree()
	if err != nil {
		return nil, err
	}
	m.RTree = *rt
	num := f.FieldNum()
	u64 := func(get func(int) ([]uint64, error), n int) ([][]uint64, error) {
		out := make([][]uint64, n)
		for i := range out {
			if out[i], err = get(i); err != nil {
				return nil, err
			}
		}
		return out, nil
	}
	mm := func(get func(int) (MinMax, error), n int) ([]MinMax, error) {
		out := make([]MinMax, n)
		for i := range out {
			if out[i], err = get(i); err != nil {
				return nil, err
			}
		}
		return out, nil
	}
	nVar := len(f.Offsets.TileVarOffsets)
	if m.TileOffsets, err = u64(fr.TileOffsets, num); err != nil {
		return nil, err
	}
	if m.TileVarOffsets, err = u64(fr.TileVarOffsets, nVar); err != nil {
		return nil, err
	}
	if m.TileVarSizes, err = u64(fr.TileVarSizes, nVar); err != nil {
		return nil, err
	}
	if f.Version >= versionValidity {
		if m.TileValidityOffsets, err = u64(fr.TileValidityOffsets, num); err != nil {
			return nil, err
		}
	}
	if f.Version >= versionTileMetadata {
		if m.TileMins, err = mm(fr.TileMins, num); err != nil {
			return nil, err
		}
		if m.TileMaxes, err = mm(fr.TileMaxes, num); err != nil {
			return nil, err
		}
		if m.TileSums, err = u64(fr.TileSums, num); err != nil {
			return nil, err
		}
		if m.TileNullCounts, err = u64(fr.TileNullCounts, num); err != nil {
			return nil, err
		}
	}
	if f.Offsets.GlobalOrderMins != nil {
		d := len(f.Layout.Dims)
		if m.GlobalOrderMins, err = mm(fr.GlobalOrderMins, d); err != nil {
			return nil, err
		}
		if m.GlobalOrderMaxes, err = mm(fr.GlobalOrderMaxes, d); err != nil {
			return nil, err
		}
	}
	if m.FragmentStats, err = fr.FragmentStats(); err != nil {
		return nil, err
	}
	if m.ProcessedConditions, err = fr.ProcessedConditions(); err != nil {
		return nil, err
	}
	return m, nil
}

// Encode lays out a complete __fragment_metadata.tdb the way TileDB writes
// it: each section as a generic tile in TileDB's order, then the footer and
// its length. Versions 3 to 23 are supported (TileDB 2.30 writes 22; 3
// to 6 are there for TileDB 1.x arrays built from the format, before
// nullable attributes). It returns the file and the footer with the
// section offsets it recorded.
// f runs the generic tile filters (nil: gentile's default gzip level 1).
func Encode(m *Metadata, f gentile.Filterer) ([]byte, *Footer, error) {
	ft := m.Footer
	v := ft.Version
	if v < versionFooterSections || v > versionOptionalSection {
		return nil, nil, fmt.Errorf("fragment metadata: cannot write version %d", v)
	}
	if err := ft.Layout.check(); err != nil {
		return nil, nil, err
	}
	num := ft.FieldNum()
	// Before v5 only attributes have var-size sections (the coordinates
	// were one fixed-size field).
	nVar := num
	if v < versionSplitCoords {
		nVar = len(ft.Layout.Attrs)
	}
	var out []byte
	put := func(payload []byte) (uint64, error) {
		off := uint64(len(out))
		t, err := gentile.Encode(payload, v, f)
		if err != nil {
			return 0, err
		}
		out = append(out, t...)
		return off, nil
	}
	perField := func(what string, n int, enc func(i int) []byte) ([]uint64, error) {
		offs := make([]uint64, n)
		for i := range offs {
			o, err := put(enc(i))
			if err != nil {
				return nil, fmt.Errorf("fragment metadata %s: field %d: %w", what, i, err)
			}
			offs[i] = o
		}
		return offs, nil
	}
	list := func(ls [][]uint64, n int, what string) (func(int) []byte, error) {
		if len(ls) > n {
			return nil, fmt.Errorf("fragment metadata %s: %d fields, fragment has %d", what, len(ls), n)
		}
		return func(i int) []byte {
			if i < len(ls) {
				return EncodeU64List(ls[i])
			}
			return EncodeU64List(nil)
		}, nil
	}
	mms := func(ls []MinMax, n int, what string) (func(int) []byte, error) {
		if len(ls) > n {
			return nil, fmt.Errorf("fragment metadata %s: %d entries, want %d", what, len(ls), n)
		}
		return func(i int) []byte {
			if i < len(ls) {
				return EncodeMinMax(ls[i])
			}
			return EncodeMinMax(MinMax{})
		}, nil
	}
	var o Offsets
	encodeTree := EncodeRTree
	if v < versionSplitCoords {
		encodeTree = encodeZippedRTree
	}
	rt, err := encodeTree(&m.RTree, &ft.Layout)
	if err != nil {
		return nil, nil, err
	}
	if o.RTree, err = put(rt); err != nil {
		return nil, nil, err
	}
	steps := []struct {
		what string
		ls   [][]uint64
		dst  *[]uint64
		n    int
		min  uint32
	}{
		{"tile offsets", m.TileOffsets, &o.TileOffsets, num, 0},
		{"tile var offsets", m.TileVarOffsets, &o.TileVarOffsets, nVar, 0},
		{"tile var sizes", m.TileVarSizes, &o.TileVarSizes, nVar, 0},
		{"tile validity offsets", m.TileValidityOffsets, &o.TileValidityOffsets, num, versionValidity},
	}
	for _, s := range steps {
		if v < s.min {
			continue
		}
		enc, err := list(s.ls, s.n, s.what)
		if err != nil {
			return nil, nil, err
		}
		if *s.dst, err = perField(s.what, s.n, enc); err != nil {
			return nil, nil, err
		}
	}
	if v >= versionTileMetadata {
		enc, err := mms(m.TileMins, num, "tile mins")
		if err != nil {
			return nil, nil, err
		}
		if o.TileMins, err = perField("tile mins", num, enc); err != nil {
			return nil, nil, err
		}
		if enc, err = mms(m.TileMaxes, num, "tile maxes"); err != nil {
			return nil, nil, err
		}
		if o.TileMaxes, err = perField("tile maxes", num, enc); err != nil {
			return nil, nil, err
		}
		if v >= versionOptionalSection && !ft.Dense && m.GlobalOrderMins != nil {
			d := len(ft.Layout.Dims)
			if enc, err = mms(m.GlobalOrderMins, d, "tile global order mins"); err != nil {
				return nil, nil, err
			}
			if o.GlobalOrderMins, err = perField("tile global order mins", d, enc); err != nil {
				return nil, nil, err
			}
			if enc, err = mms(m.GlobalOrderMaxes, d, "tile global order maxes"); err != nil {
				return nil, nil, err
			}
			if o.GlobalOrderMaxes, err = perField("tile global order maxes", d, enc); err != nil {
				return nil, nil, err
			}
		}
		for _, s := range []struct {
			what string
			ls   [][]uint64
			dst  *[]uint64
		}{
			{"tile sums", m.TileSums, &o.TileSums},
			{"tile null counts", m.TileNullCounts, &o.TileNullCounts},
		} {
			enc, err := list(s.ls, num, s.what)
			if err != nil {
				return nil, nil, err
			}
			if *s.dst, err = perField(s.what, num, enc); err != nil {
				return nil, nil, err
			}
		}
	}
	if v >= versionFragmentStats {
		stats := m.FragmentStats
		if len(stats) > num {
			return nil, nil, fmt.Errorf("fragment metadata fragment stats: %d fields, fragment has %d", len(stats), num)
		}
		if len(stats) < num {
			stats = append(append([]FieldStats(nil), stats...), make([]FieldStats, num-len(stats))...)
		}
		if o.FragmentStats, err = put(EncodeFragmentStats(stats)); err != nil {
			return nil, nil, err
		}
	}
	if v >= versionProcessedConds {
		if o.ProcessedConditions, err = put(EncodeProcessedConditions(m.ProcessedConditions)); err != nil {
			return nil, nil, err
		}
	}
	ft.Offsets = o
	if o.GlobalOrderMins == nil {
		ft.Optional = dropGlobalOrder(ft.Optional)
	}
	fb, err := EncodeFooter(&ft)
	if err != nil {
		return nil, nil, err
	}
	ft.Size = uint64(len(fb))
	out = append(out, fb...)
	if HasFooterLength(&ft.Layout, v) {
		out = binary.LittleEndian.AppendUint64(out, uint64(len(fb)))
	}
	return out, &ft, nil
}

func dropGlobalOrder(s []OptionalSection) []OptionalSection {
	var out []OptionalSection
	for _, x := range s {
		if x.ID != optionalTileGlobalOrder {
			out = append(out, x)
		}
	}
	return out
}
