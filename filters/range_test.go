package filters

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/tileflight/tileflight/format/datatype"
	"github.com/tileflight/tileflight/format/pipeline"
)

// UnfilterRange decodes exactly the chunks overlapping the range asked
// for when they are at most half of the tile's, the whole tile otherwise,
// and the bytes it says it decoded are the tile's, for filtered and plain
// pipelines.
func TestUnfilterRange(t *testing.T) {
	const size = 20*MaxChunkSize + 8*100 // 21 chunks, the last one short
	tile := ints(size)
	for _, pc := range []struct {
		name string
		p    pipeline.Pipeline
	}{
		{"zstd", pipe(pipeline.Zstd)},
		{"lz4", pipe(pipeline.LZ4)},
		{"byteshuffle+zstd", pipe(pipeline.Byteshuffle, pipeline.Zstd)},
		{"none", pipe()},
	} {
		p, err := New(pc.p, datatype.Int64, 1, 22, Options{})
		if err != nil {
			t.Fatal(err)
		}
		filtered, err := p.FilterTile(tile)
		if err != nil {
			t.Fatal(err)
		}
		const K = MaxChunkSize
		for _, c := range []struct {
			lo, hi, a, b uint64
			decoded      int
		}{
			{0, 8, 0, K, 1},                      // first cell
			{K - 8, K + 8, 0, 2 * K, 2},          // straddles a boundary
			{K, 2 * K, K, 2 * K, 1},              // exactly one chunk
			{size - 8, size, 20 * K, size, 1},    // last cell, in the short chunk
			{3*K + 5, 13 * K, 3 * K, 13 * K, 10}, // 10 of 21: partial
			{3 * K, 14*K + 1, 0, size, 21},       // 11 of 21: whole
			{0, size, 0, size, 21},               // everything
		} {
			name := fmt.Sprintf("%s [%d, %d)", pc.name, c.lo, c.hi)
			in := append([]byte(nil), filtered...) // UnfilterRange owns its input
			data, a, b, chunks, decoded, err := p.UnfilterRange(in, size, c.lo, c.hi)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if len(data) != size || chunks != 21 || decoded != c.decoded || a != c.a || b != c.b {
				t.Fatalf("%s: %d bytes, [%d, %d) decoded, %d of %d chunks; want %d, [%d, %d), %d of 21",
					name, len(data), a, b, decoded, chunks, size, c.a, c.b, c.decoded)
			}
			if !bytes.Equal(data[a:b], tile[a:b]) {
				t.Fatalf("%s: decoded bytes differ from the tile's", name)
			}
		}
		// A corrupt tile is an error, not a panic or a short buffer.
		if _, _, _, _, _, err := p.UnfilterRange(filtered[:len(filtered)/2], size, 0, 8); err == nil {
			t.Errorf("%s: truncated tile: no error", pc.name)
		}
	}
}

// FuzzUnfilterRange: on any serialized tile and range, UnfilterRange
// returns an error or a range covering [lo, hi) (clipped to the tile)
// whose bytes are the whole decode's whenever that succeeds (a corrupt
// chunk outside the range is never decoded); it never panics. The tiles
// are real multi-chunk tiles (a fuzzed pattern, filtered by an LZ4 or an
// empty pipeline) with fuzzed byte edits and a fuzzed truncation, so
// that inputs stay small and executions cheap.
// fuzzedTile filters a tile of size bytes repeating pattern through p,
// then applies edits (triples: position / 256, position % 256, xor) and
// cuts cut bytes off the end (modulo the length).
func fuzzedTile(t *testing.T, p *Pipeline, size int, pattern, edits []byte, cut uint32) []byte {
	if len(pattern) == 0 {
		pattern = []byte{0}
	}
	tile := bytes.Repeat(pattern, size/len(pattern)+1)[:size]
	filtered, err := p.FilterTile(tile)
	if err != nil {
		t.Fatal(err)
	}
	for k := 0; k+2 < len(edits); k += 3 {
		pos := (int(edits[k])<<8 | int(edits[k+1])) * len(filtered) >> 16
		filtered[pos] ^= edits[k+2]
	}
	return filtered[:len(filtered)-int(cut)%(len(filtered)+1)]
}

func FuzzUnfilterRange(f *testing.F) {
	const size = 3*MaxChunkSize + 8*10
	pipes := []pipeline.Pipeline{pipe(pipeline.LZ4), pipe()}
	f.Add(uint8(0), []byte{1, 2, 3}, []byte{}, uint32(0), uint64(8), uint64(16))
	f.Add(uint8(1), []byte{7}, []byte{0, 40, 9}, uint32(0), uint64(MaxChunkSize-8), uint64(MaxChunkSize+8))
	f.Add(uint8(0), []byte{5, 6}, []byte{1, 0, 0, 2, 0, 0}, uint32(100), uint64(2*MaxChunkSize), uint64(size))
	f.Fuzz(func(t *testing.T, which uint8, pattern, edits []byte, cut uint32, lo, hi uint64) {
		p, err := New(pipes[int(which)%len(pipes)], datatype.Int64, 1, 22, Options{})
		if err != nil {
			t.Fatal(err)
		}
		filtered := fuzzedTile(t, p, size, pattern, edits, cut)
		lo, hi = lo%(size+8), hi%(size+8)
		data, a, b, _, _, err := p.UnfilterRange(bytes.Clone(filtered), size, lo, hi)
		if err != nil {
			return
		}
		if len(data) != size || a > b || b > size || (lo < min(hi, size) && (a > lo || b < min(hi, size))) {
			t.Fatalf("range [%d, %d): %d bytes, decoded [%d, %d)", lo, hi, len(data), a, b)
		}
		whole, err := p.UnfilterOwned(bytes.Clone(filtered), size)
		if err != nil {
			// A chunk outside the range may be corrupt: the range never
			// decodes it, and its cells are not read.
			return
		}
		if !bytes.Equal(data[a:b], whole[a:b]) {
			t.Fatalf("range [%d, %d): decoded bytes differ from the whole decode", lo, hi)
		}
	})
}
