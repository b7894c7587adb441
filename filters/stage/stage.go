// Package stage defines the contract between TileDB's filter pipeline
// runner (package filters) and the individual filters: what one filter
// receives and returns when it runs over one chunk of a tile.
//
// TileDB runs every filter on a chunk as a transformation of two byte
// streams, the metadata and the data, each of which may be split into
// "parts" that the next filter treats independently (see format_spec
// tile.md). Forward (write) receives the previous filter's outputs as parts;
// a filter's own metadata is placed in front of the metadata it passes on.
// Reverse (read) receives the metadata stream with this filter's own
// metadata at its front, and the filtered data; it consumes its metadata
// and returns the remaining metadata plus the unfiltered data.
package stage

import "github.com/tileflight/tileflight/format/datatype"

// Buffers is the input or output of one filter stage on one chunk.
// Parts alias memory owned by the caller; a stage must not modify its
// input parts in place.
type Buffers struct {
	Meta [][]byte
	Data [][]byte
}

// Concat returns the parts joined into one slice (no copy for one part).
func Concat(parts [][]byte) []byte {
	switch len(parts) {
	case 0:
		return nil
	case 1:
		return parts[0]
	}
	n := 0
	for _, p := range parts {
		n += len(p)
	}
	out := make([]byte, 0, n)
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

// Size is the total length of the parts.
func Size(parts [][]byte) int {
	n := 0
	for _, p := range parts {
		n += len(p)
	}
	return n
}

// Context is what a stage knows about the tile it filters.
type Context struct {
	// Type is the datatype of this stage's input (forward) / output
	// (reverse): the tile's datatype transformed by the earlier filters'
	// OutputType.
	Type datatype.Datatype
	// CellValNum is the number of values per cell of the field (0 = var).
	CellValNum uint32
	// Version is the array format version the tile was (or is) written
	// with; several filters changed behaviour across versions.
	Version uint32
	// IsOffsets is true when the tile is an offsets tile of a var field.
	IsOffsets bool
	// VarOffsets are the cell offsets (in bytes, relative to the chunk's
	// data) of a var-sized tile's chunk, for the filters that encode
	// string cells (RLE and dictionary on strings). Nil otherwise.
	VarOffsets []uint64
}

// Stage is one filter instance, configured with its options.
type Stage interface {
	// OutputType is the datatype this stage produces from input type in.
	OutputType(in datatype.Datatype) datatype.Datatype
	// Forward filters one chunk.
	Forward(ctx *Context, in Buffers) (Buffers, error)
	// Reverse unfilters one chunk. in.Meta starts with this stage's own
	// metadata; the returned Meta is what remains for earlier stages.
	Reverse(ctx *Context, in Buffers) (Buffers, error)
}
