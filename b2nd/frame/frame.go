// Package frame owns the Blosc2 frame formats (c-blosc2's
// README_CFRAME_FORMAT and README_SFRAME_FORMAT): the msgpack header with
// its fixed fields, filter pipeline and metalayers, the chunk offsets index
// (itself a Blosc2 chunk, with special values for all-zero, NaN and
// uninitialized chunks), and the trailer with the variable-length
// metalayers (vlmeta). A contiguous frame (cframe) holds its chunks between
// header and index; a sparse frame (sframe) is a directory whose
// chunks.b2frame holds header, index and trailer, and whose chunks are
// NNNNNNNN.chunk files. The package is pure: it decodes and encodes bytes;
// package b2nd does the I/O.
package frame

import (
	"bytes"
	"encoding/binary"
	"fmt"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/tileflight/tileflight/b2nd/chunk"
	"github.com/tileflight/tileflight/errkind"
)

// Fixed offsets of the header (c-blosc2's frame.h).
const (
	offHeaderLen  = 11
	offFrameLen   = 16
	offFlags      = 25
	offType       = 26
	offCodecs     = 27
	offOtherFlags = 28
	offNBytes     = 30
	offCBytes     = 39
	offTypesize   = 48
	offBlockSize  = 53
	offChunkSize  = 58
	offNThreadsC  = 63
	offNThreadsD  = 66
	offHasVLMeta  = 68
	offFilters    = 70
	offUDCodec    = 77
	offCodecMeta  = 78
	offOther2     = 85
	// MinHeaderLen is the header without metalayers.
	MinHeaderLen = 87
	// TrailerTailLen is the fixed end of the trailer: uint32 length and the
	// 16-byte fingerprint.
	TrailerTailLen = 23
	// MaxMetaLen bounds one metalayer's content.
	MaxMetaLen = 1 << 24
)

// Frame types.
const (
	Contiguous = 0
	Sparse     = 1
)

// Meta is one (vl)metalayer.
type Meta struct {
	Name    string
	Content []byte
}

// Header is a decoded frame header.
type Header struct {
	HeaderLen    int
	FrameLen     int64
	GeneralFlags uint8
	Type         int
	Codec        int
	CLevel       int
	SplitMode    int // 1-based as c-blosc2's enum
	NBytes       int64
	CBytes       int64
	Typesize     int
	BlockSize    int
	ChunkSize    int
	NThreadsC    int16
	NThreadsD    int16
	HasVLMeta    bool
	Filters      [6]uint8
	FiltersMeta  [6]uint8
	UDCodec      uint8
	CodecMeta    uint8
	UseDict      bool
	Metalayers   []Meta
}

// Meta returns the content of the metalayer called name.
func (h *Header) Meta(name string) ([]byte, bool) {
	for _, m := range h.Metalayers {
		if m.Name == name {
			return m.Content, true
		}
	}
	return nil, false
}

// Params are the chunk parameters the header records.
func (h *Header) Params() chunk.Params {
	// Chunks hold at most 255-byte items: wider ones are written with
	// typesize 1, as c-blosc2 does. A dictionary is written for zstd only
	// (chunks of other codecs are written without one, still readable).
	ts := h.Typesize
	if ts > 255 {
		ts = 1
	}
	return chunk.Params{Typesize: ts, BlockSize: h.BlockSize, Codec: h.Codec, CLevel: h.CLevel,
		Filters: h.Filters, FiltersMeta: h.FiltersMeta, SplitMode: h.SplitMode, UseDict: h.UseDict && h.Codec == chunk.CodecZstd}
}

func corrupt(format string, args ...any) error {
	return errkind.Errorf(errkind.DataLoss, "blosc2 frame: "+format, args...)
}

func be32(b []byte) int32 { return int32(binary.BigEndian.Uint32(b)) }
func be64(b []byte) int64 { return int64(binary.BigEndian.Uint64(b)) }

// PeekHeaderLen returns the header length from a frame's first 16 bytes.
func PeekHeaderLen(b []byte) (int, error) {
	if len(b) < 16 {
		return 0, corrupt("truncated: %d bytes", len(b))
	}
	if b[0] != 0x9e || b[1] != 0xa8 || !bytes.Equal(b[2:9], []byte("b2frame")) || b[10] != 0xd2 {
		return 0, corrupt("no b2frame magic")
	}
	n := int(be32(b[offHeaderLen:]))
	if n < MinHeaderLen {
		return 0, corrupt("header length %d", n)
	}
	return n, nil
}

// ParseHeader decodes a header; b holds at least its header length.
func ParseHeader(b []byte) (*Header, error) {
	hl, err := PeekHeaderLen(b)
	if err != nil {
		return nil, err
	}
	if len(b) < hl {
		return nil, corrupt("truncated header: %d of %d bytes", len(b), hl)
	}
	b = b[:hl]
	marks := []struct {
		off int
		v   byte
	}{{offFrameLen - 1, 0xcf}, {offFlags - 1, 0xa4}, {offNBytes - 1, 0xd3}, {offCBytes - 1, 0xd3},
		{offTypesize - 1, 0xd2}, {offBlockSize - 1, 0xd2}, {offChunkSize - 1, 0xd2}, {offNThreadsC - 1, 0xd1},
		{offNThreadsD - 1, 0xd1}, {offFilters - 1, 0xd8}}
	for _, m := range marks {
		if b[m.off] != m.v {
			return nil, corrupt("header byte %d is %#x, want %#x", m.off, b[m.off], m.v)
		}
	}
	h := &Header{HeaderLen: hl}
	h.FrameLen = be64(b[offFrameLen:])
	h.GeneralFlags = b[offFlags]
	h.Type = int(b[offType] & 0xf)
	h.Codec = int(b[offCodecs] & 0xf)
	h.CLevel = int(b[offCodecs] >> 4)
	h.SplitMode = int(b[offOtherFlags]&3) + 1
	h.NBytes = be64(b[offNBytes:])
	h.CBytes = be64(b[offCBytes:])
	h.Typesize = int(be32(b[offTypesize:]))
	h.BlockSize = int(be32(b[offBlockSize:]))
	h.ChunkSize = int(be32(b[offChunkSize:]))
	h.NThreadsC = int16(binary.BigEndian.Uint16(b[offNThreadsC:]))
	h.NThreadsD = int16(binary.BigEndian.Uint16(b[offNThreadsD:]))
	h.HasVLMeta = b[offHasVLMeta] == 0xc3
	nf := int(b[offFilters])
	if nf > 6 {
		nf = 6
	}
	copy(h.Filters[:nf], b[offFilters+1:])
	copy(h.FiltersMeta[:nf], b[offFilters+1+8:])
	h.UDCodec = b[offUDCodec]
	h.CodecMeta = b[offCodecMeta]
	h.UseDict = b[offOther2]&1 != 0
	if h.Codec == 6 {
		h.Codec = int(h.UDCodec)
	}
	if h.FrameLen < int64(hl) || h.NBytes < 0 || h.CBytes < 0 || h.Typesize <= 0 || h.ChunkSize < 0 {
		return nil, corrupt("bad sizes (frame %d, nbytes %d, cbytes %d, typesize %d, chunksize %d)", h.FrameLen, h.NBytes, h.CBytes, h.Typesize, h.ChunkSize)
	}
	if (h.GeneralFlags>>4)&3 != 1 {
		return nil, errkind.Errorf(errkind.Unimplemented, "blosc2 frame: only 64-bit chunk offsets are supported (flags %#x)", h.GeneralFlags)
	}
	if h.GeneralFlags&0xc0 != 0 {
		return nil, errkind.Errorf(errkind.Unimplemented, "blosc2 frame: variable-length chunks or blocks are not supported (flags %#x)", h.GeneralFlags)
	}
	if hl > MinHeaderLen {
		ms, err := parseMetalayers(b, MinHeaderLen)
		if err != nil {
			return nil, corrupt("metalayers: %v", err)
		}
		h.Metalayers = ms
	}
	return h, nil
}

// parseMetalayers reads [uint16 size, map name->offset, [bin...]] at off;
// offsets are relative to the start of b.
func parseMetalayers(b []byte, off int) ([]Meta, error) {
	d := msgpack.NewDecoder(bytes.NewReader(b[off:]))
	n, err := d.DecodeArrayLen()
	if err != nil || n != 3 {
		return nil, fmt.Errorf("want an array of 3, got %d (%v)", n, err)
	}
	if _, err := d.DecodeUint16(); err != nil {
		return nil, err
	}
	nm, err := d.DecodeMapLen()
	if err != nil || nm < 0 || nm > 1024 {
		return nil, fmt.Errorf("map of %d (%v)", nm, err)
	}
	var out []Meta
	for i := 0; i < nm; i++ {
		name, err := d.DecodeString()
		if err != nil {
			return nil, err
		}
		pos, err := d.DecodeInt64()
		if err != nil {
			return nil, err
		}
		if pos < 0 || pos+5 > int64(len(b)) || b[pos] != 0xc6 {
			return nil, fmt.Errorf("metalayer %q at %d is outside or not bin32", name, pos)
		}
		n := int64(binary.BigEndian.Uint32(b[pos+1:]))
		if n > MaxMetaLen || pos+5+n > int64(len(b)) {
			return nil, fmt.Errorf("metalayer %q: %d bytes at %d overrun %d", name, n, pos, len(b))
		}
		out = append(out, Meta{Name: name, Content: b[pos+5 : pos+5+n]})
	}
	return out, nil
}

// ParseTrailer decodes a trailer (from its start to the frame's end) and
// returns the vlmetalayers, each still a compressed chunk (see VLMeta).
func ParseTrailer(b []byte) ([]Meta, error) {
	if len(b) < TrailerTailLen+2 {
		return nil, corrupt("truncated trailer: %d bytes", len(b))
	}
	if b[0] != 0x94 {
		return nil, corrupt("trailer is not an array of 4 (%#x)", b[0])
	}
	if b[1] == 0 { // beta trailers have no vlmetalayers worth reading
		return nil, nil
	}
	ms, err := parseMetalayers(b, 2)
	if err != nil {
		return nil, corrupt("vlmetalayers: %v", err)
	}
	return ms, nil
}

// TrailerLen returns the trailer length from the frame's last 23 bytes.
func TrailerLen(tail []byte) (int, error) {
	if len(tail) < TrailerTailLen || tail[len(tail)-TrailerTailLen] != 0xce {
		return 0, corrupt("no trailer length at the end")
	}
	n := int(binary.BigEndian.Uint32(tail[len(tail)-TrailerTailLen+1:]))
	if n < TrailerTailLen+2 {
		return 0, corrupt("trailer length %d", n)
	}
	return n, nil
}

// VLMeta decodes a vlmetalayer's content (a chunk) to its bytes (python-
// blosc2 stores msgpack there).
func VLMeta(content []byte) ([]byte, error) {
	c, err := chunk.Parse(content, -1)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	if c.NBytes > MaxMetaLen {
		return nil, corrupt("vlmeta of %d bytes", c.NBytes)
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	out := make([]byte, c.NBytes)
	if err := c.Decode(out); err != nil {
		return nil, err
	}
	return out, nil
}

// Special offsets: the top byte marks a chunk of special values.
const specialBit = uint64(0x80) << 56

// Offset is one entry of the chunk index.
type Offset int64

// Special returns the special kind of the chunk (0 for a stored one).
func (o Offset) Special() int {
	if uint64(o)&specialBit == 0 {
		return 0
	}
	return int((uint64(o) >> 56) & 7)
}

// SpecialOffset is the index entry for a chunk of special kind.
func SpecialOffset(kind int) Offset { return Offset(specialBit | uint64(kind)<<56) }

// ParseOffsets decodes the offsets index chunk; nchunks is its length.
func ParseOffsets(b []byte, maxChunks int64) ([]Offset, error) {
	c, err := chunk.Parse(b, -1)
	if err != nil {
		return nil, fmt.Errorf("offsets index: %w", err)
	}
	defer c.Close()
	if c.NBytes%8 != 0 || int64(c.NBytes/8) > maxChunks {
		return nil, corrupt("offsets index of %d bytes for at most %d chunks", c.NBytes, maxChunks)
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	raw := make([]byte, c.NBytes)
	if err := c.Decode(raw); err != nil {
		return nil, fmt.Errorf("offsets index: %w", err)
	}
	out := make([]Offset, c.NBytes/8)
	for i := range out {
		out[i] = Offset(binary.LittleEndian.Uint64(raw[8*i:]))
	}
	return out, nil
}
