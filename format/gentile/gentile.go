// Package gentile owns TileDB's generic tile: a self-describing tile with a
// header (version, sizes, datatype, cell size, encryption type, filter
// pipeline) used for schemas, fragment metadata sections, commit files and
// array metadata.
//
// The header and the chunked tile framing are decoded here. Unfiltering the
// chunk bytes is delegated to an Unfilterer so that this package stays
// below the filters package; DefaultUnfilterer handles what TileDB writes
// for generic tiles (gzip level 1, or no filters).
package gentile

import (
	"bytes"
	"fmt"
	"io"

	"github.com/klauspost/compress/zlib"

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
// serialized tile (num chunks + chunks).
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
		u = DefaultUnfilterer
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
		f = DefaultUnfilterer
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

const maxDeflateRatio = 1100

// DefaultUnfilterer handles generic tiles with no filters or with a single
// gzip filter and no encryption: what TileDB writes for unencrypted arrays.
// Package filters provides the complete implementation.
var DefaultUnfilterer = basicCodec{}

type basicCodec struct{}

func (basicCodec) check(h *Header) (gzip bool, err error) {
	if h.EncryptionType != 0 {
		return false, fmt.Errorf("encrypted generic tiles need the filters package")
	}
	switch {
	case len(h.Filters.Filters) == 0:
		return false, nil
	case len(h.Filters.Filters) == 1 && h.Filters.Filters[0].Type == pipeline.Gzip:
		return true, nil
	}
	return false, fmt.Errorf("generic tile pipeline %v needs the filters package", h.Filters.Filters)
}

func (c basicCodec) UnfilterTile(h *Header, b []byte) ([]byte, error) {
	gz, err := c.check(h)
	if err != nil {
		return nil, err
	}
	r := wire.NewReader(b)
	nchunks := r.Count(8, 12, "number of chunks")
	if r.Err() != nil {
		return nil, r.Err()
	}
	// Deflate cannot expand data by more than about 1032:1, so a tile size
	// beyond that bound is corrupt; checking it first keeps a forged header
	// from driving a huge allocation.
	if h.TileSize > uint64(len(b))*maxDeflateRatio+pipeline.DefaultMaxChunkSize {
		return nil, fmt.Errorf("%w: tile size %d is impossible for %d filtered bytes", wire.ErrCorrupt, h.TileSize, len(b))
	}
	out := make([]byte, 0, h.TileSize)
	for i := 0; i < nchunks; i++ {
		orig := r.Uint32("chunk original length")
		flen := r.Uint32("chunk filtered length")
		mlen := r.Uint32("chunk metadata length")
		meta := r.BytesU64(uint64(mlen), "chunk metadata")
		data := r.BytesU64(uint64(flen), "chunk data")
		if r.Err() != nil {
			return nil, fmt.Errorf("chunk %d: %w", i, r.Err())
		}
		if !gz {
			if uint64(len(out))+uint64(len(data)) > h.TileSize {
				return nil, fmt.Errorf("%w: chunk %d: chunks exceed the tile size %d", wire.ErrCorrupt, i, h.TileSize)
			}
			if len(meta) != 0 || orig != flen {
				return nil, fmt.Errorf("%w: chunk %d: unfiltered chunk with metadata or size mismatch", wire.ErrCorrupt, i)
			}
			out = append(out, data...)
			continue
		}
		mr := wire.NewReader(meta)
		nmeta := mr.Uint32("gzip: metadata parts")
		ndata := mr.Uint32("gzip: data parts")
		if mr.Err() != nil || nmeta != 0 {
			return nil, fmt.Errorf("%w: chunk %d: unexpected gzip metadata parts", wire.ErrCorrupt, i)
		}
		if !mr.CheckCount(uint64(ndata), 8, "gzip: data parts") {
			return nil, fmt.Errorf("chunk %d: %w", i, mr.Err())
		}
		dr := wire.NewReader(data)
		for p := uint32(0); p < ndata; p++ {
			plen := mr.Uint32("gzip part original length")
			clen := mr.Uint32("gzip part compressed length")
			cb := dr.BytesU64(uint64(clen), "gzip part")
			if mr.Err() != nil || dr.Err() != nil {
				return nil, fmt.Errorf("chunk %d: %w", i, firstErr(mr.Err(), dr.Err()))
			}
			zr, err := zlib.NewReader(bytes.NewReader(cb))
			if err != nil {
				return nil, fmt.Errorf("chunk %d: zlib: %w", i, err)
			}
			if uint64(len(out))+uint64(plen) > h.TileSize {
				return nil, fmt.Errorf("%w: chunk %d: parts exceed the tile size %d", wire.ErrCorrupt, i, h.TileSize)
			}
			start := len(out)
			out = append(out, make([]byte, plen)...)
			if _, err := io.ReadFull(zr, out[start:]); err != nil {
				return nil, fmt.Errorf("chunk %d: zlib: %w", i, err)
			}
		}
		_ = orig
	}
	return out, nil
}

func (c basicCodec) FilterTile(h *Header, data []byte) ([]byte, error) {
	gz, err := c.check(h)
	if err != nil {
		return nil, err
	}
	const chunk = pipeline.DefaultMaxChunkSize
	w := wire.NewWriter(nil)
	n := (len(data) + chunk - 1) / chunk
	w.Uint64(uint64(n))
	for i := 0; i < n; i++ {
		part := data[i*chunk : min(len(data), (i+1)*chunk)]
		if !gz {
			w.Uint32(uint32(len(part)))
			w.Uint32(uint32(len(part)))
			w.Uint32(0)
			w.Write(part)
			continue
		}
		var buf bytes.Buffer
		zw, _ := zlib.NewWriterLevel(&buf, int(h.Filters.Filters[0].Level))
		zw.Write(part)
		zw.Close()
		w.Uint32(uint32(len(part)))
		w.Uint32(uint32(buf.Len()))
		w.Uint32(16)
		w.Uint32(0)
		w.Uint32(1)
		w.Uint32(uint32(len(part)))
		w.Uint32(uint32(buf.Len()))
		w.Write(buf.Bytes())
	}
	return w.Bytes(), nil
}

func firstErr(errs ...error) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}
