package gentile

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"

	"github.com/klauspost/compress/zlib"

	"github.com/tileflight/tileflight/errkind"
	"github.com/tileflight/tileflight/format/pipeline"
	"github.com/tileflight/tileflight/format/wire"
)

// Plain is the Unfilterer and Filterer of the generic tiles TileDB writes
// for unencrypted arrays: a pipeline of one gzip filter (TileDB's "gzip"
// is a zlib stream), or none, over 64 KiB chunks. It is what Decode and
// Encode use without one. Other pipelines and encrypted tiles need the
// complete runner, filters.GenericTileCodec: Plain reports them
// Unimplemented (encrypted: ErrKeyRequired) rather than guessing.
type Plain struct{}

// maxDeflateRatio bounds how much deflate can expand (about 1032:1): a
// header claiming more for a gzip-only tile is corrupt.
const maxDeflateRatio = 1100

// MaxGzipTile is the largest payload n filtered bytes of a gzip-only
// generic tile can hold.
func MaxGzipTile(n int) uint64 {
	return uint64(n)*maxDeflateRatio + pipeline.DefaultMaxChunkSize
}

// check says whether h's pipeline is gzip (or none), and refuses the
// pipelines Plain does not run.
func (Plain) check(h *Header) (gzip bool, err error) {
	if !h.Datatype.Valid() {
		return false, fmt.Errorf("%w: generic tile header: datatype %d", wire.ErrCorrupt, uint8(h.Datatype))
	}
	if h.EncryptionType != 0 {
		return false, fmt.Errorf("encrypted generic tile (encryption type %d): %w", h.EncryptionType, ErrKeyRequired)
	}
	switch {
	case h.Filters.Empty():
		return false, nil
	case len(h.Filters.Filters) == 1 && h.Filters.Filters[0].Type == pipeline.Gzip:
		if l := h.Filters.Filters[0].Level; l > 9 {
			return false, fmt.Errorf("%w: generic tile header: gzip level %d (0..9)", wire.ErrCorrupt, l)
		}
		return true, nil
	}
	if h.Filters.Has(pipeline.AES256GCM) {
		return false, fmt.Errorf("%w: unencrypted generic tile with an encryption filter", wire.ErrCorrupt)
	}
	return false, errkind.Errorf(errkind.Unimplemented, "generic tile with filter pipeline %v: decode it with filters.GenericTileCodec", h.Filters.Filters)
}

// UnfilterTile implements Unfilterer.
func (p Plain) UnfilterTile(h *Header, b []byte) ([]byte, error) {
	gz, err := p.check(h)
	if err != nil {
		return nil, err
	}
	limit := uint64(len(b))
	if gz {
		limit = MaxGzipTile(len(b))
	}
	if h.TileSize > limit {
		return nil, fmt.Errorf("%w: tile size %d is impossible for %d filtered bytes", wire.ErrCorrupt, h.TileSize, len(b))
	}
	out := make([]byte, 0, h.TileSize)
	r := wire.NewReader(b)
	n := r.Count(8, 12, "generic tile: number of chunks")
	for i := 0; i < n && r.Err() == nil; i++ {
		orig := r.Uint32("chunk original length")
		flen := r.Uint32("chunk filtered length")
		mlen := r.Uint32("chunk metadata length")
		meta := r.BytesU64(uint64(mlen), "chunk metadata")
		data := r.BytesU64(uint64(flen), "chunk data")
		if r.Err() != nil {
			break
		}
		if uint64(len(out))+uint64(orig) > h.TileSize {
			return nil, fmt.Errorf("%w: chunk %d of %d: chunks hold more than the tile's %d bytes", wire.ErrCorrupt, i, n, h.TileSize)
		}
		if !gz {
			if mlen != 0 || flen != orig {
				return nil, fmt.Errorf("%w: chunk %d of %d: unfiltered chunk of %d bytes (+%d metadata) for %d", wire.ErrCorrupt, i, n, flen, mlen, orig)
			}
			out = append(out, data...)
			continue
		}
		if out, err = gunzipChunk(out, meta, data, orig); err != nil {
			return nil, fmt.Errorf("chunk %d of %d: %w", i, n, err)
		}
	}
	if err := r.Err(); err != nil {
		return nil, err
	}
	if uint64(len(out)) != h.TileSize {
		return nil, fmt.Errorf("%w: chunks hold %d bytes, the tile %d", wire.ErrCorrupt, len(out), h.TileSize)
	}
	return out, nil
}

// gunzipChunk reads one chunk of TileDB's compression filter: metadata
// "number of metadata parts, number of data parts, then (original,
// compressed) lengths per part"; a generic tile's chunk has one data part.
func gunzipChunk(out, meta, data []byte, orig uint32) ([]byte, error) {
	r := wire.NewReader(meta)
	nm := r.Uint32("gzip: metadata parts")
	nd := r.Uint32("gzip: data parts")
	po := r.Uint32("gzip: part original length")
	pc := r.Uint32("gzip: part compressed length")
	if err := r.Err(); err != nil {
		return nil, err
	}
	if nm != 0 || nd != 1 || r.Len() != 0 || po != orig || uint64(pc) != uint64(len(data)) {
		return nil, fmt.Errorf("%w: gzip chunk: %d metadata and %d data parts of %d (%d compressed) bytes, want one part of %d (%d)",
			wire.ErrCorrupt, nm, nd, po, pc, orig, len(data))
	}
	zr, err := zlib.NewReader(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("%w: zlib: %v", wire.ErrCorrupt, err)
	}
	start := len(out)
	out = append(out, make([]byte, orig)...)
	if _, err := io.ReadFull(zr, out[start:]); err != nil {
		return nil, fmt.Errorf("%w: zlib: %v", wire.ErrCorrupt, err)
	}
	// The stream must end here, its checksum verified.
	var one [1]byte
	if n, err := zr.Read(one[:]); n != 0 || err != io.EOF {
		return nil, fmt.Errorf("%w: zlib: the stream holds more than the chunk's %d bytes or its checksum fails", wire.ErrCorrupt, orig)
	}
	return out, nil
}

// FilterTile implements Filterer: the payload in 64 KiB chunks, each
// compressed on its own when the pipeline is gzip (as TileDB frames it).
func (p Plain) FilterTile(h *Header, data []byte) ([]byte, error) {
	gz, err := p.check(h)
	if err != nil {
		return nil, err
	}
	level := -1
	if gz {
		level = int(h.Filters.Filters[0].Level)
		if level < 0 {
			level = zlib.DefaultCompression
		}
	}
	cs := len(data)
	if h.Filters.MaxChunkSize != 0 {
		cs = min(pipeline.DefaultMaxChunkSize, len(data))
	}
	var bounds []int
	switch {
	case len(data) == 0 && h.Filters.MaxChunkSize != 0:
		bounds = []int{0} // zero chunks, as TileDB frames an empty chunked tile
	case len(data) == cs:
		bounds = []int{0, len(data)}
	default:
		for o := 0; o < len(data); o += cs {
			bounds = append(bounds, o)
		}
		bounds = append(bounds, len(data))
	}
	out := binary.LittleEndian.AppendUint64(nil, uint64(len(bounds)-1))
	for i := 0; i+1 < len(bounds); i++ {
		chunk := data[bounds[i]:bounds[i+1]]
		if !gz {
			out = binary.LittleEndian.AppendUint32(out, uint32(len(chunk)))
			out = binary.LittleEndian.AppendUint32(out, uint32(len(chunk)))
			out = binary.LittleEndian.AppendUint32(out, 0)
			out = append(out, chunk...)
			continue
		}
		var buf bytes.Buffer
		zw, err := getZlib(&buf, level)
		if err != nil {
			return nil, err
		}
		if _, err := zw.Write(chunk); err != nil {
			return nil, err
		}
		if err := zw.Close(); err != nil {
			return nil, err
		}
		putZlib(zw, level)
		meta := binary.LittleEndian.AppendUint32(nil, 0)
		meta = binary.LittleEndian.AppendUint32(meta, 1)
		meta = binary.LittleEndian.AppendUint32(meta, uint32(len(chunk)))
		meta = binary.LittleEndian.AppendUint32(meta, uint32(buf.Len()))
		out = binary.LittleEndian.AppendUint32(out, uint32(len(chunk)))
		out = binary.LittleEndian.AppendUint32(out, uint32(buf.Len()))
		out = binary.LittleEndian.AppendUint32(out, uint32(len(meta)))
		out = append(out, meta...)
		out = append(out, buf.Bytes()...)
	}
	return out, nil
}

// zlibFree keeps a few idle zlib writers per level (index level+1): one
// is about a megabyte to build, and fragment metadata compresses a dozen
// generic tiles per fragment. A free list rather than a sync.Pool, which
// every garbage collection empties (a large write collects often).
var zlibFree [11]chan *zlib.Writer

func init() {
	for i := range zlibFree {
		zlibFree[i] = make(chan *zlib.Writer, 2)
	}
}

func getZlib(w io.Writer, level int) (*zlib.Writer, error) {
	if level >= -1 && level <= 9 {
		select {
		case zw := <-zlibFree[level+1]:
			zw.Reset(w)
			return zw, nil
		default:
		}
	}
	return zlib.NewWriterLevel(w, level)
}

func putZlib(zw *zlib.Writer, level int) {
	if level >= -1 && level <= 9 {
		select {
		case zlibFree[level+1] <- zw:
		default:
		}
	}
}
