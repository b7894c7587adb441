// Package fragmeta owns TileDB's fragment metadata: the footer of
// __fragment_metadata.tdb (every format version), the sections it points to
// (R-tree, tile offsets and sizes, tile mins/maxes/sums/null counts, fragment
// statistics, processed delete conditions, v23 global-order bounds), the
// pre-v3 single-tile layout, and consolidated fragment metadata files
// (__fragment_meta/*.meta).
//
// Decoding is lazy: a Fragment holds the footer and loads each section the
// first time it is asked for, through a ranged-read function, so opening an
// array with many fragments reads only footers. Encode produces the complete
// file the way TileDB 2.30 lays it out.
//
// The package does not depend on the schema package: callers describe the
// fields with a Layout (dimensions and attributes in schema order).
package fragmeta

import (
	"fmt"
	"math"

	"github.com/tileflight/tileflight/format/datatype"
	"github.com/tileflight/tileflight/format/wire"
)

// VarNum is the CellValNum of a variable-sized field.
const VarNum = math.MaxUint32

// Version is the format version TileDB 2.30 writes and Encode defaults to.
const Version = 22

// Versions at which the layout changed.
const (
	versionFooterSections  = 3  // footer + generic-tile sections replace the single tile
	versionSplitCoords     = 5  // one file per dimension, var dims, no R-tree type/dim num
	versionValidity        = 7  // nullable attributes
	versionSchemaName      = 10 // footer names its schema and always ends with its length
	versionTileMetadata    = 11 // tile mins, maxes, sums, null counts
	versionFragmentStats   = 12 // fragment-level min/max/sum/null count section
	versionTimestamps      = 14
	versionDeleteMeta      = 15
	versionProcessedConds  = 16
	versionOptionalSection = 23
)

// Names TileDB gives the implicit fields, as used by FieldIndex.
const (
	CoordsName              = "__coords"
	TimestampsName          = "__timestamps"
	DeleteTimestampsName    = "__delete_timestamps"
	DeleteConditionIdxName  = "__delete_condition_index"
	legacySchemaName        = "__array_schema.tdb"
	optionalTileGlobalOrder = 0
)

// Field describes one dimension or attribute.
type Field struct {
	Name       string
	Type       datatype.Datatype
	CellValNum uint32 // VarNum for variable-sized fields
	Nullable   bool
}

// Var reports a variable-sized field.
func (f Field) Var() bool { return f.CellValNum == VarNum }

// CellSize is the size of one fixed-size cell (0 for var fields).
func (f Field) CellSize() uint64 {
	if f.Var() {
		return 0
	}
	return uint64(f.Type.Size()) * uint64(f.CellValNum)
}

// Layout is what fragment metadata needs to know about an array schema.
type Layout struct {
	// Dense is the schema's array type; decoding trusts each fragment's
	// own flag instead (a pre-v3 fragment is dense when it has no MBRs).
	Dense bool
	Dims  []Field
	Attrs []Field
	// CellsPerTile is the sparse capacity or the number of cells of a
	// dense space tile; optional, only TileCellNum needs it.
	CellsPerTile uint64
}

// allFixedDims reports whether no dimension is var-sized.
func (l *Layout) allFixedDims() bool {
	for _, d := range l.Dims {
		if d.Var() {
			return false
		}
	}
	return true
}

func (l *Layout) check() error {
	if len(l.Dims) == 0 {
		return fmt.Errorf("fragment metadata: layout has no dimensions")
	}
	for _, f := range append(append([]Field(nil), l.Dims...), l.Attrs...) {
		if !f.Type.Valid() || f.Type.Size() == 0 {
			return fmt.Errorf("fragment metadata: field %q: datatype %d has no size", f.Name, f.Type)
		}
		if f.CellValNum == 0 {
			return fmt.Errorf("fragment metadata: field %q: cell_val_num is 0", f.Name)
		}
	}
	return nil
}

// checkZipped rejects layouts that fragments before v5 cannot have: they
// stored all coordinates together, so dimensions share one fixed-size type.
func (l *Layout) checkZipped() error {
	for _, d := range l.Dims {
		if d.Var() || d.Type != l.Dims[0].Type {
			return fmt.Errorf("fragment metadata: pre-v5 fragment needs dimensions of one fixed-size type, %q is %s", d.Name, d.Type)
		}
	}
	return nil
}

// FieldNum is the number of per-field entries in a footer of this version.
// Before v5 the coordinates were one field after the attributes; from v5
// the list is attributes, the zipped-coords placeholder, the dimensions,
// then the timestamps and delete metadata fields when present.
func (l *Layout) FieldNum(version uint32, hasTimestamps, hasDeleteMeta bool) int {
	if version < versionSplitCoords {
		return len(l.Attrs) + 1
	}
	n := len(l.Attrs) + 1 + len(l.Dims)
	if hasTimestamps {
		n++
	}
	if hasDeleteMeta {
		n += 2
	}
	return n
}

// AttrIndex is the field index of attribute i.
func (l *Layout) AttrIndex(i int) int { return i }

// CoordsIndex is the field index of the zipped coordinates (__coords.tdb).
func (l *Layout) CoordsIndex() int { return len(l.Attrs) }

// DimIndex is the field index of dimension d (v5 and later).
func (l *Layout) DimIndex(d int) int { return len(l.Attrs) + 1 + d }

func typeU64() Field { return Field{Type: datatype.Uint64, CellValNum: 1} }

// fieldAt describes field index i of a fragment.
func (l *Layout) fieldAt(i int, version uint32, hasTimestamps bool) (Field, bool) {
	a, d := len(l.Attrs), len(l.Dims)
	switch {
	case i < 0:
		return Field{}, false
	case i < a:
		return l.Attrs[i], true
	case i == a:
		return Field{Name: CoordsName, Type: l.Dims[0].Type, CellValNum: uint32(d)}, true
	case version < versionSplitCoords:
		return Field{}, false
	case i < a+1+d:
		return l.Dims[i-a-1], true
	}
	k := i - (a + 1 + d)
	if hasTimestamps {
		if k == 0 {
			f := typeU64()
			f.Name = TimestampsName
			return f, true
		}
		k--
	}
	switch k {
	case 0:
		f := typeU64()
		f.Name = DeleteTimestampsName
		return f, true
	case 1:
		f := typeU64()
		f.Name = DeleteConditionIdxName
		return f, true
	}
	return Field{}, false
}

// Range is one dimension's [start, end] as raw bytes: for fixed-size
// dimensions each is one coordinate, for var-sized ones the two strings.
type Range struct {
	Start, End []byte
}

// MBR is a minimum bounding rectangle: one Range per dimension.
type MBR []Range

func readRange(r *wire.Reader, dim Field, version uint32, what string) Range {
	if dim.Var() && version >= versionSplitCoords {
		n := r.Uint64(what + ": range size")
		start := r.Uint64(what + ": start size")
		b := r.BytesU64(n, what)
		if r.Err() == nil && start > n {
			r.Failf("%s: start size %d exceeds range size %d", what, start, n)
		}
		if r.Err() != nil {
			return Range{}
		}
		return Range{Start: b[:start:start], End: b[start:]}
	}
	cs := dim.Type.Size()
	b := r.Bytes(2*cs, what)
	if r.Err() != nil {
		return Range{}
	}
	return Range{Start: b[:cs:cs], End: b[cs:]}
}

func writeRange(w *wire.Writer, dim Field, rg Range) {
	if dim.Var() {
		w.Uint64(uint64(len(rg.Start) + len(rg.End)))
		w.Uint64(uint64(len(rg.Start)))
	}
	w.Write(rg.Start)
	w.Write(rg.End)
}

// minRangeSize is the fewest bytes one serialized range of dim occupies.
func minRangeSize(dim Field) int {
	if dim.Var() {
		return 16
	}
	return 2 * dim.Type.Size()
}

func minMBRSize(l *Layout) int {
	n := 0
	for _, d := range l.Dims {
		n += minRangeSize(d)
	}
	return n
}

func corrupt(format string, args ...any) error {
	return fmt.Errorf("%w: %s", wire.ErrCorrupt, fmt.Sprintf(format, args...))
}
