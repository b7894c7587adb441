package filters

import (
	"github.com/bytedance/gopkg/lang/dirtmake"

	"github.com/tileflight/tileflight/filters/stage"
)

// Tile buffers without zeroing. A decoded tile is written in full before
// anyone reads it, so clearing its memory first is wasted work: for a
// zstd-1 scan the runtime's clearing of 16 MiB tile buffers was about 5%
// of the daemon's CPU, the largest cost after decompression and sending.
// A buffer from allocDirty holds whatever the allocator had, which may be
// another query's data, so it is used only where every byte is
// overwritten whenever unfiltering succeeds (fillsOut), and is dropped
// unread when it fails.

// allocDirty returns a byte slice of length n and capacity c whose
// contents are undefined. Tests replace it with an allocator that poisons
// the memory, to prove that nothing unwritten is ever returned.
var allocDirty = dirtmake.Bytes

// fillsOut reports whether reversing s as the pipeline's first filter
// (the one that writes into the chunk's final place) writes every byte of
// the chunk whenever it succeeds:
//
//   - the general-purpose decompressors write exactly the part lengths
//     they are given, and each is checked to have produced its whole
//     part (zstd and lz4 by the length they return, zlib and bzip2
//     through io.ReadFull); the parts cover the chunk;
//   - a filter that cannot write into the chunk (checksums, encryption,
//     float scaling, WebP...) returns buffers of its own, which the runner
//     copies over the whole chunk after checking their total length.
//
// The filters that do write into the chunk themselves (shuffles, deltas,
// bit width, XOR, RLE, dictionaries) are not relied upon: their tiles are
// decoded into zeroed memory as before.
func fillsOut(s stage.Stage) bool {
	switch s := s.(type) {
	case *compStage:
		switch s.c.(type) {
		case zstdCodec, lz4Codec, gzipCodec, bzip2Codec:
			return true
		}
		return false
	case intoReverser:
		return false
	default:
		return true
	}
}

// tileBuffer returns a buffer of n bytes (capacity c) for a tile the
// pipeline unfilters in full: not zeroed when the pipeline's first filter
// fills its output (see fillsOut).
func (p *Pipeline) tileBuffer(n, c uint64) []byte {
	if p.fills {
		return allocDirty(int(n), int(c))
	}
	return make([]byte, n, c)
}
