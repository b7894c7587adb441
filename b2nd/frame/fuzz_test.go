package frame

import "testing"

// FuzzFrame parses arbitrary headers, trailers and offsets indexes.
func FuzzFrame(f *testing.F) {
	h := &Header{Type: Contiguous, Codec: 5, CLevel: 5, SplitMode: 3, Typesize: 8, BlockSize: 64, ChunkSize: 512,
		Metalayers: []Meta{{Name: "b2nd", Content: []byte{0x97, 0, 1, 0x91, 0x01}}}}
	hb, _ := EncodeHeader(h, 1000)
	f.Add(hb)
	tb, _ := EncodeTrailer([]Meta{{Name: "k", Content: []byte{1, 2, 3}}})
	f.Add(tb)
	ob, _ := EncodeOffsets([]Offset{0, 100, SpecialOffset(1)})
	f.Add(ob)
	f.Fuzz(func(t *testing.T, b []byte) {
		_, _ = ParseHeader(b)
		_, _ = ParseTrailer(b)
		_, _ = TrailerLen(b)
		_, _ = ParseOffsets(b, 1<<16)
	})
}
