package filters

import (
	"fmt"
	"runtime"

	"github.com/klauspost/compress/zstd"

	"github.com/tileflight/tileflight/format/pipeline"
	"github.com/tileflight/tileflight/format/wire"
)

// ZstdChunk is one chunk of a tile whose pipeline is zstd alone: the zstd
// frames the compression filter wrote for it, left compressed, and the
// number of bytes they decompress to.
type ZstdChunk struct {
	Orig   uint64
	Frames [][]byte
	Sizes  []uint64 // the bytes each frame decompresses to
}

// ZstdOnly reports whether the pipeline is zstd and nothing else (no
// other filter, no encryption), on chunked fixed-size tiles: tiles
// ZstdChunks can take apart.
func (p *Pipeline) ZstdOnly() bool {
	return len(p.filters) == 1 && p.filters[0].Type == pipeline.Zstd && p.chunking && !p.strings
}

// ZstdChunks returns the chunks of a serialized fixed-size tile of size
// unfiltered bytes, when the pipeline is zstd alone (ok false otherwise,
// with nothing parsed), without decompressing anything: the frames alias
// filtered. What can be checked without decoding is: the chunk framing,
// the compression filter's part table, and the content size each frame
// declares (TileDB's frames carry it); a frame whose contents are corrupt
// is only found by whoever decompresses it.
func (p *Pipeline) ZstdChunks(filtered []byte, size uint64) (chunks []ZstdChunk, ok bool, err error) {
	if !p.ZstdOnly() {
		return nil, false, nil
	}
	raw, err := parseChunks(filtered, size)
	if err != nil {
		return nil, false, err
	}
	chunks = make([]ZstdChunk, len(raw))
	for i, c := range raw {
		frames, sizes, err := zstdParts(c)
		if err != nil {
			return nil, false, fmt.Errorf("chunk %d of %d: %w", i, len(raw), err)
		}
		chunks[i] = ZstdChunk{Orig: uint64(c.orig), Frames: frames, Sizes: sizes}
	}
	return chunks, true, nil
}

// zstdParts splits one chunk's data into the compressed parts the
// compression filter's metadata lists (one per input part; zstd alone
// has no metadata parts).
func zstdParts(c chunk) (parts [][]byte, sizes []uint64, err error) {
	r := wire.NewReader(c.meta)
	nm := r.Uint32("compression: metadata parts")
	nd := r.Uint32("compression: data parts")
	if r.Err() != nil {
		return nil, nil, r.Err()
	}
	if nm != 0 {
		return nil, nil, fmt.Errorf("%w: zstd as the first filter with %d metadata parts", wire.ErrCorrupt, nm)
	}
	if !r.CheckCount(uint64(nd), 8, "compression: part lengths") {
		return nil, nil, r.Err()
	}
	parts = make([][]byte, 0, nd)
	sizes = make([]uint64, 0, nd)
	var orig, off uint64
	for i := uint32(0); i < nd; i++ {
		po := uint64(r.Uint32("part original length"))
		pc := uint64(r.Uint32("part compressed length"))
		if r.Err() != nil {
			return nil, nil, r.Err()
		}
		if pc > uint64(len(c.data))-off {
			return nil, nil, fmt.Errorf("%w: compressed parts hold more than the chunk's %d bytes", wire.ErrTruncated, len(c.data))
		}
		part := c.data[off : off+pc]
		if pc == 0 {
			if po != 0 {
				return nil, nil, fmt.Errorf("%w: part %d: no compressed bytes for %d bytes", wire.ErrCorrupt, i, po)
			}
			continue
		}
		var h zstd.Header
		if err := h.Decode(part); err != nil {
			return nil, nil, fmt.Errorf("%w: part %d: zstd frame header: %v", wire.ErrCorrupt, i, err)
		}
		if h.HasFCS && h.FrameContentSize != po {
			return nil, nil, fmt.Errorf("%w: part %d: the zstd frame holds %d bytes, the part %d", wire.ErrCorrupt, i, h.FrameContentSize, po)
		}
		if po > 0 {
			parts = append(parts, part)
			sizes = append(sizes, po)
		}
		orig += po
		off += pc
	}
	if orig != uint64(c.orig) {
		return nil, nil, fmt.Errorf("%w: zstd parts hold %d bytes, the chunk %d", wire.ErrCorrupt, orig, c.orig)
	}
	return parts, sizes, nil
}

// DecodeZstdFrames decompresses frames, zstd frames of sizes[i] bytes
// each, back to back into dst, which must be exactly their total; frames
// of a large dst decompress on every core.
func DecodeZstdFrames(frames [][]byte, sizes []uint64, dst []byte) error {
	if len(frames) != len(sizes) {
		return fmt.Errorf("%d zstd frames with %d sizes", len(frames), len(sizes))
	}
	offs := make([]uint64, len(frames)+1)
	for i, n := range sizes {
		if n > uint64(len(dst))-offs[i] {
			return fmt.Errorf("%w: frame %d holds %d bytes, %d are left", wire.ErrCorrupt, i, n, uint64(len(dst))-offs[i])
		}
		offs[i+1] = offs[i] + n
	}
	if offs[len(frames)] != uint64(len(dst)) {
		return fmt.Errorf("%w: frames hold %d bytes, want %d", wire.ErrCorrupt, offs[len(frames)], len(dst))
	}
	conc := 1
	if len(dst) >= parallelMin {
		conc = runtime.GOMAXPROCS(0)
	}
	return parallel(len(frames), conc, func(i int) error {
		// Each frame gets exactly its own space: the decoder may write past
		// the end of what it decodes when the slice has room.
		if err := (zstdCodec{}).decompress(dst[offs[i]:offs[i+1]:offs[i+1]], frames[i]); err != nil {
			return fmt.Errorf("frame %d: %w", i, err)
		}
		return nil
	})
}
