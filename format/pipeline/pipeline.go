// Package pipeline owns the serialized form of a TileDB filter pipeline:
// the list of filters with their options as stored in array schemas and
// generic tile headers. It only encodes and decodes the description; the
// filters themselves live in package filters.
package pipeline

import (
	"fmt"
	"strings"

	"github.com/tileflight/tileflight/format/datatype"
	"github.com/tileflight/tileflight/format/wire"
)

// FilterType is TileDB's on-disk filter code.
type FilterType uint8

// Filter codes as stored on disk.
const (
	None              FilterType = 0
	Gzip              FilterType = 1
	Zstd              FilterType = 2
	LZ4               FilterType = 3
	RLE               FilterType = 4
	Bzip2             FilterType = 5
	DoubleDelta       FilterType = 6
	BitWidthReduction FilterType = 7
	Bitshuffle        FilterType = 8
	Byteshuffle       FilterType = 9
	PositiveDelta     FilterType = 10
	AES256GCM         FilterType = 11 // internal: never serialized in schemas
	ChecksumMD5       FilterType = 12
	ChecksumSHA256    FilterType = 13
	Dictionary        FilterType = 14
	ScaleFloat        FilterType = 15
	XOR               FilterType = 16
	Deprecated        FilterType = 17
	WebP              FilterType = 18
	Delta             FilterType = 19
)

var filterNames = map[FilterType]string{
	None: "none", Gzip: "gzip", Zstd: "zstd", LZ4: "lz4", RLE: "rle", Bzip2: "bzip2",
	DoubleDelta: "double_delta", BitWidthReduction: "bit_width_reduction",
	Bitshuffle: "bitshuffle", Byteshuffle: "byteshuffle", PositiveDelta: "positive_delta",
	AES256GCM: "aes_256_gcm", ChecksumMD5: "checksum_md5", ChecksumSHA256: "checksum_sha256",
	Dictionary: "dictionary", ScaleFloat: "scale_float", XOR: "xor", Deprecated: "deprecated",
	WebP: "webp", Delta: "delta",
}

// String returns the lower-case filter name used in schema JSON.
func (t FilterType) String() string {
	if n, ok := filterNames[t]; ok {
		return n
	}
	return fmt.Sprintf("filter(%d)", uint8(t))
}

// ParseFilterType accepts a filter name as in schema JSON.
func ParseFilterType(s string) (FilterType, error) {
	n := strings.TrimPrefix(strings.ToLower(strings.TrimSpace(s)), "tiledb_filter_")
	for t, name := range filterNames {
		if name == n && t != AES256GCM && t != Deprecated {
			return t, nil
		}
	}
	return 0, fmt.Errorf("unknown filter %q", s)
}

// Compressor is the compressor code stored inside compression filter
// options. It is a separate enumeration from FilterType.
type Compressor uint8

// Compressor codes as stored in compression filter options.
const (
	NoCompression Compressor = 0
	CompGzip      Compressor = 1
	CompZstd      Compressor = 2
	CompLZ4       Compressor = 3
	CompRLE       Compressor = 4
	CompBzip2     Compressor = 5
	CompDoubleDel Compressor = 6
	CompDict      Compressor = 7
	CompDelta     Compressor = 8
)

// CompressorFor maps a compression filter type to its compressor code.
func CompressorFor(t FilterType) (Compressor, bool) {
	switch t {
	case Gzip:
		return CompGzip, true
	case Zstd:
		return CompZstd, true
	case LZ4:
		return CompLZ4, true
	case RLE:
		return CompRLE, true
	case Bzip2:
		return CompBzip2, true
	case DoubleDelta:
		return CompDoubleDel, true
	case Dictionary:
		return CompDict, true
	case Delta:
		return CompDelta, true
	}
	return NoCompression, false
}

// IsCompression reports whether t serializes compressor options.
func (t FilterType) IsCompression() bool { _, ok := CompressorFor(t); return ok }

// WebPFormat is the pixel layout of the WebP filter.
type WebPFormat uint8

// WebP input formats.
const (
	WebPNone WebPFormat = 0
	WebPRGB  WebPFormat = 1
	WebPBGR  WebPFormat = 2
	WebPRGBA WebPFormat = 3
	WebPBGRA WebPFormat = 4
)

// Filter is one filter of a pipeline with all of its options. Only the
// fields that belong to Type are meaningful.
type Filter struct {
	Type FilterType

	// Compression filters (gzip, zstd, lz4, rle, bzip2, dictionary, delta,
	// double_delta).
	Compressor Compressor
	Level      int32
	// Reinterpret is the delta/double_delta reinterpret datatype (stored
	// from format version 19 for delta and 20 for double delta; Any when
	// absent).
	Reinterpret datatype.Datatype

	// Bit width reduction and positive delta.
	MaxWindow uint32

	// Scale float.
	Scale     float64
	Offset    float64
	ByteWidth uint64

	// WebP.
	WebPQuality  float32
	WebPFormat   WebPFormat
	WebPLossless bool
	WebPYExtent  uint16
	WebPXExtent  uint16
}

// Pipeline is a serialized filter pipeline.
type Pipeline struct {
	MaxChunkSize uint32
	Filters      []Filter
}

// DefaultMaxChunkSize is TileDB's default pipeline chunk size (64 KiB).
const DefaultMaxChunkSize = 64 * 1024

// Has reports whether the pipeline contains a filter of type t.
func (p Pipeline) Has(t FilterType) bool {
	for _, f := range p.Filters {
		if f.Type == t {
			return true
		}
	}
	return false
}

// Empty reports whether the pipeline has no filters.
func (p Pipeline) Empty() bool { return len(p.Filters) == 0 }

// Decode reads a pipeline written at array format version.
func Decode(r *wire.Reader, version uint32) (Pipeline, error) {
	var p Pipeline
	p.MaxChunkSize = r.Uint32("filter pipeline: max chunk size")
	n := r.Count(4, 5, "filter pipeline: number of filters")
	if r.Err() != nil {
		return p, r.Err()
	}
	p.Filters = make([]Filter, 0, n)
	for i := 0; i < n; i++ {
		f, err := DecodeFilter(r, version)
		if err != nil {
			return p, fmt.Errorf("filter pipeline: filter %d: %w", i, err)
		}
		p.Filters = append(p.Filters, f)
	}
	return p, nil
}

// DecodeFilter reads one filter (type, options size, options).
func DecodeFilter(r *wire.Reader, version uint32) (Filter, error) {
	var f Filter
	f.Type = FilterType(r.Uint8("filter type"))
	size := r.Uint32("filter options size")
	opts := wire.NewReader(r.BytesU64(uint64(size), "filter options"))
	if r.Err() != nil {
		return f, r.Err()
	}
	f.Reinterpret = datatype.Any
	switch f.Type {
	case None, Bitshuffle, Byteshuffle, ChecksumMD5, ChecksumSHA256, XOR, AES256GCM:
		// no options
	case Gzip, Zstd, LZ4, RLE, Bzip2, DoubleDelta, Dictionary, Delta:
		if size == 0 {
			// TileDB writes no options for a compression filter without
			// a compressor; treat it as the default level.
			f.Compressor, _ = CompressorFor(f.Type)
			f.Level = -1
			break
		}
		f.Compressor = Compressor(opts.Uint8("compressor type"))
		f.Level = opts.Int32("compression level")
		if (f.Type == DoubleDelta && version >= 20) || (f.Type == Delta && version >= 19) {
			f.Reinterpret = datatype.Datatype(opts.Uint8("reinterpret datatype"))
			if opts.Err() == nil && !f.Reinterpret.Valid() {
				return f, fmt.Errorf("%s: invalid reinterpret datatype %d", f.Type, f.Reinterpret)
			}
		}
	case BitWidthReduction, PositiveDelta:
		f.MaxWindow = opts.Uint32("max window size")
	case ScaleFloat:
		f.Scale = opts.Float64("scale")
		f.Offset = opts.Float64("offset")
		f.ByteWidth = opts.Uint64("byte width")
	case WebP:
		// Stored as TileDB's in-memory struct: float quality, uint8 format,
		// bool lossless, uint16 y extent, uint16 x extent, padded to 12 bytes.
		f.WebPQuality = opts.Float32("webp quality")
		f.WebPFormat = WebPFormat(opts.Uint8("webp format"))
		f.WebPLossless = opts.Bool("webp lossless")
		f.WebPYExtent = opts.Uint16("webp y extent")
		f.WebPXExtent = opts.Uint16("webp x extent")
	default:
		return f, fmt.Errorf("%w: unknown filter type %d", wire.ErrCorrupt, uint8(f.Type))
	}
	if err := opts.Err(); err != nil {
		return f, fmt.Errorf("%s options: %w", f.Type, err)
	}
	return f, nil
}

// Encode appends the pipeline as TileDB writes it at format version.
func Encode(w *wire.Writer, p Pipeline, version uint32) {
	w.Uint32(p.MaxChunkSize)
	w.Uint32(uint32(len(p.Filters)))
	for _, f := range p.Filters {
		EncodeFilter(w, f, version)
	}
}

// EncodeFilter appends one filter.
func EncodeFilter(w *wire.Writer, f Filter, version uint32) {
	w.Uint8(uint8(f.Type))
	sizeAt := w.Len()
	w.Uint32(0)
	start := w.Len()
	switch f.Type {
	case Gzip, Zstd, LZ4, RLE, Bzip2, DoubleDelta, Dictionary, Delta:
		c := f.Compressor
		if c == NoCompression {
			c, _ = CompressorFor(f.Type)
		}
		w.Uint8(uint8(c))
		w.Int32(f.Level)
		if (f.Type == DoubleDelta && version >= 20) || (f.Type == Delta && version >= 19) {
			w.Uint8(uint8(f.Reinterpret))
		}
	case BitWidthReduction, PositiveDelta:
		w.Uint32(f.MaxWindow)
	case ScaleFloat:
		w.Float64(f.Scale)
		w.Float64(f.Offset)
		w.Uint64(f.ByteWidth)
	case WebP:
		w.Float32(f.WebPQuality)
		w.Uint8(uint8(f.WebPFormat))
		w.Bool(f.WebPLossless)
		w.Uint16(f.WebPYExtent)
		w.Uint16(f.WebPXExtent)
		w.Uint16(0) // struct padding
	}
	w.PatchUint32(sizeAt, uint32(w.Len()-start))
}
