// Package base owns what every read path shares and none of them owns
// alone: the tuning of a read (Options), the Arrow-facing field of a
// column (FieldFor), and the record batch whose columns may still be the
// zstd frames they were stored in (ZstdBatch). The readers (reader/dense,
// reader/sparse, reader/ndarray, reader/agg) and package reader above
// them import it; it imports only lower layers (arrowconv, errkind,
// filters, format/schema, tdbarray, reader/tileio), never package reader
// or a reader.
package base

import (
	"encoding/binary"

	"github.com/tileflight/tileflight/arrowconv"
	"github.com/tileflight/tileflight/errkind"
	"github.com/tileflight/tileflight/format/schema"
	"github.com/tileflight/tileflight/reader/tileio"
	"github.com/tileflight/tileflight/tdbarray"
)

// Options tune a read.
type Options struct {
	// MemoryBudget bounds the decoded tile bytes the read holds ahead of
	// need (default tileio.DefaultMemoryBudget).
	MemoryBudget int64
	// MaxWorkingSet bounds the decoded tile bytes the read may need at
	// once to progress, beyond the budget (default: see
	// tileio.Options.MaxWorkingSet); a read needing more fails at once
	// with errkind.ResourceExhausted.
	MaxWorkingSet int64
	// Workers is the number of tiles fetched and unfiltered in parallel
	// (default GOMAXPROCS).
	Workers int
	// EncryptionKey opens encrypted arrays.
	EncryptionKey []byte
	// Cache, when set, keeps decoded schemas and fragment metadata across
	// reads (see array.Cache); a daemon shares one between its queries.
	Cache *tdbarray.Cache
	// TileCache, when set, keeps decoded tiles across reads (see
	// tileio.Cache); a daemon shares one between its queries.
	TileCache *tileio.Cache
	// ZstdPassThrough lets a dense read return batches whose columns are
	// still the zstd frames they were stored in (*ZstdBatch), for a
	// consumer that sends them on compressed: whole space tiles of one
	// fragment, of attributes whose Arrow data buffer is the tile's bytes
	// (arrowconv.Field.SameBytes) filtered by zstd alone, in reads without
	// a filter or a limit. Every other batch is as without it.
	ZstdPassThrough bool
	// Meter, when set, counts the decoded bytes the read holds (tiles and
	// the chunks a dense read builds), for tests and benchmarks.
	Meter *tileio.Meter
}

// FieldFor describes dimension or attribute name of s for arrowconv. An
// enumerated attribute of a dense array whose fill value is no index of
// its enumeration is a nullable column (see withFillIndex).
func FieldFor(s *schema.ArraySchema, name string) (arrowconv.Field, error) {
	if i := s.DimensionIndex(name); i >= 0 {
		d := &s.Dimensions[i]
		return arrowconv.Field{Name: d.Name, Type: d.Type, CellValNum: d.CellValNum, Role: arrowconv.Dimension}, nil
	}
	i := s.AttributeIndex(name)
	if i < 0 {
		return arrowconv.Field{}, errkind.Errorf(errkind.InvalidArgument, "no column %q", name)
	}
	at := &s.Attributes[i]
	f := arrowconv.Field{Name: at.Name, Type: at.Type, CellValNum: at.CellValNum, Nullable: at.Nullable, Role: arrowconv.Attribute}
	if at.EnumerationName != "" {
		ref := s.EnumerationByName(at.EnumerationName)
		if ref == nil || ref.Enum == nil {
			return arrowconv.Field{}, errkind.Errorf(errkind.DataLoss, "attribute %q: enumeration %q is missing", name, at.EnumerationName)
		}
		e := ref.Enum
		f.Enumeration = &arrowconv.Enumeration{Name: ref.Name, Type: e.Type, CellValNum: e.CellValNum,
			Ordered: e.Ordered, Data: e.Data, Offsets: e.Offsets}
		if s.IsDense() {
			withFillIndex(at, &f)
		}
	}
	return f, nil
}

// withFillIndex lets a dense read of an enumerated attribute return the
// cells that hold the attribute's fill value as nulls when that index has
// no enumeration value (TileDB fills unwritten cells, and cells failing a
// filter, with it: uint8's default 255 with a 3-value enumeration). TileDB
// returns such a cell's raw index and no value; any other index outside
// the enumeration is still DATA_LOSS.
func withFillIndex(at *schema.Attribute, f *arrowconv.Field) {
	e := f.Enumeration
	fill := at.FillValue
	if len(fill) != at.Type.Size() || at.CellValNum != 1 {
		return
	}
	var v int64
	switch len(fill) {
	case 1:
		v = int64(fill[0])
		if at.Type.IsSigned() {
			v = int64(int8(fill[0]))
		}
	case 2:
		u := binary.LittleEndian.Uint16(fill)
		v = int64(u)
		if at.Type.IsSigned() {
			v = int64(int16(u))
		}
	case 4:
		u := binary.LittleEndian.Uint32(fill)
		v = int64(u)
		if at.Type.IsSigned() {
			v = int64(int32(u))
		}
	case 8:
		v = int64(binary.LittleEndian.Uint64(fill))
	default:
		return
	}
	if v >= 0 && v < int64(e.Len()) {
		return // the fill is a value of the enumeration: nothing to hide
	}
	e.HasFill, e.FillIndex = true, v
}
