package codecs

import (
	"bytes"
	"math/bits"
	"os"
	"strings"
	"testing"

	"github.com/tileflight/tileflight/filters/stage"
	"github.com/tileflight/tileflight/format/datatype"
	"github.com/tileflight/tileflight/format/pipeline"
)

// fuzzReverse feeds arbitrary metadata, data, datatype, format version and
// option byte to one filter's Reverse: it must return an error or a
// result whose size is bounded by its input, never panic. Seeds are the
// first chunks of the TileDB-written golden tiles for that filter.
func fuzzReverse(f *testing.F, ft pipeline.FilterType, prefix string) {
	if b, err := os.ReadFile("testdata/cases.json"); err == nil && len(b) > 0 {
		for _, c := range loadCases(f) {
			if !strings.HasPrefix(c.Name, prefix) {
				continue
			}
			chunks, err := parseTile(readGz(f, c.Name+".tdb.gz"))
			if err != nil || len(chunks) == 0 {
				continue
			}
			opt, opt2 := uint8(c.Window/8), uint8(bits.TrailingZeros64(c.ByteWidth))
			if c.Filter == "webp" {
				depth := 3 + int(c.WebPFormat)/3 // RGB, BGR: 3; RGBA, BGRA: 4
				opt = c.WebPFormat - 1 + 4*uint8(c.YExtent-1)
				opt2 = uint8(int(c.XExtent)/depth - 1)
			}
			f.Add(chunks[0].meta, chunks[0].data, uint8(c.datatype(f)), uint8(c.Version), opt, opt2)
		}
	}
	f.Add([]byte{1, 0, 0, 0, 8, 0, 0, 0}, make([]byte, 8), uint8(datatype.Int64), uint8(22), uint8(8), uint8(8))
	key := []byte("0123456789abcdeF0123456789abcdeF")
	f.Fuzz(func(t *testing.T, meta, data []byte, typ, version, opt, opt2 uint8) {
		format := pipeline.WebPFormat(opt%4 + 1)
		depth := 3
		if format >= pipeline.WebPRGBA {
			depth = 4
		}
		filt := pipeline.Filter{Type: ft, MaxWindow: uint32(opt) * 8, Scale: 0.5, Offset: 3,
			ByteWidth:  []uint64{1, 2, 4, 8}[opt2%4],
			WebPFormat: format, WebPYExtent: uint16(opt/4) + 1, WebPXExtent: (uint16(opt2) + 1) * uint16(depth)}
		s, err := New(filt, Options{EncryptionKey: key})
		if err != nil {
			t.Fatal(err)
		}
		ctx := &stage.Context{Type: datatype.Datatype(typ % (uint8(datatype.Max) + 1)), Version: uint32(version)}
		out, err := s.Reverse(ctx, stage.Buffers{Meta: [][]byte{meta}, Data: [][]byte{data}})
		if err != nil {
			return
		}
		bound := 8*(len(meta)+len(data)) + 64
		if ft == pipeline.WebP {
			// The decoded image is bounded by the extents, not by the
			// compressed input; the metadata of earlier filters passes
			// through unchanged.
			bound = 4*int(filt.WebPXExtent)*int(filt.WebPYExtent) + len(meta) + 64
		}
		if n := stage.Size(out.Data) + stage.Size(out.Meta); n > bound {
			t.Fatalf("%d bytes out of %d in", n, len(meta)+len(data))
		}
	})
}

func FuzzReverseByteshuffle(f *testing.F) { fuzzReverse(f, pipeline.Byteshuffle, "byteshuffle") }
func FuzzReverseBitshuffle(f *testing.F)  { fuzzReverse(f, pipeline.Bitshuffle, "bitshuffle") }
func FuzzReverseBitWidthReduction(f *testing.F) {
	fuzzReverse(f, pipeline.BitWidthReduction, "bit_width")
}
func FuzzReversePositiveDelta(f *testing.F) { fuzzReverse(f, pipeline.PositiveDelta, "positive_delta") }
func FuzzReverseChecksumMD5(f *testing.F)   { fuzzReverse(f, pipeline.ChecksumMD5, "checksum_md5") }
func FuzzReverseChecksumSHA256(f *testing.F) {
	fuzzReverse(f, pipeline.ChecksumSHA256, "checksum_sha256")
}
func FuzzReverseScaleFloat(f *testing.F) { fuzzReverse(f, pipeline.ScaleFloat, "scale_float") }
func FuzzReverseXOR(f *testing.F)        { fuzzReverse(f, pipeline.XOR, "xor") }
func FuzzReverseWebP(f *testing.F)       { fuzzReverse(f, pipeline.WebP, "webp") }
func FuzzReverseAES(f *testing.F)        { fuzzReverse(f, pipeline.AES256GCM, "aes") }

// FuzzForwardWebP encodes arbitrary pixels in every format and lossless
// flag and decodes them back: a lossless tile must return byte for byte,
// a lossy one must return a tile of the same size, and no input may
// crash the encoder.
func FuzzForwardWebP(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}, uint8(0), uint8(1), true, float32(80))
	f.Add(bytes.Repeat([]byte{255, 0, 0, 0}, 64), uint8(2), uint8(8), false, float32(0))
	f.Fuzz(func(t *testing.T, px []byte, format, height uint8, lossless bool, quality float32) {
		fm := pipeline.WebPFormat(format%4 + 1)
		depth := 3
		if fm >= pipeline.WebPRGBA {
			depth = 4
		}
		ht := int(height%16) + 1
		wd := len(px) / (depth * ht)
		if wd == 0 || wd > 64 {
			return
		}
		px = px[:wd*depth*ht]
		if quality != quality || quality < 0 || quality > 100 { // NaN and out of range: the schema refuses them
			quality = 50
		}
		s, err := New(pipeline.Filter{Type: pipeline.WebP, WebPFormat: fm, WebPLossless: lossless, WebPQuality: quality,
			WebPYExtent: uint16(ht), WebPXExtent: uint16(wd * depth)}, Options{})
		if err != nil {
			t.Fatal(err)
		}
		ctx := &stage.Context{Type: datatype.Uint8, Version: 22}
		enc, err := s.Forward(ctx, stage.Buffers{Data: [][]byte{px}})
		if err != nil {
			t.Fatalf("forward: %v", err)
		}
		dec, err := s.Reverse(ctx, stage.Buffers{Meta: [][]byte{stage.Concat(enc.Meta)}, Data: [][]byte{stage.Concat(enc.Data)}})
		if err != nil {
			t.Fatalf("reverse of our own encoding: %v", err)
		}
		got := stage.Concat(dec.Data)
		if len(got) != len(px) || (lossless && !bytes.Equal(got, px)) {
			t.Fatalf("%d pixels of %d bytes (lossless %v) decode to %d different bytes", wd*ht, depth, lossless, len(got))
		}
	})
}
