// Package chunk owns the Blosc2 chunk format (c-blosc2's
// README_CHUNK_FORMAT): the 16/32-byte header, block starts, optional
// dictionary, split streams, memcpyed chunks and the special chunks (zeros,
// NaN, uninitialized, a repeated value), every codec c-blosc2 ships for data
// (blosclz, lz4, lz4hc, zlib, zstd, with and without dictionaries) and its
// filters (shuffle, bitshuffle, delta, trunc_prec, bytedelta) in both
// directions. It is pure: bytes in, bytes out, no storage. A chunk is
// decoded block by block, so a reader decompresses only the blocks it needs.
//
// Every size read from a chunk is checked against the bytes that are there
// and against the sizes the caller expects before it drives an allocation;
// a corrupt or truncated chunk is errkind.DataLoss.
package chunk

import (
	"encoding/binary"
	"fmt"

	"github.com/tileflight/tileflight/errkind"
)

// Header lengths.
const (
	MinHeaderLen      = 16
	ExtendedHeaderLen = 32
	// MaxBlockSize is c-blosc2's BLOSC2_MAXBLOCKSIZE.
	MaxBlockSize = 536866816
	// MaxDictSize is c-blosc2's BLOSC2_MAXDICTSIZE.
	MaxDictSize = 128 * 1024
)

// Header flag bits (byte 2).
const (
	flagShuffle    = 0x01
	flagMemcpyed   = 0x02
	flagBitshuffle = 0x04
	flagDelta      = 0x08
	flagDontSplit  = 0x10
)

// Blosc2 flag bits (byte 31).
const (
	b2UseDict   = 0x01
	b2Lazy      = 0x08
	b2InstrCode = 0x80
)

// Special chunk kinds (blosc2_flags bits 4-6, and the frame's special
// offsets).
const (
	SpecialNone   = 0
	SpecialZero   = 1
	SpecialNaN    = 2
	SpecialValue  = 3
	SpecialUninit = 4
)

// Codec formats (flags bits 5-7).
const (
	FormatBloscLZ = 0
	FormatLZ4     = 1
	FormatZlib    = 3
	FormatZstd    = 4
	FormatUDCodec = 6
)

// Codec codes (the compcode of cparams and of the frame header).
const (
	CodecBloscLZ = 0
	CodecLZ4     = 1
	CodecLZ4HC   = 2
	CodecZlib    = 4
	CodecZstd    = 5
)

// Filter IDs.
const (
	FilterNone           = 0
	FilterShuffle        = 1
	FilterBitshuffle     = 2
	FilterDelta          = 3
	FilterTruncPrec      = 4
	FilterBytedeltaBuggy = 34
	FilterBytedelta      = 35
)

// Header is a decoded chunk header.
type Header struct {
	Version     uint8
	VersionLZ   uint8
	Flags       uint8
	Typesize    int
	NBytes      int
	BlockSize   int
	CBytes      int
	Extended    bool
	Filters     [6]uint8
	FiltersMeta [6]uint8
	UDCodec     uint8
	CodecMeta   uint8
	Flags2      uint8 // blosc2_flags2 (byte 30)
	B2Flags     uint8 // blosc2_flags (byte 31)
}

// Special is the special kind of the chunk (SpecialNone for regular ones).
func (h *Header) Special() int {
	if !h.Extended {
		return SpecialNone
	}
	return int(h.B2Flags>>4) & 7
}

// Memcpyed tells whether blocks are stored uncompressed.
func (h *Header) Memcpyed() bool { return h.Flags&flagMemcpyed != 0 }

// Format is the codec format of the streams.
func (h *Header) Format() int { return int(h.Flags >> 5) }

// HeaderLen is the header's length.
func (h *Header) HeaderLen() int {
	if h.Extended {
		return ExtendedHeaderLen
	}
	return MinHeaderLen
}

// NBlocks is the number of blocks.
func (h *Header) NBlocks() int {
	if h.NBytes == 0 {
		return 0
	}
	return (h.NBytes + h.BlockSize - 1) / h.BlockSize
}

// Split tells whether full blocks are stored as typesize streams.
func (h *Header) Split() bool { return h.Flags&flagDontSplit == 0 }

func corrupt(format string, args ...any) error {
	return errkind.Errorf(errkind.DataLoss, "blosc2 chunk: "+format, args...)
}

// ParseHeader decodes the header at the start of b.
func ParseHeader(b []byte) (Header, error) {
	var h Header
	if len(b) < MinHeaderLen {
		return h, corrupt("truncated: %d bytes, the header needs %d", len(b), MinHeaderLen)
	}
	h.Version, h.VersionLZ, h.Flags, h.Typesize = b[0], b[1], b[2], int(b[3])
	nb := int32(binary.LittleEndian.Uint32(b[4:]))
	bs := int32(binary.LittleEndian.Uint32(b[8:]))
	cb := int32(binary.LittleEndian.Uint32(b[12:]))
	if nb < 0 || cb < MinHeaderLen || h.Typesize == 0 {
		return h, corrupt("bad header (nbytes %d, cbytes %d, typesize %d)", nb, cb, h.Typesize)
	}
	if bs <= 0 || bs > MaxBlockSize {
		return h, corrupt("bad block size %d", bs)
	}
	h.NBytes, h.BlockSize, h.CBytes = int(nb), int(bs), int(cb)
	if h.Flags&flagShuffle != 0 && h.Flags&flagBitshuffle != 0 {
		h.Extended = true
		if len(b) < ExtendedHeaderLen || h.CBytes < ExtendedHeaderLen {
			return h, corrupt("truncated extended header (%d bytes, cbytes %d)", len(b), h.CBytes)
		}
		copy(h.Filters[:], b[16:22])
		h.UDCodec, h.CodecMeta = b[22], b[23]
		copy(h.FiltersMeta[:], b[24:30])
		h.Flags2, h.B2Flags = b[30], b[31]
		if h.Version == 3 { // alpha headers left the last slot uninitialized
			h.Filters[5], h.FiltersMeta[5] = 0, 0
		}
		if h.Flags2&1 != 0 {
			return h, errkind.Errorf(errkind.Unimplemented, "blosc2 chunk: variable-length blocks are not supported")
		}
		if h.Flags2 != 0 && h.Version > 6 {
			return h, errkind.Errorf(errkind.Unimplemented, "blosc2 chunk: format version %d with flags2 %#x is not supported", h.Version, h.Flags2)
		}
		switch sp := h.Special(); sp {
		case SpecialNone, SpecialZero, SpecialUninit:
		case SpecialNaN:
			if h.Typesize != 4 && h.Typesize != 8 {
				return h, corrupt("NaN chunk with typesize %d", h.Typesize)
			}
		case SpecialValue:
			ts := h.CBytes - ExtendedHeaderLen
			if ts <= 0 || ts > h.NBytes || h.NBytes%ts != 0 {
				return h, corrupt("repeated-value chunk with value size %d and nbytes %d", ts, h.NBytes)
			}
		default:
			return h, corrupt("unknown special kind %d", sp)
		}
	} else {
		// Blosc1 header: the filters are in the flags.
		if h.Flags&flagShuffle != 0 && h.Typesize > 1 {
			h.Filters[5] = FilterShuffle
		}
		if h.Flags&flagBitshuffle != 0 {
			h.Filters[5] = FilterBitshuffle
		}
		if h.Flags&flagDelta != 0 {
			h.Filters[4] = FilterDelta
		}
	}
	if h.NBytes > 0 && h.BlockSize > h.NBytes {
		h.BlockSize = h.NBytes
	}
	return h, nil
}

// Sizes returns nbytes and cbytes from a chunk's first 16 bytes.
func Sizes(b []byte) (nbytes, cbytes int, err error) {
	h, err := ParseHeader(b)
	if err != nil && len(b) >= MinHeaderLen && h.CBytes > 0 {
		return h.NBytes, h.CBytes, err
	}
	return h.NBytes, h.CBytes, err
}

func (h *Header) String() string {
	return fmt.Sprintf("v%d typesize %d nbytes %d blocksize %d cbytes %d filters %v codec %d", h.Version, h.Typesize, h.NBytes, h.BlockSize, h.CBytes, h.Filters, h.Format())
}
