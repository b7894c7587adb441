package chunk

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/tileflight/tileflight/errkind"
)

// TestEncodeWithDict: zstd chunks written with a dictionary carry it (the
// use-dict flag, its size after the block starts) and decode back; chunks
// too small for a useful dictionary are written without; codecs other than
// zstd are refused.
func TestEncodeWithDict(t *testing.T) {
	data := make([]byte, 8*50000)
	for i := 0; i < len(data)/8; i++ {
		binary.LittleEndian.PutUint64(data[8*i:], uint64(i%1000)*0x9E3779B97F4A7C15>>20)
	}
	for _, tc := range []struct {
		n, bs    int
		split    int
		wantDict bool
	}{
		{len(data), 8000, NeverSplit, true},
		{len(data), 8000, AlwaysSplit, true},
		{len(data), 4096, AutoSplit, true},
		{4000, 1000, NeverSplit, false}, // 1/20 of 4000 bytes is under 256
	} {
		p := Params{Typesize: 8, BlockSize: tc.bs, Codec: CodecZstd, CLevel: 5, Filters: [6]uint8{5: FilterShuffle}, SplitMode: tc.split, UseDict: true}
		b, err := Encode(p, data[:tc.n])
		if err != nil {
			t.Fatal(err)
		}
		c, err := Parse(b, tc.n)
		if err != nil {
			t.Fatal(err)
		}
		if got := c.B2Flags&b2UseDict != 0; got != tc.wantDict || (c.dict != nil) != tc.wantDict {
			t.Fatalf("n %d split %d: dictionary %v, want %v", tc.n, tc.split, got, tc.wantDict)
		}
		if tc.wantDict && (len(c.dict) < minUsefulDict || len(c.dict) > writeMaxDict) {
			t.Fatalf("dictionary of %d bytes", len(c.dict))
		}
		out := make([]byte, tc.n)
		if err := c.Decode(out); err != nil {
			t.Fatal(err)
		}
		c.Close()
		if !bytes.Equal(out, data[:tc.n]) {
			t.Fatalf("n %d split %d: round trip differs", tc.n, tc.split)
		}
	}
	_, err := Encode(Params{Typesize: 8, BlockSize: 8000, Codec: CodecLZ4, CLevel: 5, UseDict: true}, data)
	if errkind.Of(err) != errkind.Unimplemented {
		t.Fatalf("lz4 with a dictionary: %v, want Unimplemented", err)
	}
}
