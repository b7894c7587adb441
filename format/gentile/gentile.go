// Package gentile owns TileDB's generic tile: a self-describing tile with a
// header (version, sizes, datatype, cell size, encryption type, filter
// pipeline) used for schemas, fragment metadata sections, commit files and
// array metadata.
//
// The header is decoded here; the chunked tile body goes through an
// Unfilterer / Filterer. Without one (nil), Plain handles what TileDB
// writes for an unencrypted generic tile: a gzip pipeline (or none). Any
// other pipeline, and encryption, need the complete runner of package
// filters (filters.GenericTileCodec), which sits above format: format
// only describes the small interface it needs.
package gentile

import (
	"fmt"

	"github.com/tileflight/tileflight/errkind"
	"github.com/tileflight/tileflight/format/datatype"
	"github.com/tileflight/tileflight/format/pipeline"
	"github.com/tileflight/tileflight/format/wire"
)

// BaseHeaderSize is the size of the fixed part of the header.
const BaseHeaderSize = 4 + 8 + 8 + 1 + 8 + 1 + 4

// Header is a generic tile header.
type Header struct {
	Version        uint32
	PersistedSize  uint64
	TileSize       uint64
	Datatype       datatype.Datatype
	CellSize       uint64
	EncryptionType uint8
	Filters        pipeline.Pipeline
	// Size is the number of header bytes (BaseHeaderSize + pipeline size).
	Size int
}

// DecodeHeader reads a generic tile header from the start of b.
func DecodeHeader(b []byte) (Header, error) {
	var h Header
	r := wire.NewReader(b)
	h.Version = r.Uint32("generic tile: version")
	h.PersistedSize = r.Uint64("generic tile: persisted size")
	h.TileSize = r.Uint64("generic tile: tile size")
	h.Datatype = datatype.Datatype(r.Uint8("generic tile: datatype"))
	h.CellSize = r.Uint64("generic tile: cell size")
	h.EncryptionType = r.Uint8("generic tile: encryption type")
	plen := r.Uint32("generic tile: filter pipeline size")
	pb := r.BytesU64(uint64(plen), "generic tile: filter pipeline")
	if err := r.Err(); err != nil {
		return h, err
	}
	p, err := pipeline.Decode(wire.NewReader(pb), h.Version)
	if err != nil {
		return h, fmt.Errorf("generic tile: %w", err)
	}
	h.Filters = p
	h.Size = r.Offset()
	return h, nil
}

// Unfilterer reverses a filter pipeline over a whole serialized tile
// (num chunks + chunks) and returns the tile's original bytes.
type Unfilterer interface {
	UnfilterTile(h *Header, filtered []byte) ([]byte, error)
}

// Filterer runs a filter pipeline forward over a tile's bytes, producing the
// serialized tile (num chunks + chunks). It may complete the header (an
// encrypting Filterer marks it encrypted and appends the AES filter):
// Encode serializes the header after FilterTile returns.
type Filterer interface {
	FilterTile(h *Header, data []byte) ([]byte, error)
}

// Decode reads one generic tile at the start of b and returns its header,
// its unfiltered payload, and the total number of bytes it occupies.
func Decode(b []byte, u Unfilterer) (Header, []byte, int, error) {
	h, err := DecodeHeader(b)
	if err != nil {
		return h, nil, 0, err
	}
	rest := b[h.Size:]
	if h.PersistedSize > uint64(len(rest)) {
		return h, nil, 0, fmt.Errorf("%w: generic tile: persisted size %d exceeds the %d bytes left", wire.ErrTruncated, h.PersistedSize, len(rest))
	}
	if u == nil {
		u = Plain{}
	}
	payload, err := u.UnfilterTile(&h, rest[:h.PersistedSize])
	if err != nil {
		return h, nil, 0, fmt.Errorf("generic tile: %w", err)
	}
	if uint64(len(payload)) != h.TileSize {
		return h, nil, 0, fmt.Errorf("%w: generic tile: unfiltered %d bytes, header says %d", wire.ErrCorrupt, len(payload), h.TileSize)
	}
	return h, payload, h.Size + int(h.PersistedSize), nil
}

// DecodeAll decodes a file made of consecutive generic tiles (array
// metadata and some commit files are written that way) and returns the
// concatenated payloads.
func DecodeAll(b []byte, u Unfilterer) ([][]byte, error) {
	var out [][]byte
	for off := 0; off < len(b); {
		_, p, n, err := Decode(b[off:], u)
		if err != nil {
			return nil, fmt.Errorf("tile at byte %d: %w", off, err)
		}
		out = append(out, p)
		off += n
	}
	return out, nil
}

// Encode writes payload as a generic tile the way TileDB does: CHAR data,
// cell size 1, no encryption, a gzip level 1 pipeline. The version is the
// array format version to record.
func Encode(payload []byte, version uint32, f Filterer) ([]byte, error) {
	h := Header{
		Version:  version,
		TileSize: uint64(len(payload)),
		Datatype: datatype.Char,
		CellSize: 1,
		Filters: pipeline.Pipeline{
			MaxChunkSize: pipeline.DefaultMaxChunkSize,
			Filters: []pipeline.Filter{{
				Type: pipeline.Gzip, Compressor: pipeline.CompGzip, Level: 1, Reinterpret: datatype.Any,
			}},
		},
	}
	if f == nil {
		f = Plain{}
	}
	body, err := f.FilterTile(&h, payload)
	if err != nil {
		return nil, err
	}
	h.PersistedSize = uint64(len(body))
	pw := wire.NewWriter(nil)
	pipeline.Encode(pw, h.Filters, version)
	w := wire.NewWriter(make([]byte, 0, BaseHeaderSize+pw.Len()+len(body)))
	w.Uint32(h.Version)
	w.Uint64(h.PersistedSize)
	w.Uint64(h.TileSize)
	w.Uint8(uint8(h.Datatype))
	w.Uint64(h.CellSize)
	w.Uint8(h.EncryptionType)
	w.Uint32(uint32(pw.Len()))
	w.Write(pw.Bytes())
	w.Write(body)
	return w.Bytes(), nil
}

// EncryptionAES256GCM is the header's encryption type of an encrypted
// tile (0 is none).
const EncryptionAES256GCM = 1

// ErrKeyRequired is wrapped when an encrypted tile is decoded without a
// key. It is of kind FailedPrecondition: the file is fine, and the fix is
// the operator's (configure the array's key), not the client's.
var ErrKeyRequired error = errkind.New(errkind.FailedPrecondition, errkind.Plain, "the array is encrypted (AES-256-GCM) and no key was given")
