package fragmeta

import (
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/tileflight/tileflight/format/gentile"
	"github.com/tileflight/tileflight/format/wire"
)

// ReadFunc reads n bytes at offset off of __fragment_metadata.tdb.
type ReadFunc func(off, n uint64) ([]byte, error)

// tailGuess is how much of the file's end Open reads at once: enough for
// the footer of any ordinary schema, so that opening costs one request.
const tailGuess = 16 << 10

// Fragment is one fragment's metadata. The footer is decoded when the
// Fragment is opened; every section is read and decoded on first use and
// then cached. A Fragment is safe for concurrent use.
type Fragment struct {
	footer   *Footer
	read     ReadFunc
	fileSize uint64
	u        gentile.Unfilterer
	// starts holds every recorded section offset and the footer's, sorted:
	// sections are laid out back to back, so the next one ends each.
	starts []uint64

	mu    sync.Mutex
	cache map[sectionKey]*lazy
	// legacy holds everything of a pre-v3 fragment, decoded at open.
	legacy *Metadata
	// loaded counts the decoded bytes of the sections read so far.
	loaded atomic.Int64
	// footerBytes is the size of the footer in the file.
	footerBytes int64
	// validate is Options.Validate.
	validate bool
}

// fixedOverhead is what a Fragment costs besides its footer and sections
// (maps, slices, the footer's decoded structures).
const fixedOverhead = 2 << 10

// MemoryBytes estimates the memory the Fragment holds: its footer and the
// decoded payloads of the sections loaded so far (a pre-v3 fragment: its
// whole file, decoded at open). A cache of fragments weighs them with it.
func (fr *Fragment) MemoryBytes() int64 {
	if fr.legacy != nil {
		return int64(fr.fileSize) + fixedOverhead
	}
	return fr.footerBytes + fr.loaded.Load() + fixedOverhead
}

type sectionKind uint8

const (
	kRTree sectionKind = iota
	kTileOffsets
	kTileVarOffsets
	kTileVarSizes
	kTileValidityOffsets
	kTileMins
	kTileMaxes
	kTileSums
	kTileNullCounts
	kFragmentStats
	kProcessedConditions
	kGlobalOrderMins
	kGlobalOrderMaxes
)

var kindNames = [...]string{"R-tree", "tile offsets", "tile var offsets", "tile var sizes",
	"tile validity offsets", "tile mins", "tile maxes", "tile sums", "tile null counts",
	"fragment min/max/sum/null count", "processed conditions", "tile global order mins",
	"tile global order maxes"}

type sectionKey struct {
	kind  sectionKind
	field int
}

type lazy struct {
	mu   sync.Mutex
	done bool
	val  any
}

// Options tune Open; the zero value is fine.
type Options struct {
	// Unfilterer decodes generic tiles (nil: gentile.Plain,
	// which handles unencrypted TileDB output).
	Unfilterer gentile.Unfilterer
	// Validate checks each R-tree against the footer as it loads
	// (Footer.ValidateRTree, validate.go): a reader prunes tiles with it.
	Validate bool
}

// Open reads the footer of a fragment metadata file of fileSize bytes.
// version is the format version in the fragment's name. For fragments
// before v3 the single metadata tile is read and decoded at once (see
// DecodeLegacy; dense tells whether the fragment has no __coords.tdb).
func Open(read ReadFunc, fileSize uint64, l Layout, version uint32, opt *Options) (*Fragment, error) {
	fr := &Fragment{read: read, fileSize: fileSize, cache: map[sectionKey]*lazy{}}
	if opt != nil {
		fr.u, fr.validate = opt.Unfilterer, opt.Validate
	}
	if version < versionFooterSections {
		b, err := read(0, fileSize)
		if err != nil {
			return nil, fmt.Errorf("fragment metadata: %w", err)
		}
		m, err := DecodeLegacy(b, l, fr.u)
		if err != nil {
			return nil, err
		}
		fr.legacy = m
		fr.footer = &m.Footer
		return fr, nil
	}
	n := min(fileSize, tailGuess)
	tail, err := read(fileSize-n, n)
	if err != nil {
		return nil, fmt.Errorf("fragment metadata: reading footer: %w", err)
	}
	off, _, need, err := LocateFooter(tail, fileSize, &l, version)
	if err != nil {
		return nil, err
	}
	if need > 0 {
		if tail, err = read(fileSize-need, need); err != nil {
			return nil, fmt.Errorf("fragment metadata: reading footer: %w", err)
		}
	}
	f, err := DecodeFooterTail(tail, fileSize, l, version)
	if err != nil {
		return nil, err
	}
	fr.setFooter(f, off)
	return fr, nil
}

// OpenWithFooter makes a Fragment from a footer found elsewhere (a
// consolidated fragment metadata file); sections are still read from the
// fragment's own file of fileSize bytes.
func OpenWithFooter(read ReadFunc, fileSize uint64, f *Footer, opt *Options) *Fragment {
	fr := &Fragment{read: read, fileSize: fileSize, cache: map[sectionKey]*lazy{}}
	if opt != nil {
		fr.u, fr.validate = opt.Unfilterer, opt.Validate
	}
	fr.setFooter(f, fileSize)
	return fr
}

func (fr *Fragment) setFooter(f *Footer, footerOff uint64) {
	fr.footer = f
	if footerOff <= fr.fileSize {
		fr.footerBytes = int64(fr.fileSize - footerOff)
	}
	o := &f.Offsets
	s := []uint64{o.RTree, footerOff}
	for _, v := range [][]uint64{o.TileOffsets, o.TileVarOffsets, o.TileVarSizes, o.TileValidityOffsets,
		o.TileMins, o.TileMaxes, o.TileSums, o.TileNullCounts, o.GlobalOrderMins, o.GlobalOrderMaxes} {
		s = append(s, v...)
	}
	if f.Version >= versionFragmentStats {
		s = append(s, o.FragmentStats)
	}
	if f.Version >= versionProcessedConds {
		s = append(s, o.ProcessedConditions)
	}
	slices.Sort(s)
	fr.starts = slices.Compact(s)
}

// Footer returns the decoded footer.
func (fr *Fragment) Footer() *Footer { return fr.footer }

// sectionEnd is the offset where the section starting at off ends.
func (fr *Fragment) sectionEnd(off uint64) uint64 {
	i, found := slices.BinarySearch(fr.starts, off)
	if found {
		i++
	}
	if i < len(fr.starts) && fr.starts[i] <= fr.fileSize {
		return fr.starts[i]
	}
	return fr.fileSize
}

func (fr *Fragment) errf(k sectionKey, err error) error {
	if k.kind == kRTree || k.kind == kFragmentStats || k.kind == kProcessedConditions {
		return fmt.Errorf("fragment metadata %s: %w", kindNames[k.kind], err)
	}
	name := fmt.Sprintf("field %d", k.field)
	if k.kind == kGlobalOrderMins || k.kind == kGlobalOrderMaxes {
		if k.field < len(fr.footer.Layout.Dims) {
			name = fmt.Sprintf("dimension %q", fr.footer.Layout.Dims[k.field].Name)
		}
	} else if fd, ok := fr.footer.Field(k.field); ok {
		name = fmt.Sprintf("field %q", fd.Name)
	}
	return fmt.Errorf("fragment metadata %s: %s: %w", kindNames[k.kind], name, err)
}

// payload reads and unfilters the generic tile at off.
func (fr *Fragment) payload(off uint64) ([]byte, error) {
	end := fr.sectionEnd(off)
	if off >= end {
		return nil, fmt.Errorf("%w: section offset %d is outside the %d-byte file", wire.ErrCorrupt, off, fr.fileSize)
	}
	b, err := fr.read(off, end-off)
	if err != nil {
		return nil, err
	}
	_, p, _, err := gentile.Decode(b, fr.u)
	if err != nil {
		return nil, fmt.Errorf("generic tile at byte %d: %w", off, err)
	}
	fr.loaded.Add(int64(len(p)))
	return p, nil
}

// load returns the cached value of a section, decoding it on first use.
// Errors are not cached so that a failed read can be retried.
func (fr *Fragment) load(k sectionKey, decode func() (any, error)) (any, error) {
	fr.mu.Lock()
	e := fr.cache[k]
	if e == nil {
		e = &lazy{}
		fr.cache[k] = e
	}
	fr.mu.Unlock()
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.done {
		return e.val, nil
	}
	v, err := decode()
	if err != nil {
		return nil, fr.errf(k, err)
	}
	e.val, e.done = v, true
	return v, nil
}

func (fr *Fragment) fieldOffset(list []uint64, field int, k sectionKind) (uint64, bool, error) {
	if field < 0 || field >= fr.footer.FieldNum() {
		return 0, false, fmt.Errorf("fragment metadata %s: no field %d (fragment has %d)", kindNames[k], field, fr.footer.FieldNum())
	}
	if field >= len(list) {
		return 0, false, nil
	}
	return list[field], true, nil
}

func (fr *Fragment) u64s(k sectionKind, list []uint64, field int, legacy [][]uint64) ([]uint64, error) {
	if fr.legacy != nil {
		if field < 0 || field >= fr.footer.FieldNum() {
			return nil, fmt.Errorf("fragment metadata %s: no field %d", kindNames[k], field)
		}
		if field < len(legacy) {
			return legacy[field], nil
		}
		return nil, nil
	}
	off, ok, err := fr.fieldOffset(list, field, k)
	if err != nil || !ok {
		return nil, err
	}
	v, err := fr.load(sectionKey{k, field}, func() (any, error) {
		p, err := fr.payload(off)
		if err != nil {
			return nil, err
		}
		return U64List(p, kindNames[k])
	})
	if err != nil {
		return nil, err
	}
	return v.([]uint64), nil
}

// TileOffsets returns the file offsets of field's tiles (data file, or
// the offsets file for var-sized fields).
func (fr *Fragment) TileOffsets(field int) ([]uint64, error) {
	var lg [][]uint64
	if fr.legacy != nil {
		lg = fr.legacy.TileOffsets
	}
	return fr.u64s(kTileOffsets, fr.footer.Offsets.TileOffsets, field, lg)
}

// TileVarOffsets returns the offsets of field's tiles in its _var file.
func (fr *Fragment) TileVarOffsets(field int) ([]uint64, error) {
	var lg [][]uint64
	if fr.legacy != nil {
		lg = fr.legacy.TileVarOffsets
	}
	return fr.u64s(kTileVarOffsets, fr.footer.Offsets.TileVarOffsets, field, lg)
}

// TileVarSizes returns the unfiltered sizes of field's var tiles.
func (fr *Fragment) TileVarSizes(field int) ([]uint64, error) {
	var lg [][]uint64
	if fr.legacy != nil {
		lg = fr.legacy.TileVarSizes
	}
	return fr.u64s(kTileVarSizes, fr.footer.Offsets.TileVarSizes, field, lg)
}

// TileValidityOffsets returns the offsets of field's validity tiles (v7+).
func (fr *Fragment) TileValidityOffsets(field int) ([]uint64, error) {
	return fr.u64s(kTileValidityOffsets, fr.footer.Offsets.TileValidityOffsets, field, nil)
}

// TileSums returns field's per-tile sums as raw 8-byte values (v11+; empty
// when TileDB keeps no sums for the field).
func (fr *Fragment) TileSums(field int) ([]uint64, error) {
	return fr.u64s(kTileSums, fr.footer.Offsets.TileSums, field, nil)
}

// TileNullCounts returns field's per-tile null counts (v11+; empty for
// non-nullable fields).
func (fr *Fragment) TileNullCounts(field int) ([]uint64, error) {
	return fr.u64s(kTileNullCounts, fr.footer.Offsets.TileNullCounts, field, nil)
}

func (fr *Fragment) minmax(k sectionKind, list []uint64, field int) (MinMax, error) {
	if fr.legacy != nil {
		return MinMax{}, nil
	}
	var off uint64
	if k == kGlobalOrderMins || k == kGlobalOrderMaxes {
		if field < 0 || field >= len(fr.footer.Layout.Dims) {
			return MinMax{}, fmt.Errorf("fragment metadata %s: no dimension %d", kindNames[k], field)
		}
		if field >= len(list) {
			return MinMax{}, nil
		}
		off = list[field]
	} else {
		o, ok, err := fr.fieldOffset(list, field, k)
		if err != nil || !ok {
			return MinMax{}, err
		}
		off = o
	}
	v, err := fr.load(sectionKey{k, field}, func() (any, error) {
		p, err := fr.payload(off)
		if err != nil {
			return nil, err
		}
		return DecodeMinMax(p, kindNames[k])
	})
	if err != nil {
		return MinMax{}, err
	}
	return v.(MinMax), nil
}

// TileMins returns field's tile mins section (v11+).
func (fr *Fragment) TileMins(field int) (MinMax, error) {
	return fr.minmax(kTileMins, fr.footer.Offsets.TileMins, field)
}

// TileMaxes returns field's tile maxes section (v11+).
func (fr *Fragment) TileMaxes(field int) (MinMax, error) {
	return fr.minmax(kTileMaxes, fr.footer.Offsets.TileMaxes, field)
}

// GlobalOrderMins returns dimension dim's per-tile first coordinates in
// global order (v23 sparse fragments; empty otherwise).
func (fr *Fragment) GlobalOrderMins(dim int) (MinMax, error) {
	return fr.minmax(kGlobalOrderMins, fr.footer.Offsets.GlobalOrderMins, dim)
}

// GlobalOrderMaxes returns dimension dim's per-tile last coordinates in
// global order (v23 sparse fragments; empty otherwise).
func (fr *Fragment) GlobalOrderMaxes(dim int) (MinMax, error) {
	return fr.minmax(kGlobalOrderMaxes, fr.footer.Offsets.GlobalOrderMaxes, dim)
}

// RTree returns the fragment's R-tree (empty for dense fragments).
func (fr *Fragment) RTree() (*RTree, error) {
	if fr.legacy != nil {
		return &fr.legacy.RTree, nil
	}
	v, err := fr.load(sectionKey{kind: kRTree}, func() (any, error) {
		p, err := fr.payload(fr.footer.Offsets.RTree)
		if err != nil {
			return nil, err
		}
		rt, err := DecodeRTree(p, fr.footer.Layout, fr.footer.Version)
		if err == nil && fr.validate {
			err = fr.footer.ValidateRTree(rt)
		}
		return rt, err
	})
	if err != nil {
		return nil, err
	}
	return v.(*RTree), nil
}

// FragmentStats returns every field's fragment-level min, max, sum and
// null count (v12+; nil before).
func (fr *Fragment) FragmentStats() ([]FieldStats, error) {
	if fr.legacy != nil || fr.footer.Version < versionFragmentStats {
		return nil, nil
	}
	v, err := fr.load(sectionKey{kind: kFragmentStats}, func() (any, error) {
		p, err := fr.payload(fr.footer.Offsets.FragmentStats)
		if err != nil {
			return nil, err
		}
		return DecodeFragmentStats(p, fr.footer.FieldNum())
	})
	if err != nil {
		return nil, err
	}
	return v.([]FieldStats), nil
}

// ProcessedConditions returns the names of the delete/update conditions
// already applied to this fragment (v16+; nil before).
func (fr *Fragment) ProcessedConditions() ([]string, error) {
	if fr.legacy != nil || fr.footer.Version < versionProcessedConds {
		return nil, nil
	}
	v, err := fr.load(sectionKey{kind: kProcessedConditions}, func() (any, error) {
		p, err := fr.payload(fr.footer.Offsets.ProcessedConditions)
		if err != nil {
			return nil, err
		}
		return DecodeProcessedConditions(p)
	})
	if err != nil {
		return nil, err
	}
	return v.([]string), nil
}
