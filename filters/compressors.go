package filters

import (
	"bytes"
	"fmt"
	"io"
	"sync"

	cbzip2 "compress/bzip2"

	dbzip2 "github.com/dsnet/compress/bzip2"
	"github.com/klauspost/compress/zlib"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"

	"github.com/tileflight/tileflight/format/wire"
)

// The general-purpose compressors. TileDB links zlib, libzstd, liblz4 and
// libbzip2; these are pure-Go implementations of the same formats. Their
// decoders accept anything the C libraries write. Their encoders produce
// valid streams that the C libraries decode, but (except lz4, whose
// reference-compatible mode is used) not the same bytes as TileDB.

// exact reads exactly len(dst) bytes from r and then requires the stream
// to end, so that a part holding more or fewer bytes than its recorded
// length is reported (and so that trailing checksums are verified).
func exact(name string, r io.Reader, dst []byte) error {
	if _, err := io.ReadFull(r, dst); err != nil {
		return fmt.Errorf("%w: %s: %v", wire.ErrCorrupt, name, err)
	}
	var one [1]byte
	n, err := r.Read(one[:])
	if n != 0 {
		return fmt.Errorf("%w: %s: part decompresses to more than %d bytes", wire.ErrCorrupt, name, len(dst))
	}
	if err != io.EOF {
		if err == nil {
			err = io.ErrNoProgress
		}
		return fmt.Errorf("%w: %s: %v", wire.ErrCorrupt, name, err)
	}
	return nil
}

// gzip is TileDB's "gzip": a zlib stream (deflate with zlib header and
// Adler-32), levels 0..9, any negative level meaning zlib's default (6).
type gzipCodec struct{ level int }

var zlibReaders sync.Pool

func newGzip(level int32) (codec, error) {
	if level > 9 {
		return nil, fmt.Errorf("%w: gzip level %d (0..9)", ErrUnsupported, level)
	}
	if level < 0 {
		level = zlib.DefaultCompression
	}
	return gzipCodec{level: int(level)}, nil
}

// zlibWriters keeps a few idle writers per level (level+1). A free list,
// not a sync.Pool: a writer is about a megabyte to build, and a pool is
// emptied by every garbage collection, which a large write triggers
// often, while fragment metadata compresses a dozen small generic tiles.
var zlibWriters [11]chan *zlib.Writer

func init() {
	for i := range zlibWriters {
		zlibWriters[i] = make(chan *zlib.Writer, 4)
	}
}

func (g gzipCodec) compress(dst, src []byte) ([]byte, error) {
	buf := bytes.NewBuffer(dst)
	free := zlibWriters[g.level+1]
	var zw *zlib.Writer
	select {
	case zw = <-free:
	default:
	}
	if zw == nil {
		var err error
		if zw, err = zlib.NewWriterLevel(buf, g.level); err != nil {
			return dst, err
		}
	} else {
		zw.Reset(buf)
	}
	if _, err := zw.Write(src); err != nil {
		return dst, err
	}
	if err := zw.Close(); err != nil {
		return dst, err
	}
	select {
	case free <- zw:
	default:
	}
	return buf.Bytes(), nil
}

func (gzipCodec) decompress(dst, src []byte) error {
	br := bytes.NewReader(src)
	zr, _ := zlibReaders.Get().(io.ReadCloser)
	var err error
	if zr == nil {
		zr, err = zlib.NewReader(br)
	} else {
		err = zr.(zlib.Resetter).Reset(br, nil)
	}
	if err != nil {
		return fmt.Errorf("%w: zlib: %v", wire.ErrCorrupt, err)
	}
	err = exact("zlib", zr, dst)
	zlibReaders.Put(zr)
	return err
}

// zstd: TileDB passes the level to libzstd (any level below -7 meaning 3).
// The Go encoder has four speeds, chosen with zstd.EncoderLevelFromZstd:
// below 3 fastest, 3..5 default, 6..9 better, 10+ best. Its output is a
// standard frame with the content size, which libzstd decodes, but it is
// not byte-identical to libzstd's at the same level.
type zstdCodec struct{ level zstd.EncoderLevel }

func newZstd(level int32) codec {
	if level < -7 {
		level = 3
	}
	return zstdCodec{level: zstd.EncoderLevelFromZstd(int(level))}
}

var (
	zstdDecOnce sync.Once
	zstdDec     *zstd.Decoder
	zstdEncMu   sync.Mutex
	zstdEncs    = map[zstd.EncoderLevel]*zstd.Encoder{}
)

func zstdEncoder(l zstd.EncoderLevel) (*zstd.Encoder, error) {
	zstdEncMu.Lock()
	defer zstdEncMu.Unlock()
	if e := zstdEncs[l]; e != nil {
		return e, nil
	}
	// EncodeAll is safe for concurrent use; one encoder per level keeps
	// its internal state pool warm. No frame checksum, like libzstd's
	// default; an empty part still gets a frame, which libzstd requires.
	e, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(l), zstd.WithEncoderCRC(false), zstd.WithZeroFrames(true))
	if err != nil {
		return nil, err
	}
	zstdEncs[l] = e
	return e, nil
}

func zstdDecoder() *zstd.Decoder {
	zstdDecOnce.Do(func() {
		zstdDec, _ = zstd.NewReader(nil, zstd.WithDecoderConcurrency(0), zstd.WithDecoderMaxMemory(1<<32))
	})
	return zstdDec
}

func (z zstdCodec) compress(dst, src []byte) ([]byte, error) {
	e, err := zstdEncoder(z.level)
	if err != nil {
		return dst, err
	}
	return e.EncodeAll(src, dst), nil
}

func (zstdCodec) decompress(dst, src []byte) error {
	var h zstd.Header
	if err := h.Decode(src); err != nil {
		if len(src) == 0 && len(dst) == 0 {
			return nil
		}
		return fmt.Errorf("%w: zstd: %v", wire.ErrCorrupt, err)
	}
	if !h.HasFCS {
		// No content size to check first: stream into dst, bounded by it.
		d, err := zstd.NewReader(bytes.NewReader(src), zstd.WithDecoderConcurrency(1))
		if err != nil {
			return fmt.Errorf("%w: zstd: %v", wire.ErrCorrupt, err)
		}
		defer d.Close()
		return exact("zstd", d, dst)
	}
	if h.FrameContentSize > uint64(len(dst)) {
		return fmt.Errorf("%w: zstd: frame holds %d bytes, the part %d", wire.ErrCorrupt, h.FrameContentSize, len(dst))
	}
	out, err := zstdDecoder().DecodeAll(src, dst[:0])
	if err != nil {
		return fmt.Errorf("%w: zstd: %v", wire.ErrCorrupt, err)
	}
	if len(out) != len(dst) {
		return fmt.Errorf("%w: zstd: part decompresses to %d bytes, want %d", wire.ErrCorrupt, len(out), len(dst))
	}
	if len(out) > 0 && &out[0] != &dst[0] {
		copy(dst, out) // several frames: DecodeAll may have grown the buffer
	}
	return nil
}

// lz4 is a raw LZ4 block. The reference-compatible compressor reproduces
// LZ4_compress_default, which TileDB calls (the level is ignored).
type lz4Codec struct{}

var lz4Comps = sync.Pool{New: func() any { return new(lz4.CompressorCCompat) }}

func (lz4Codec) compress(dst, src []byte) ([]byte, error) {
	start := len(dst)
	bound := lz4.CompressBlockBound(len(src))
	dst = grow(dst, bound)
	c := lz4Comps.Get().(*lz4.CompressorCCompat)
	n, err := c.CompressBlock(src, dst[start:start+bound])
	lz4Comps.Put(c)
	if err != nil {
		return dst[:start], err
	}
	if n == 0 {
		// An empty input is one token byte (no literals) in liblz4.
		dst[start] = 0
		n = 1
	}
	return dst[:start+n], nil
}

func (lz4Codec) decompress(dst, src []byte) error {
	if len(dst) == 0 {
		if len(src) == 1 && src[0] == 0 {
			return nil
		}
	}
	n, err := lz4.UncompressBlock(src, dst)
	if err != nil {
		return fmt.Errorf("%w: lz4: %v", wire.ErrCorrupt, err)
	}
	if n != len(dst) {
		return fmt.Errorf("%w: lz4: part decompresses to %d bytes, want %d", wire.ErrCorrupt, n, len(dst))
	}
	return nil
}

// bzip2: TileDB's level is the block size in 100 kB, any level below 1
// meaning 1. Reading uses the standard library, writing dsnet/compress.
type bzip2Codec struct{ level int }

func newBzip2(level int32) (codec, error) {
	if level < 1 {
		level = 1
	}
	if level > 9 {
		return nil, fmt.Errorf("%w: bzip2 level %d (1..9)", ErrUnsupported, level)
	}
	return bzip2Codec{level: int(level)}, nil
}

func (b bzip2Codec) compress(dst, src []byte) ([]byte, error) {
	buf := bytes.NewBuffer(dst)
	w, err := dbzip2.NewWriter(buf, &dbzip2.WriterConfig{Level: b.level})
	if err != nil {
		return dst, err
	}
	if _, err := w.Write(src); err != nil {
		return dst, err
	}
	if err := w.Close(); err != nil {
		return dst, err
	}
	return buf.Bytes(), nil
}

func (bzip2Codec) decompress(dst, src []byte) error {
	return exact("bzip2", cbzip2.NewReader(bytes.NewReader(src)), dst)
}

// grow extends dst by n bytes of room, keeping its contents.
func grow(dst []byte, n int) []byte {
	if cap(dst)-len(dst) >= n {
		return dst[:len(dst)+n]
	}
	nd := make([]byte, len(dst)+n, 2*len(dst)+n)
	copy(nd, dst)
	return nd
}
