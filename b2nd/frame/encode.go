package frame

import (
	"encoding/binary"
	"fmt"

	"github.com/tileflight/tileflight/b2nd/chunk"
)

// EncodeHeader writes h (with its metalayers) as c-blosc2 does; the header
// and frame lengths are set from the result and frameLen.
func EncodeHeader(h *Header, frameLen int64) ([]byte, error) {
	b := make([]byte, MinHeaderLen)
	b[0] = 0x9e
	b[1] = 0xa8
	copy(b[2:], "b2frame\x00")
	b[offHeaderLen-1] = 0xd2
	b[offFrameLen-1] = 0xcf
	b[offFlags-1] = 0xa4
	b[offFlags] = 2 | 0x10 // frame format version 2, 64-bit offsets
	b[offType] = byte(h.Type)
	codec := h.Codec
	if codec > 15 {
		codec = 6
	}
	b[offCodecs] = byte(codec) | byte(h.CLevel<<4)
	b[offOtherFlags] = byte(h.SplitMode - 1)
	b[offNBytes-1] = 0xd3
	binary.BigEndian.PutUint64(b[offNBytes:], uint64(h.NBytes))
	b[offCBytes-1] = 0xd3
	binary.BigEndian.PutUint64(b[offCBytes:], uint64(h.CBytes))
	b[offTypesize-1] = 0xd2
	binary.BigEndian.PutUint32(b[offTypesize:], uint32(h.Typesize))
	b[offBlockSize-1] = 0xd2
	binary.BigEndian.PutUint32(b[offBlockSize:], uint32(h.BlockSize))
	b[offChunkSize-1] = 0xd2
	binary.BigEndian.PutUint32(b[offChunkSize:], uint32(h.ChunkSize))
	b[offNThreadsC-1] = 0xd1
	binary.BigEndian.PutUint16(b[offNThreadsC:], uint16(max(h.NThreadsC, 1)))
	b[offNThreadsD-1] = 0xd1
	binary.BigEndian.PutUint16(b[offNThreadsD:], uint16(max(h.NThreadsD, 1)))
	b[offHasVLMeta] = 0xc2
	if h.HasVLMeta {
		b[offHasVLMeta] = 0xc3
	}
	b[offFilters-1] = 0xd8
	b[offFilters] = 6
	copy(b[offFilters+1:], h.Filters[:])
	copy(b[offFilters+1+8:], h.FiltersMeta[:])
	b[offUDCodec] = byte(h.Codec)
	b[offCodecMeta] = h.CodecMeta
	if h.UseDict {
		b[offOther2] = 1
	}
	b, err := appendMetalayers(b, h.Metalayers, 0, 0)
	if err != nil {
		return nil, err
	}
	binary.BigEndian.PutUint32(b[offHeaderLen:], uint32(len(b)))
	binary.BigEndian.PutUint64(b[offFrameLen:], uint64(frameLen))
	return b, nil
}

// appendMetalayers appends [uint16 size, map16 name->int32 offset,
// array16 of bin32]; offsets count from base (the start of the buffer
// that b will be, minus base).
func appendMetalayers(b []byte, ms []Meta, base, sizeAdj int) ([]byte, error) {
	start := len(b)
	b = append(b, 0x93, 0xcd, 0, 0, 0xde)
	b = binary.BigEndian.AppendUint16(b, uint16(len(ms)))
	slots := make([]int, len(ms))
	for i, m := range ms {
		if len(m.Name) >= 32 {
			return nil, fmt.Errorf("metalayer name %q is longer than 31 bytes", m.Name)
		}
		b = append(b, 0xa0+byte(len(m.Name)))
		b = append(b, m.Name...)
		b = append(b, 0xd2)
		slots[i] = len(b)
		b = append(b, 0, 0, 0, 0)
	}
	binary.BigEndian.PutUint16(b[start+2:], uint16(len(b)-start-sizeAdj)) // c-blosc2 counts from the array marker in headers, after it in trailers
	b = append(b, 0xdc)
	b = binary.BigEndian.AppendUint16(b, uint16(len(ms)))
	for i, m := range ms {
		binary.BigEndian.PutUint32(b[slots[i]:], uint32(len(b)-base))
		b = append(b, 0xc6)
		b = binary.BigEndian.AppendUint32(b, uint32(len(m.Content)))
		b = append(b, m.Content...)
	}
	return b, nil
}

// EncodeTrailer writes the trailer holding the vlmetalayers (contents
// already chunks, see EncodeVLMeta).
func EncodeTrailer(vl []Meta) ([]byte, error) {
	b := []byte{0x94, 1}
	b, err := appendMetalayers(b, vl, 0, 1)
	if err != nil {
		return nil, err
	}
	n := len(b) + TrailerTailLen
	b = append(b, 0xce)
	b = binary.BigEndian.AppendUint32(b, uint32(n))
	b = append(b, 0xd8, 0)
	b = append(b, make([]byte, 16)...)
	return b, nil
}

// EncodeVLMeta wraps a vlmetalayer's bytes in a chunk, as
// blosc2_vlmeta_add does.
func EncodeVLMeta(content []byte) ([]byte, error) {
	return chunk.Encode(chunk.Params{Typesize: 1, BlockSize: max(len(content), 1), Codec: chunk.CodecZstd, CLevel: 5, SplitMode: chunk.NeverSplit}, content)
}

// EncodeOffsets writes the offsets index chunk.
func EncodeOffsets(offs []Offset) ([]byte, error) {
	raw := make([]byte, 8*len(offs))
	for i, o := range offs {
		binary.LittleEndian.PutUint64(raw[8*i:], uint64(o))
	}
	p := chunk.Params{Typesize: 8, BlockSize: max(len(raw), 8), Codec: chunk.CodecZstd, CLevel: 5, SplitMode: chunk.NeverSplit}
	p.Filters[5] = chunk.FilterShuffle
	return chunk.Encode(p, raw)
}
