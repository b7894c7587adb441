package filters

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"testing"

	"github.com/tileflight/tileflight/format/datatype"
	"github.com/tileflight/tileflight/format/pipeline"
)

var zstdC, _ = pipeline.CompressorFor(pipeline.Zstd)

// cutAt splits data at the byte offsets cuts (increasing, clamped).
func cutAt(data []byte, cuts []int) [][]byte {
	var parts [][]byte
	lo := 0
	for _, c := range cuts {
		c = min(max(c, lo), len(data))
		parts = append(parts, data[lo:c])
		lo = c
	}
	return append(parts, data[lo:])
}

// TestFilterTileParts: a tile given in pieces filters to exactly the
// bytes of the whole tile, whether the cuts fall on chunk boundaries,
// inside chunks, leave empty pieces or are absent, for chunked,
// unchunked, multi-stage and parallel pipelines.
func TestFilterTileParts(t *testing.T) {
	const cells = 40000 // 320 000 bytes of int64: 5 chunks
	data := make([]byte, 8*cells)
	for i := 0; i < cells; i++ {
		binary.LittleEndian.PutUint64(data[8*i:], uint64(i*i%977))
	}
	pipes := map[string]pipeline.Pipeline{
		"none":         {MaxChunkSize: MaxChunkSize},
		"zstd":         one(pipeline.Zstd, 1, datatype.Any),
		"lz4":          one(pipeline.LZ4, 0, datatype.Any),
		"unchunked":    {MaxChunkSize: 0, Filters: []pipeline.Filter{{Type: pipeline.Zstd, Compressor: zstdC, Level: 1, Reinterpret: datatype.Any}}},
		"shuffle+zstd": {MaxChunkSize: MaxChunkSize, Filters: []pipeline.Filter{{Type: pipeline.Byteshuffle, Reinterpret: datatype.Any}, {Type: pipeline.Zstd, Compressor: zstdC, Level: 1, Reinterpret: datatype.Any}}},
		"md5":          {MaxChunkSize: MaxChunkSize, Filters: []pipeline.Filter{{Type: pipeline.ChecksumMD5, Reinterpret: datatype.Any}}},
	}
	cutSets := [][]int{
		nil,
		{MaxChunkSize, 2 * MaxChunkSize},
		{1, 8 * 1000, 8 * 10001, 8 * 10001, 8 * 39999},
		{0, 0, len(data)},
		{MaxChunkSize - 8, MaxChunkSize + 8},
	}
	for name, pl := range pipes {
		for _, conc := range []int{1, 3} {
			p, err := New(pl, datatype.Int64, 1, 22, Options{Concurrency: conc})
			if err != nil {
				t.Fatal(err)
			}
			for _, size := range []int{0, 8, 8 * 1000, len(data)} {
				want, err := p.FilterTile(data[:size])
				if err != nil {
					t.Fatal(err)
				}
				for _, cuts := range cutSets {
					t.Run(fmt.Sprintf("%s/conc%d/%d/%v", name, conc, size, cuts), func(t *testing.T) {
						parts := cutAt(data[:size], cuts)
						got, err := p.FilterTileParts(parts)
						if err != nil {
							t.Fatal(err)
						}
						if !bytes.Equal(got, want) {
							t.Fatalf("%d bytes, want the whole tile's %d", len(got), len(want))
						}
						back := make([]byte, size)
						if _, err := p.UnfilterTile(back, got); err != nil || !bytes.Equal(back, data[:size]) {
							t.Fatalf("does not unfilter back: %v", err)
						}
					})
				}
			}
		}
	}
}

// FuzzFilterTileParts cuts a tile anywhere: the pieces filter to the
// whole tile's bytes. The tile is pattern repeated to size bytes (up to
// five chunks), so that small inputs reach multi-chunk tiles.
func FuzzFilterTileParts(f *testing.F) {
	f.Add([]byte{1, 2, 3, 4, 5, 6, 7, 8}, uint32(160000), []byte{200, 7, 0, 255})
	f.Add([]byte{}, uint32(0), []byte{0})
	f.Add([]byte{9}, uint32(MaxChunkSize), []byte{1, 1})
	// lz4 keeps executions cheap: what is fuzzed is where the cuts fall.
	p, err := New(one(pipeline.LZ4, 0, datatype.Any), datatype.Uint8, 1, 22, Options{Concurrency: 1})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, pattern []byte, size uint32, cutBytes []byte) {
		if len(cutBytes) > 32 {
			return
		}
		n := int(size % (5*MaxChunkSize + 1))
		if len(pattern) == 0 {
			n = 0
		}
		data := make([]byte, n)
		for i := range data {
			data[i] = pattern[i%len(pattern)] + byte(i/len(pattern))
		}
		var cuts []int
		c := 0
		for _, b := range cutBytes {
			c += int(b) * 997 % (n + 1)
			cuts = append(cuts, c)
		}
		want, err := p.FilterTile(data)
		if err != nil {
			t.Fatal(err)
		}
		got, err := p.FilterTileParts(cutAt(data, cuts))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatal("pieces filter differently from the whole tile")
		}
	})
}
