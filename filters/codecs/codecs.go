// Package codecs owns TileDB's non-compression filters, both directions,
// byte-exact with TileDB: byteshuffle, bitshuffle, bit width reduction,
// positive delta, the MD5 and SHA-256 checksums, float scaling, XOR, WebP
// and the internal AES-256-GCM encryption filter.
//
// Each filter is a stage.Stage that works on one chunk (package filters
// owns the pipeline runner and the chunk framing). The hot read-path
// transforms are also exported as allocation-free kernels (ByteUnshuffle,
// BitUnshuffle, ...) and the size-preserving stages implement ReverseInto so
// that a runner can unfilter straight into a buffer it owns.
package codecs

import (
	"fmt"
	"io"

	"github.com/tileflight/tileflight/errkind"
	"github.com/tileflight/tileflight/filters/stage"
	"github.com/tileflight/tileflight/format/datatype"
	"github.com/tileflight/tileflight/format/pipeline"
	"github.com/tileflight/tileflight/format/wire"
)

// Options carries what some filters need beyond their serialized options.
type Options struct {
	// EncryptionKey is the 32-byte AES-256-GCM key (AES256GCM only).
	EncryptionKey []byte
	// Rand supplies the AES-GCM IVs on Forward; nil means crypto/rand.
	// Tests set it to reproduce TileDB's files byte for byte.
	Rand io.Reader
}

// ErrChecksum is wrapped by every checksum verification failure. It wraps
// wire.ErrCorrupt: a failed checksum is stored data that changed, and must
// classify as data loss like any other corruption.
var ErrChecksum error = errkind.NewWrapping(errkind.DataLoss, errkind.Overrides, "checksum mismatch", wire.ErrCorrupt)

// ErrDecrypt is wrapped when AES-256-GCM authentication fails: a wrong key
// or corrupt data.
var ErrDecrypt error = errkind.New(errkind.FailedPrecondition, errkind.Overrides, "decryption failed (wrong key or corrupt data)")

// ErrUnimplemented is wrapped when a filter direction is not supported.
var ErrUnimplemented error = errkind.New(errkind.Unimplemented, errkind.Overrides, "not implemented")

// IntoReverser is implemented by the stages whose reverse output size is
// known from their metadata. ReverseInto unfilters into dst[:n] when
// cap(dst) >= n (n being the chunk's unfiltered size) and allocates
// otherwise; the returned Data aliases dst in the first case.
type IntoReverser interface {
	ReverseInto(ctx *stage.Context, in stage.Buffers, dst []byte) (stage.Buffers, error)
}

// New builds the stage for filter f.
func New(f pipeline.Filter, opts Options) (stage.Stage, error) {
	switch f.Type {
	case pipeline.Byteshuffle:
		return byteshuffle{}, nil
	case pipeline.Bitshuffle:
		return bitshuffle{}, nil
	case pipeline.BitWidthReduction:
		return bitWidth{window: f.MaxWindow}, nil
	case pipeline.PositiveDelta:
		return positiveDelta{window: f.MaxWindow}, nil
	case pipeline.ChecksumMD5:
		return checksum{md5: true}, nil
	case pipeline.ChecksumSHA256:
		return checksum{}, nil
	case pipeline.ScaleFloat:
		switch f.ByteWidth {
		case 1, 2, 4, 8:
		default:
			return nil, fmt.Errorf("scale_float: byte width %d is not 1, 2, 4 or 8", f.ByteWidth)
		}
		return scaleFloat{scale: f.Scale, offset: f.Offset, width: int(f.ByteWidth)}, nil
	case pipeline.XOR:
		return xorFilter{}, nil
	case pipeline.WebP:
		if f.WebPFormat < pipeline.WebPRGB || f.WebPFormat > pipeline.WebPBGRA {
			return nil, fmt.Errorf("webp: pixel format %d is not RGB, BGR, RGBA or BGRA", f.WebPFormat)
		}
		if f.WebPXExtent == 0 || f.WebPYExtent == 0 {
			return nil, fmt.Errorf("webp: tile extents %dx%d: both must be set", f.WebPYExtent, f.WebPXExtent)
		}
		return webpFilter{f: f}, nil
	case pipeline.AES256GCM:
		return newAES(opts)
	}
	return nil, fmt.Errorf("filters/codecs: %s is not one of this package's filters", f.Type)
}

// sameType is the OutputType of every filter that does not change the
// datatype.
type sameType struct{}

func (sameType) OutputType(in datatype.Datatype) datatype.Datatype { return in }

// prependMeta returns own followed by the input metadata parts, which is
// how every filter passes earlier metadata on.
func prependMeta(own []byte, in [][]byte) [][]byte {
	out := make([][]byte, 0, 1+len(in))
	out = append(out, own)
	return append(out, in...)
}

// partSizes parses the common "u32 part count, u32 size per part" metadata
// and checks that the parts exactly tile data. It returns the sizes and
// the reader positioned after them.
func partSizes(name string, meta []byte, dataLen int) (*wire.Reader, []uint32, error) {
	r := wire.NewReader(meta)
	n := r.Count(4, 4, name+": number of parts")
	if r.Err() != nil {
		return nil, nil, fmt.Errorf("%s: metadata: %w", name, r.Err())
	}
	sizes := make([]uint32, n)
	total := uint64(0)
	for i := range sizes {
		sizes[i] = r.Uint32("part size")
		total += uint64(sizes[i])
	}
	if err := r.Err(); err != nil {
		return nil, nil, fmt.Errorf("%s: metadata: %w", name, err)
	}
	if total > uint64(dataLen) {
		return nil, nil, fmt.Errorf("%s: %w: parts hold %d bytes but the data has %d", name, wire.ErrTruncated, total, dataLen)
	}
	return r, sizes, nil
}

// rest wraps the metadata left for earlier stages.
func rest(r *wire.Reader) [][]byte {
	if r.Len() == 0 {
		return nil
	}
	return [][]byte{r.Rest()}
}

// grow returns dst[:n] when it has the capacity, a new slice otherwise.
func grow(dst []byte, n int) []byte {
	if cap(dst) >= n {
		return dst[:n]
	}
	return make([]byte, n)
}

// partsMeta writes the "count + sizes" metadata for parts.
func partsMeta(parts [][]byte) []byte {
	w := wire.NewWriter(make([]byte, 0, 4+4*len(parts)))
	w.Uint32(uint32(len(parts)))
	for _, p := range parts {
		w.Uint32(uint32(len(p)))
	}
	return w.Bytes()
}
