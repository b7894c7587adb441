package codecs

import (
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
