package chunk

import (
	"bytes"
	"fmt"
	"testing"
)

// TestParseHeadDecodeBlockAt reads chunks the way a reader of a few blocks
// does (the head first, then each block's own bytes, part of a block by
// spans) and checks every block against the whole-chunk decode, over
// codecs, filters (shuffle takes the span path, the others decode whole),
// split modes, a last partial block and dictionaries.
func TestParseHeadDecodeBlockAt(t *testing.T) {
	data := make([]byte, 8*1000+24)
	for i := range data {
		data[i] = byte(i*i/7 + i/64)
	}
	type tc struct {
		p    Params
		name string
	}
	var cases []tc
	for _, codec := range []int{CodecBloscLZ, CodecLZ4, CodecLZ4HC, CodecZlib, CodecZstd} {
		for _, fl := range [][6]uint8{{}, {5: FilterShuffle}, {5: FilterBitshuffle}, {4: FilterDelta, 5: FilterShuffle}, {4: FilterShuffle, 5: FilterBytedelta}, {4: FilterTruncPrec, 5: FilterShuffle}} {
			for _, split := range []int{AlwaysSplit, NeverSplit} {
				for _, ts := range []int{4, 8} {
					p := Params{Typesize: ts, BlockSize: 512, Codec: codec, CLevel: 5, Filters: fl, SplitMode: split}
					if fl[4] == FilterTruncPrec {
						p.FiltersMeta[4] = 20
					}
					cases = append(cases, tc{p, fmt.Sprintf("codec%d/%v/split%d/ts%d", codec, fl, split, ts)})
				}
			}
		}
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b, err := Encode(c.p, data)
			if err != nil {
				t.Fatal(err)
			}
			whole, err := Parse(b, len(data))
			if err != nil {
				t.Fatal(err)
			}
			want := make([]byte, len(data))
			if err := whole.Decode(want); err != nil {
				t.Fatal(err)
			}
			// The head, read as a reader would: HeadLen first, more if asked.
			n := min(len(b), HeadLen(len(data), c.p.BlockSize))
			h, need, err := ParseHead(b[:n], len(data))
			if err == nil && need > 0 {
				h, need, err = ParseHead(b[:need], len(data))
			}
			if err != nil || need > 0 {
				t.Fatalf("head: need %d, %v", need, err)
			}
			bs := h.BlockSize
			ref := want[:h.BlockLen(0)]
			for i := 0; i < h.NBlocks(); i++ {
				off, end := h.BlockRange(i)
				src := bytes.Clone(b[off:end])
				got := make([]byte, h.BlockLen(i))
				if err := h.DecodeBlockAt(i, src, got, ref, nil, nil); err != nil {
					t.Fatalf("block %d: %v", i, err)
				}
				if !bytes.Equal(got, want[i*bs:i*bs+len(got)]) {
					t.Fatalf("block %d differs", i)
				}
				ts := c.p.Typesize
				spans := []Span{{ts, 3 * ts}, {len(got) / 2 / ts * ts, 5 * ts}}
				part := make([]byte, len(got))
				if err := h.DecodeBlockAt(i, src, part, ref, nil, spans); err != nil {
					t.Fatalf("block %d spans: %v", i, err)
				}
				for _, sp := range spans {
					e := min(sp.Off+sp.Len, len(got))
					if !bytes.Equal(part[sp.Off:e], got[sp.Off:e]) {
						t.Fatalf("block %d span %v differs", i, sp)
					}
				}
			}
		})
	}
}

// TestParseHeadShort: a head cut anywhere asks for more or fails cleanly.
func TestParseHeadShort(t *testing.T) {
	data := bytes.Repeat([]byte("0123456789abcdef"), 200)
	b, err := Encode(Params{Typesize: 8, BlockSize: 256, Codec: CodecZstd, CLevel: 3, Filters: [6]uint8{5: FilterShuffle}}, data)
	if err != nil {
		t.Fatal(err)
	}
	for n := MinHeaderLen; n < 200 && n <= len(b); n++ {
		c, need, err := ParseHead(b[:n], len(data))
		if err != nil {
			t.Fatalf("prefix %d: %v", n, err)
		}
		if c == nil && (need <= n || need > len(b)) {
			t.Fatalf("prefix %d: need %d", n, need)
		}
	}
}
