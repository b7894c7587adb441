package pipeline

import (
	"bytes"
	"testing"

	"github.com/tileflight/tileflight/format/datatype"
	"github.com/tileflight/tileflight/format/wire"
)

func TestRoundTrip(t *testing.T) {
	p := Pipeline{MaxChunkSize: DefaultMaxChunkSize, Filters: []Filter{
		{Type: Zstd, Compressor: CompZstd, Level: 3, Reinterpret: datatype.Any},
		{Type: Delta, Compressor: CompDelta, Level: -1, Reinterpret: datatype.Int32},
		{Type: DoubleDelta, Compressor: CompDoubleDel, Level: -1, Reinterpret: datatype.Any},
		{Type: BitWidthReduction, MaxWindow: 256, Reinterpret: datatype.Any},
		{Type: ScaleFloat, Scale: 0.5, Offset: 1, ByteWidth: 4, Reinterpret: datatype.Any},
		{Type: WebP, WebPQuality: 90, WebPFormat: WebPRGB, WebPLossless: true, WebPYExtent: 4, WebPXExtent: 12, Reinterpret: datatype.Any},
		{Type: Byteshuffle, Reinterpret: datatype.Any},
		{Type: ChecksumSHA256, Reinterpret: datatype.Any},
	}}
	for _, version := range []uint32{18, 19, 20, 22} {
		w := wire.NewWriter(nil)
		Encode(w, p, version)
		got, err := Decode(wire.NewReader(w.Bytes()), version)
		if err != nil {
			t.Fatalf("v%d: %v", version, err)
		}
		w2 := wire.NewWriter(nil)
		Encode(w2, got, version)
		if !bytes.Equal(w.Bytes(), w2.Bytes()) {
			t.Fatalf("v%d: re-encoding differs", version)
		}
		if version >= 20 && got.Filters[1].Reinterpret != datatype.Int32 {
			t.Fatalf("v%d: reinterpret lost", version)
		}
	}
}

func TestNames(t *testing.T) {
	for _, n := range []string{"gzip", "zstd", "lz4", "rle", "bzip2", "double_delta", "delta",
		"bit_width_reduction", "bitshuffle", "byteshuffle", "positive_delta", "checksum_md5",
		"checksum_sha256", "dictionary", "scale_float", "xor", "webp"} {
		ft, err := ParseFilterType(n)
		if err != nil || ft.String() != n {
			t.Fatalf("%s: %v %v", n, ft, err)
		}
	}
}

func FuzzDecode(f *testing.F) {
	w := wire.NewWriter(nil)
	Encode(w, Pipeline{MaxChunkSize: 65536, Filters: []Filter{{Type: Zstd, Level: 1}, {Type: ScaleFloat, ByteWidth: 8}}}, 22)
	f.Add(w.Bytes(), uint32(22))
	f.Fuzz(func(t *testing.T, b []byte, version uint32) {
		p, err := Decode(wire.NewReader(b), version%24)
		if err != nil {
			return
		}
		w := wire.NewWriter(nil)
		Encode(w, p, version%24)
	})
}
