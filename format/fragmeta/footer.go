package fragmeta

import (
	"fmt"

	"github.com/tileflight/tileflight/format/wire"
)

// Offsets are the positions, inside __fragment_metadata.tdb, of the generic
// tiles holding each section. Per-field slices are indexed by field index
// (see Layout.FieldNum); a slice is nil when the version has no such section.
type Offsets struct {
	RTree               uint64
	TileOffsets         []uint64
	TileVarOffsets      []uint64
	TileVarSizes        []uint64
	TileValidityOffsets []uint64 // v7+
	TileMins            []uint64 // v11+
	TileMaxes           []uint64 // v11+
	TileSums            []uint64 // v11+
	TileNullCounts      []uint64 // v11+
	FragmentStats       uint64   // v12+
	ProcessedConditions uint64   // v16+
	// GlobalOrderMins and GlobalOrderMaxes (per dimension) come from the
	// v23 "tile global order" optional section of sparse fragments.
	GlobalOrderMins  []uint64
	GlobalOrderMaxes []uint64
}

// OptionalSection is a v23 footer extension, kept verbatim so that unknown
// identifiers survive a decode/encode round trip.
type OptionalSection struct {
	ID   uint64
	Data []byte
}

// Footer is the fixed part of a fragment's metadata, read when an array is
// opened. From v3 it is the tail of __fragment_metadata.tdb (and it is what
// consolidated fragment metadata files collect).
type Footer struct {
	Version    uint32
	SchemaName string // "__array_schema.tdb" before v10
	Dense      bool
	// NonEmptyDomain has one Range per dimension; nil when the fragment
	// recorded a null non-empty domain.
	NonEmptyDomain    MBR
	SparseTileNum     uint64
	LastTileCellNum   uint64
	HasTimestamps     bool // v14+
	HasDeleteMeta     bool // v15+
	FileSizes         []uint64
	FileVarSizes      []uint64
	FileValiditySizes []uint64 // v7+
	Offsets           Offsets
	Optional          []OptionalSection // v23+, in file order

	// Layout is the field description the footer was decoded with.
	Layout Layout
	// Size is the footer's length in bytes, not counting the trailing
	// length field.
	Size uint64
}

// FieldNum is the number of per-field entries of this footer.
func (f *Footer) FieldNum() int {
	return f.Layout.FieldNum(f.Version, f.HasTimestamps, f.HasDeleteMeta)
}

// Field describes field index i (attributes, coords, dims, then the
// timestamp and delete fields).
func (f *Footer) Field(i int) (Field, bool) {
	if i >= f.FieldNum() {
		return Field{}, false
	}
	return f.Layout.fieldAt(i, f.Version, f.HasTimestamps)
}

// FieldIndex finds a field by name: an attribute, a dimension, or one of
// CoordsName, TimestampsName, DeleteTimestampsName, DeleteConditionIdxName.
func (f *Footer) FieldIndex(name string) (int, bool) {
	for i, n := 0, f.FieldNum(); i < n; i++ {
		fd, _ := f.Field(i)
		if fd.Name == name {
			return i, true
		}
	}
	return -1, false
}

// HasFooterLength reports whether a fragment of this version and layout ends
// with the 8-byte footer length (v10+, or any fragment with a var dimension).
func HasFooterLength(l *Layout, version uint32) bool {
	return version >= versionSchemaName || !l.allFixedDims()
}

// FixedFooterSize is the footer size of pre-v10 fragments whose dimensions
// are all fixed-size: such files do not record it. ok is false when the
// size is recorded in the file instead (or for versions without a footer).
func FixedFooterSize(l *Layout, version uint32) (uint64, bool) {
	if version < versionFooterSections || HasFooterLength(l, version) || len(l.Dims) == 0 {
		return 0, false
	}
	a := uint64(len(l.Attrs))
	var dom uint64
	if version < versionSplitCoords {
		dom = 2 * uint64(len(l.Dims)) * uint64(l.Dims[0].Type.Size())
	} else {
		for _, d := range l.Dims {
			dom += 2 * uint64(d.Type.Size())
		}
	}
	size := uint64(4+1+1) + dom + 8 + 8
	if version < versionSplitCoords {
		// file sizes, file var sizes, rtree, tile offsets, var offsets, var sizes
		return size + 8*((a+1)+a+1+(a+1)+a+a), true
	}
	num := uint64(l.FieldNum(version, false, false))
	lists := uint64(6) // file sizes, var sizes, tile offsets, var offsets, var sizes (+rtree below)
	if version >= versionValidity {
		lists = 8 // + file validity sizes, validity offsets
	}
	return size + 8*(num*(lists-1)) + 8, true
}

// DecodeFooter decodes a footer at the start of b (extra trailing bytes
// are ignored) and reports how many bytes it occupies. version is the one
// in the fragment's name; it must match the footer's own (a name that says 4
// also admits a version 3 footer).
func DecodeFooter(b []byte, l Layout, version uint32) (*Footer, error) {
	if err := l.check(); err != nil {
		return nil, err
	}
	if version < versionFooterSections {
		return nil, fmt.Errorf("fragment metadata: version %d has no footer", version)
	}
	if version < versionSplitCoords {
		if err := l.checkZipped(); err != nil {
			return nil, err
		}
	}
	r := wire.NewReader(b)
	f := &Footer{Layout: l}
	f.Version = r.Uint32("footer: version")
	// Names of the form __t1_t2_uuid say only "version 3 or 4" (TileDB
	// reads them as 4); the footer holds the version that wrote it.
	if r.Err() == nil && f.Version != version && !(version == 4 && f.Version == 3) {
		return nil, fmt.Errorf("fragment metadata footer: %w: version %d, fragment name says %d", wire.ErrCorrupt, f.Version, version)
	}
	f.SchemaName = legacySchemaName
	if f.Version >= versionSchemaName {
		n := r.Uint64("footer: schema name size")
		if r.Err() == nil && n == 0 {
			r.Failf("footer: empty schema name")
		}
		f.SchemaName = string(r.BytesU64(n, "footer: schema name"))
	}
	f.Dense = r.Bool("footer: dense")
	null := r.Bool("footer: null non-empty domain")
	if r.Err() != nil {
		return nil, footerErr(r.Err())
	}
	if null {
		// The writer pads a null domain with zeros sized for dim 0's type.
		if !l.allFixedDims() {
			return nil, footerErr(corrupt("null non-empty domain with var-sized dimensions"))
		}
		r.Skip(2*len(l.Dims)*l.Dims[0].Type.Size(), "footer: null non-empty domain")
	} else {
		f.NonEmptyDomain = make(MBR, len(l.Dims))
		for d, dim := range l.Dims {
			f.NonEmptyDomain[d] = readRange(r, dim, f.Version, fmt.Sprintf("footer: non-empty domain of %q", l.Dims[d].Name))
		}
	}
	f.SparseTileNum = r.Uint64("footer: sparse tile num")
	f.LastTileCellNum = r.Uint64("footer: last tile cell num")
	if f.Version >= versionTimestamps {
		f.HasTimestamps = r.Bool("footer: has timestamps")
	}
	if f.Version >= versionDeleteMeta {
		f.HasDeleteMeta = r.Bool("footer: has delete metadata")
	}
	num := f.FieldNum()
	nVar := num
	if f.Version < versionSplitCoords {
		nVar = len(l.Attrs)
	}
	list := func(n int, what string) []uint64 {
		if !r.CheckCount(uint64(n), 8, "footer: "+what) {
			return nil
		}
		out := make([]uint64, n)
		for i := range out {
			out[i] = r.Uint64("footer: " + what)
		}
		return out
	}
	f.FileSizes = list(num, "file sizes")
	f.FileVarSizes = list(nVar, "file var sizes")
	if f.Version >= versionValidity {
		f.FileValiditySizes = list(num, "file validity sizes")
	}
	o := &f.Offsets
	o.RTree = r.Uint64("footer: R-tree offset")
	o.TileOffsets = list(num, "tile offsets offsets")
	o.TileVarOffsets = list(nVar, "tile var offsets offsets")
	o.TileVarSizes = list(nVar, "tile var sizes offsets")
	if f.Version >= versionValidity {
		o.TileValidityOffsets = list(num, "tile validity offsets offsets")
	}
	if f.Version >= versionTileMetadata {
		o.TileMins = list(num, "tile mins offsets")
		o.TileMaxes = list(num, "tile maxes offsets")
		o.TileSums = list(num, "tile sums offsets")
		o.TileNullCounts = list(num, "tile null counts offsets")
	}
	if f.Version >= versionFragmentStats {
		o.FragmentStats = r.Uint64("footer: fragment min/max/sum/null count offset")
	}
	if f.Version >= versionProcessedConds {
		o.ProcessedConditions = r.Uint64("footer: processed conditions offset")
	}
	if f.Version >= versionOptionalSection {
		n := r.Uint32("footer: optional section count")
		if r.CheckCount(uint64(n), 12, "footer: optional sections") {
			for i := uint32(0); i < n && r.Err() == nil; i++ {
				id := r.Uint64("footer: optional section id")
				size := r.Uint32("footer: optional section size")
				data := r.BytesU64(uint64(size), "footer: optional section data")
				if r.Err() != nil {
					break
				}
				f.Optional = append(f.Optional, OptionalSection{ID: id, Data: data})
				if id == optionalTileGlobalOrder {
					if err := f.decodeGlobalOrder(data); err != nil {
						return nil, footerErr(err)
					}
				}
			}
		}
	}
	if r.Err() != nil {
		return nil, footerErr(r.Err())
	}
	f.Size = uint64(r.Offset())
	return f, nil
}

func (f *Footer) decodeGlobalOrder(data []byte) error {
	d := len(f.Layout.Dims)
	if len(data) != 16*d {
		return corrupt("tile global order section has %d bytes, want %d for %d dimensions", len(data), 16*d, d)
	}
	r := wire.NewReader(data)
	f.Offsets.GlobalOrderMins = make([]uint64, d)
	f.Offsets.GlobalOrderMaxes = make([]uint64, d)
	for i := range d {
		f.Offsets.GlobalOrderMins[i] = r.Uint64("global order min offset")
	}
	for i := range d {
		f.Offsets.GlobalOrderMaxes[i] = r.Uint64("global order max offset")
	}
	return r.Err()
}

func footerErr(err error) error { return fmt.Errorf("fragment metadata footer: %w", err) }

// LocateFooter finds the footer in the last bytes of a fragment metadata
// file of fileSize bytes: tail holds the file's final len(tail) bytes. It
// returns the footer's offset in the file and its size. need > 0 means tail
// is too short and the caller should retry with the last need bytes.
func LocateFooter(tail []byte, fileSize uint64, l *Layout, version uint32) (off, size, need uint64, err error) {
	if uint64(len(tail)) > fileSize {
		return 0, 0, 0, fmt.Errorf("fragment metadata: %d tail bytes for a %d-byte file", len(tail), fileSize)
	}
	if HasFooterLength(l, version) {
		if len(tail) < 8 {
			if fileSize < 8 {
				return 0, 0, 0, fmt.Errorf("fragment metadata: %w: %d-byte file has no footer length", wire.ErrTruncated, fileSize)
			}
			return 0, 0, 8, nil
		}
		r := wire.NewReader(tail[len(tail)-8:])
		size = r.Uint64("footer length")
		if size > fileSize-8 {
			return 0, 0, 0, fmt.Errorf("fragment metadata: %w: footer length %d exceeds the %d-byte file", wire.ErrCorrupt, size, fileSize)
		}
		off = fileSize - 8 - size
		if uint64(len(tail)) < size+8 {
			return off, size, size + 8, nil
		}
		return off, size, 0, nil
	}
	size, ok := FixedFooterSize(l, version)
	if !ok {
		return 0, 0, 0, fmt.Errorf("fragment metadata: version %d has no footer", version)
	}
	if size > fileSize {
		return 0, 0, 0, fmt.Errorf("fragment metadata: %w: footer of %d bytes in a %d-byte file", wire.ErrTruncated, size, fileSize)
	}
	off = fileSize - size
	if uint64(len(tail)) < size {
		return off, size, size, nil
	}
	return off, size, 0, nil
}

// DecodeFooterTail decodes the footer of a fragment metadata file from its
// last bytes (at least the footer and its length field; the whole file is
// fine). The returned footer's Size excludes the length field.
func DecodeFooterTail(tail []byte, fileSize uint64, l Layout, version uint32) (*Footer, error) {
	off, size, need, err := LocateFooter(tail, fileSize, &l, version)
	if err != nil {
		return nil, err
	}
	if need > 0 {
		return nil, fmt.Errorf("fragment metadata: %w: footer needs the last %d bytes, have %d", wire.ErrTruncated, need, len(tail))
	}
	start := uint64(len(tail)) - (fileSize - off)
	f, err := DecodeFooter(tail[start:start+size], l, version)
	if err != nil {
		return nil, err
	}
	if f.Size != size {
		return nil, fmt.Errorf("fragment metadata footer: %w: decoded %d bytes, file says %d", wire.ErrCorrupt, f.Size, size)
	}
	return f, nil
}

// EncodeFooter serializes f as TileDB writes it (without the trailing
// length field; see AppendFooterLength). Versions 3 to 23 are supported.
func EncodeFooter(f *Footer) ([]byte, error) {
	l := &f.Layout
	if f.Version < versionFooterSections {
		return nil, fmt.Errorf("fragment metadata: version %d has no footer", f.Version)
	}
	num := f.FieldNum()
	nVar := num
	if f.Version < versionSplitCoords {
		nVar = len(l.Attrs)
	}
	checkLen := func(what string, got, want int) error {
		if got != want {
			return fmt.Errorf("fragment metadata footer: %s has %d entries, want %d", what, got, want)
		}
		return nil
	}
	o := &f.Offsets
	checks := []struct {
		what string
		v    []uint64
		n    int
		need bool
	}{
		{"file sizes", f.FileSizes, num, true},
		{"file var sizes", f.FileVarSizes, nVar, true},
		{"file validity sizes", f.FileValiditySizes, num, f.Version >= versionValidity},
		{"tile offsets offsets", o.TileOffsets, num, true},
		{"tile var offsets offsets", o.TileVarOffsets, nVar, true},
		{"tile var sizes offsets", o.TileVarSizes, nVar, true},
		{"tile validity offsets offsets", o.TileValidityOffsets, num, f.Version >= versionValidity},
		{"tile mins offsets", o.TileMins, num, f.Version >= versionTileMetadata},
		{"tile maxes offsets", o.TileMaxes, num, f.Version >= versionTileMetadata},
		{"tile sums offsets", o.TileSums, num, f.Version >= versionTileMetadata},
		{"tile null counts offsets", o.TileNullCounts, num, f.Version >= versionTileMetadata},
	}
	for _, c := range checks {
		if c.need {
			if err := checkLen(c.what, len(c.v), c.n); err != nil {
				return nil, err
			}
		}
	}
	w := wire.NewWriter(nil)
	w.Uint32(f.Version)
	if f.Version >= versionSchemaName {
		if f.SchemaName == "" {
			return nil, fmt.Errorf("fragment metadata footer: empty schema name")
		}
		w.Uint64(uint64(len(f.SchemaName)))
		w.String(f.SchemaName)
	}
	w.Bool(f.Dense)
	if f.NonEmptyDomain == nil {
		if !l.allFixedDims() {
			return nil, fmt.Errorf("fragment metadata footer: null non-empty domain needs fixed-size dimensions")
		}
		w.Bool(true)
		w.Write(make([]byte, 2*len(l.Dims)*l.Dims[0].Type.Size()))
	} else {
		if len(f.NonEmptyDomain) != len(l.Dims) {
			return nil, fmt.Errorf("fragment metadata footer: non-empty domain has %d ranges for %d dimensions", len(f.NonEmptyDomain), len(l.Dims))
		}
		w.Bool(false)
		for d, dim := range l.Dims {
			rg := f.NonEmptyDomain[d]
			if !dim.Var() && (len(rg.Start) != dim.Type.Size() || len(rg.End) != dim.Type.Size()) {
				return nil, fmt.Errorf("fragment metadata footer: non-empty domain of %q: want %d-byte bounds", dim.Name, dim.Type.Size())
			}
			writeRange(w, dim, rg)
		}
	}
	w.Uint64(f.SparseTileNum)
	w.Uint64(f.LastTileCellNum)
	if f.Version >= versionTimestamps {
		w.Bool(f.HasTimestamps)
	}
	if f.Version >= versionDeleteMeta {
		w.Bool(f.HasDeleteMeta)
	}
	u64s := func(v []uint64) {
		for _, x := range v {
			w.Uint64(x)
		}
	}
	u64s(f.FileSizes)
	u64s(f.FileVarSizes)
	if f.Version >= versionValidity {
		u64s(f.FileValiditySizes)
	}
	w.Uint64(o.RTree)
	u64s(o.TileOffsets)
	u64s(o.TileVarOffsets)
	u64s(o.TileVarSizes)
	if f.Version >= versionValidity {
		u64s(o.TileValidityOffsets)
	}
	if f.Version >= versionTileMetadata {
		u64s(o.TileMins)
		u64s(o.TileMaxes)
		u64s(o.TileSums)
		u64s(o.TileNullCounts)
	}
	if f.Version >= versionFragmentStats {
		w.Uint64(o.FragmentStats)
	}
	if f.Version >= versionProcessedConds {
		w.Uint64(o.ProcessedConditions)
	}
	if f.Version >= versionOptionalSection {
		opt := f.optionalSections()
		w.Uint32(uint32(len(opt)))
		for _, s := range opt {
			w.Uint64(s.ID)
			w.Uint32(uint32(len(s.Data)))
			w.Write(s.Data)
		}
	}
	return w.Bytes(), nil
}

// optionalSections returns the sections to write: the global-order one is
// regenerated from Offsets so that Encode's new offsets are what is stored.
func (f *Footer) optionalSections() []OptionalSection {
	var out []OptionalSection
	have := false
	gw := func() []byte {
		w := wire.NewWriter(nil)
		for _, x := range f.Offsets.GlobalOrderMins {
			w.Uint64(x)
		}
		for _, x := range f.Offsets.GlobalOrderMaxes {
			w.Uint64(x)
		}
		return w.Bytes()
	}
	for _, s := range f.Optional {
		if s.ID == optionalTileGlobalOrder {
			if f.Offsets.GlobalOrderMins == nil {
				continue
			}
			have = true
			s = OptionalSection{ID: s.ID, Data: gw()}
		}
		out = append(out, s)
	}
	if !have && f.Offsets.GlobalOrderMins != nil {
		out = append([]OptionalSection{{ID: optionalTileGlobalOrder, Data: gw()}}, out...)
	}
	return out
}
