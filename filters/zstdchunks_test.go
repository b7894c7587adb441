package filters

import (
	"bytes"
	"errors"
	"testing"

	"github.com/tileflight/tileflight/format/datatype"
	"github.com/tileflight/tileflight/format/pipeline"
	"github.com/tileflight/tileflight/format/wire"
)

// ZstdChunks takes apart exactly the zstd-only pipelines, and the frames
// it returns decode to the tile; corrupt framing is an error.
func TestZstdChunks(t *testing.T) {
	const size = 5*MaxChunkSize + 8*100
	tile := ints(size)
	for _, c := range []struct {
		name string
		p    pipeline.Pipeline
		key  []byte
		ok   bool
	}{
		{"zstd", pipe(pipeline.Zstd), nil, true},
		{"lz4", pipe(pipeline.LZ4), nil, false},
		{"byteshuffle+zstd", pipe(pipeline.Byteshuffle, pipeline.Zstd), nil, false},
		{"zstd+md5", pipe(pipeline.Zstd, pipeline.ChecksumMD5), nil, false},
		{"none", pipe(), nil, false},
		{"zstd, encrypted", pipe(pipeline.Zstd), bytes.Repeat([]byte{7}, 32), false},
	} {
		t.Run(c.name, func(t *testing.T) {
			p, err := New(c.p, datatype.Int64, 1, 22, Options{EncryptionKey: c.key})
			if err != nil {
				t.Fatal(err)
			}
			filtered, err := p.FilterTile(tile)
			if err != nil {
				t.Fatal(err)
			}
			chunks, ok, err := p.ZstdChunks(filtered, size)
			if err != nil || ok != c.ok || p.ZstdOnly() != c.ok {
				t.Fatalf("ok %v (ZstdOnly %v), err %v; want ok %v", ok, p.ZstdOnly(), err, c.ok)
			}
			if !ok {
				return
			}
			if len(chunks) != 6 {
				t.Fatalf("%d chunks, want 6", len(chunks))
			}
			var frames [][]byte
			var sizes []uint64
			var total uint64
			for _, ch := range chunks {
				frames, sizes = append(frames, ch.Frames...), append(sizes, ch.Sizes...)
				total += ch.Orig
			}
			out := make([]byte, size)
			if total != size {
				t.Fatalf("chunks hold %d bytes", total)
			}
			if err := DecodeZstdFrames(frames, sizes, out); err != nil || !bytes.Equal(out, tile) {
				t.Fatalf("frames decode to other bytes (err %v)", err)
			}
			if _, _, err := p.ZstdChunks(filtered[:len(filtered)-3], size); err == nil {
				t.Fatal("a truncated tile was accepted")
			}
			if _, _, err := p.ZstdChunks(filtered, size+8); err == nil {
				t.Fatal("a tile of the wrong size was accepted")
			}
			if err := DecodeZstdFrames(frames, sizes, out[:size-8]); !errors.Is(err, wire.ErrCorrupt) {
				t.Fatalf("frames into a short buffer: %v", err)
			}
		})
	}
}

// FuzzZstdChunks: a real zstd-only tile of a fuzzed pattern, fuzzed byte
// edits and truncation. ZstdChunks never panics; when it and the frames'
// decoding succeed, the bytes are the whole tile decode's.
func FuzzZstdChunks(f *testing.F) {
	const size = 3*MaxChunkSize + 8*10
	f.Add([]byte{1, 2, 3}, []byte{}, uint32(0))
	f.Add([]byte{7}, []byte{0, 40, 9}, uint32(0))
	f.Add([]byte{5, 6}, []byte{0, 0, 1, 0, 13, 0xff}, uint32(100))
	p, err := New(pipe(pipeline.Zstd), datatype.Int64, 1, 22, Options{})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, pattern, edits []byte, cut uint32) {
		filtered := fuzzedTile(t, p, size, pattern, edits, cut)
		chunks, ok, err := p.ZstdChunks(filtered, size)
		if err != nil || !ok {
			return
		}
		var frames [][]byte
		var sizes []uint64
		for _, ch := range chunks {
			frames, sizes = append(frames, ch.Frames...), append(sizes, ch.Sizes...)
		}
		out := make([]byte, size)
		if DecodeZstdFrames(frames, sizes, out) != nil {
			return
		}
		whole, err := p.UnfilterOwned(bytes.Clone(filtered), size)
		if err != nil {
			t.Fatalf("the frames decode but the tile does not: %v", err)
		}
		if !bytes.Equal(out, whole) {
			t.Fatal("the frames decode to other bytes than the tile")
		}
	})
}
