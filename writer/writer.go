// Package writer owns the write side of the TileDB format: creating and
// dropping arrays, writing array metadata, and turning the cells of one
// logical write into fragments that TileDB 2.30 reads exactly. Cells are
// ordered into the array's global order (row/col-major tiles and cells, or
// Hilbert), cut into tiles (space tiles for dense arrays, capacity-sized
// tiles for sparse ones), run through the filter pipelines, and described
// by fragment metadata holding the same tile statistics TileDB computes
// (it prunes and answers aggregates from them).
//
// A write is atomic: data files and fragment metadata go first and the
// commit marker last, so a failure at any step leaves nothing visible. A
// logical write split into several fragments is committed by a single
// consolidated commits file (.con) listing all of them.
package writer

import (
	"fmt"
	"time"

	"github.com/tileflight/tileflight/errkind"
	"github.com/tileflight/tileflight/format/fragmeta"
	"github.com/tileflight/tileflight/format/schema"
)

// FormatVersion is the format version of the fragments this package
// writes (TileDB 2.30's).
const FormatVersion uint32 = fragmeta.Version

// Column is one field's cells in TileDB's buffer layout.
type Column struct {
	// Data holds the values: cell after cell for fixed-size fields, the
	// concatenated values for var-sized ones.
	Data []byte
	// Offsets holds, for var-sized fields, one little-endian uint64 start
	// offset (in bytes, into Data) per cell.
	Offsets []byte
	// Validity holds, for nullable attributes, one byte per cell (0 = null).
	Validity []byte
}

// Options tune a write. The zero value is a write stamped "now" in one
// fragment.
type Options struct {
	// Timestamp stamps the fragments (milliseconds since the epoch);
	// 0 means now.
	Timestamp uint64
	// TimestampStart, when set (and not after Timestamp), makes the
	// fragments' names span [TimestampStart, Timestamp], as a
	// consolidation's output does; the cells carry no timestamps of
	// their own.
	TimestampStart uint64
	// CellTimestamps makes a sparse write carry per-cell timestamps, as a
	// consolidated fragment does: every batch then has one more column,
	// "__timestamps" (uint64 ms), cells with equal coordinates are all
	// kept (in input order), and the fragments say they hold timestamps.
	CellTimestamps bool
	// DeleteMeta (with CellTimestamps) makes a sparse write carry per-cell
	// delete metadata, as TileDB's consolidation over delete commits
	// writes it: two more uint64 columns, "__delete_timestamps" (when a
	// delete commit removed the cell; MaxUint64: never) and
	// "__delete_condition_index" (which one, an index into
	// ProcessedConditions; MaxUint64: none).
	DeleteMeta bool
	// ProcessedConditions are the delete commits ("__commits/NAME.del")
	// the fragments' delete metadata accounts for, stored in their
	// fragment metadata so that readers do not apply them again.
	ProcessedConditions []string
	// MaxFragmentBytes, when > 0, splits a write whose input is larger
	// into several fragments committed together. Default: 1 GiB.
	MaxFragmentBytes int64
	// Concurrency bounds the goroutines filtering tiles; 0 = GOMAXPROCS.
	Concurrency int
	// EncryptionKey is the array's AES-256-GCM key (32 bytes) when it is
	// encrypted. It is checked against the array's schema file before
	// anything is written: a write without the key of an encrypted array,
	// with a key for a plain one, or with a wrong key, stores nothing.
	EncryptionKey []byte
}

// DefaultMaxFragmentBytes is where a large write is split when
// Options.MaxFragmentBytes is 0.
const DefaultMaxFragmentBytes = 1 << 30

// Result describes a completed write.
type Result struct {
	// Fragments are the new fragment directory names, in write order.
	Fragments []string
	// Rows is the number of cells written.
	Rows int64
	// Commit is the key (relative to the array) of the file whose
	// creation made the write visible: a .wrt or a .con file.
	Commit string
}

func (o Options) timestamp() uint64 {
	if o.Timestamp != 0 {
		return o.Timestamp
	}
	return uint64(time.Now().UnixMilli())
}

func (o Options) maxBytes() int64 {
	if o.MaxFragmentBytes > 0 {
		return o.MaxFragmentBytes
	}
	return DefaultMaxFragmentBytes
}

func invalidf(format string, args ...any) error {
	return errkind.Errorf(errkind.InvalidArgument, format, args...)
}

// layoutOf describes s the way fragment metadata needs it.
func layoutOf(s *schema.ArraySchema) fragmeta.Layout {
	l := fragmeta.Layout{Dense: s.IsDense()}
	for _, d := range s.Dimensions {
		l.Dims = append(l.Dims, fragmeta.Field{Name: d.Name, Type: d.Type, CellValNum: d.CellValNum})
	}
	for _, a := range s.Attributes {
		l.Attrs = append(l.Attrs, fragmeta.Field{Name: a.Name, Type: a.Type, CellValNum: a.CellValNum, Nullable: a.Nullable})
	}
	return l
}

func checkSchema(s *schema.ArraySchema) error {
	if s == nil {
		return invalidf("writer: nil schema")
	}
	if s.Name == "" {
		return invalidf("writer: schema has no file name (load it from the array)")
	}
	if len(s.Dimensions) == 0 {
		return invalidf("writer: schema has no dimensions")
	}
	for _, d := range s.Dimensions {
		if d.Type.Size() == 0 {
			return fmt.Errorf("writer: dimension %q: datatype %s: %w", d.Name, d.Type, errkind.Unimplemented)
		}
	}
	return nil
}
