package chunk

import (
	"bytes"
	"testing"
)

func seedChunks(f *testing.F) {
	data := make([]byte, 512)
	for i := range data {
		data[i] = byte(i * i / 7)
	}
	for _, codec := range []int{CodecBloscLZ, CodecLZ4, CodecLZ4HC, CodecZlib, CodecZstd} {
		for _, fl := range [][6]uint8{{}, {5: FilterShuffle}, {5: FilterBitshuffle}, {4: FilterDelta, 5: FilterShuffle}, {4: FilterShuffle, 5: FilterBytedelta}} {
			c, err := Encode(Params{Typesize: 4, BlockSize: 128, Codec: codec, CLevel: 5, Filters: fl, SplitMode: AutoSplit}, data)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(c)
		}
	}
	f.Add(Special(Params{Typesize: 8, BlockSize: 64}, SpecialNaN, 256))
	f.Add(Repeat(Params{Typesize: 2, BlockSize: 64}, []byte{1, 2}, 256))
}

// FuzzChunk decodes arbitrary chunks: never a panic, never more memory
// than the header's nbytes (bounded below) and the block scratch.
func FuzzChunk(f *testing.F) {
	seedChunks(f)
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := Parse(b, -1)
		if err != nil {
			return
		}
		defer c.Close()
		if c.NBytes > 1<<20 || c.BlockSize > 1<<20 || c.Validate() != nil {
			return
		}
		out := make([]byte, c.NBytes)
		derr := c.Decode(out)
		// The same blocks decoded by runs (DecodeBlockTo, the direct read
		// path): each block as two runs out of order, which must give what
		// Decode gave when it decodes without error.
		ref := out[:c.BlockLen(0)]
		for i := 0; i < c.NBlocks(); i++ {
			bl := c.BlockLen(i)
			got := make([]byte, bl)
			h := bl / 3
			err := c.DecodeBlockTo(i, c.BlockBytes(i), ref, nil, []Run{{Off: h, Dst: got[h:]}, {Off: 0, Dst: got[:h]}})
			if derr == nil && err != nil {
				t.Fatalf("block %d: Decode succeeded, DecodeBlockTo: %v", i, err)
			}
			if derr == nil && !bytes.Equal(got, out[i*c.BlockSize:i*c.BlockSize+bl]) {
				t.Fatalf("block %d: DecodeBlockTo differs from Decode", i)
			}
		}
	})
}

// FuzzBloscLZ decodes arbitrary streams and round-trips the input.
func FuzzBloscLZ(f *testing.F) {
	f.Add([]byte("hello hello hello hello hello hello"))
	f.Add(bytes.Repeat([]byte{7}, 300))
	f.Fuzz(func(t *testing.T, b []byte) {
		dst := make([]byte, 4*len(b)+64)
		_, _ = BloscLZDecompress(b, dst)
		enc := make([]byte, len(b)+64)
		n := BloscLZCompress(b, enc)
		if n == 0 {
			return
		}
		back := make([]byte, len(b))
		m, err := BloscLZDecompress(enc[:n], back)
		if err != nil || m != len(b) || !bytes.Equal(back, b) {
			t.Fatalf("round trip of %d bytes: %d, %v", len(b), m, err)
		}
	})
}

// FuzzFilters round-trips every filter on arbitrary blocks.
func FuzzFilters(f *testing.F) {
	f.Add([]byte("0123456789abcdefghijklmnopqrstuvwxyz"), uint8(4))
	f.Fuzz(func(t *testing.T, b []byte, ts uint8) {
		if ts == 0 || len(b) == 0 {
			return
		}
		t1, t2 := make([]byte, len(b)), make([]byte, len(b))
		Shuffle(int(ts), b, t1)
		Unshuffle(int(ts), t1, t2)
		if !bytes.Equal(t2, b) {
			t.Fatal("shuffle")
		}
		// Any byte range of the planes' block, unshuffled to its own
		// buffer, is that range of the block.
		if n := len(b) / int(ts); n > 0 {
			planes := make([][]byte, ts)
			for j := range planes {
				planes[j] = t1[j*n : (j+1)*n]
			}
			a, e := int(b[0])%(n*int(ts)), n*int(ts)-int(b[len(b)-1])%(n*int(ts))
			if a < e {
				out := make([]byte, e-a)
				UnshufflePlanesTo(planes, a, e, out)
				if !bytes.Equal(out, b[a:e]) {
					t.Fatalf("UnshufflePlanesTo [%d, %d)", a, e)
				}
			}
		}
		Bitshuffle(int(ts), b, t1)
		Bitunshuffle(int(ts), t1, t2, 5)
		if !bytes.Equal(t2, b) {
			t.Fatal("bitshuffle")
		}
		BytedeltaEncode(int(ts), false, b, t1)
		BytedeltaDecode(int(ts), false, t1, t2)
		if !bytes.Equal(t2, b) {
			t.Fatal("bytedelta")
		}
		DeltaEncode(int(ts), true, b, b, t1)
		DeltaDecode(int(ts), true, nil, t1)
		if !bytes.Equal(t1, b) {
			t.Fatal("delta")
		}
	})
}

func TestEncodeDecodeRoundTrip(t *testing.T) {
	data := make([]byte, 10000)
	for i := range data {
		data[i] = byte(i / 3)
	}
	for _, codec := range []int{CodecBloscLZ, CodecLZ4, CodecLZ4HC, CodecZlib, CodecZstd} {
		for _, ts := range []int{1, 2, 4, 8, 16, 3} {
			for _, fl := range [][6]uint8{{}, {5: FilterShuffle}, {5: FilterBitshuffle}, {4: FilterDelta}, {3: FilterDelta, 5: FilterBitshuffle}, {4: FilterShuffle, 5: FilterBytedelta}} {
				for _, sm := range []int{AlwaysSplit, NeverSplit, AutoSplit} {
					p := Params{Typesize: ts, BlockSize: 96 * ts, Codec: codec, CLevel: 5, Filters: fl, SplitMode: sm}
					n := len(data) / ts * ts
					c, err := Encode(p, data[:n])
					if err != nil {
						t.Fatal(err)
					}
					ch, err := Parse(c, n)
					if err != nil {
						t.Fatal(err)
					}
					out := make([]byte, n)
					if err := ch.Decode(out); err != nil {
						t.Fatalf("codec %d ts %d filters %v: %v", codec, ts, fl, err)
					}
					if !bytes.Equal(out, data[:n]) {
						t.Fatalf("codec %d ts %d filters %v split %d: round trip differs", codec, ts, fl, sm)
					}
				}
			}
		}
	}
}

// FuzzChunkHead parses arbitrary chunks by their head, as a reader of a
// few blocks does, then decodes each block from the bytes BlockRange
// names (by spans for half of them): never a panic, never a range outside
// the chunk's cbytes.
func FuzzChunkHead(f *testing.F) {
	seedChunks(f)
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) < MinHeaderLen {
			return
		}
		c, need, err := ParseHead(b[:min(len(b), 64)], -1)
		if err == nil && c == nil {
			if need <= 0 || need > len(b) {
				return
			}
			c, _, err = ParseHead(b[:need], -1)
		}
		if err != nil || c == nil {
			return
		}
		defer c.Close()
		if c.NBytes > 1<<20 || c.BlockSize > 1<<20 || c.Validate() != nil || c.CBytes > len(b) {
			return
		}
		out := make([]byte, c.BlockSize)
		ref := make([]byte, c.BlockSize)
		for i := 0; i < c.NBlocks() && i < 64; i++ {
			off, end := c.BlockRange(i)
			if off < 0 || end < off || end > c.CBytes {
				t.Fatalf("block %d range [%d, %d) outside cbytes %d", i, off, end, c.CBytes)
			}
			var spans []Span
			if i%2 == 1 {
				spans = []Span{{0, c.Typesize}, {c.BlockLen(i) / 2, c.BlockLen(i) / 4}}
			}
			_ = c.DecodeBlockAt(i, b[off:end], out, ref, nil, spans)
		}
	})
}
