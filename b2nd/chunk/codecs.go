package chunk

import (
	"bytes"
	"fmt"
	"io"
	"sync"

	"github.com/klauspost/compress/zlib"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// decompressStream decodes one stream of codec format f into dst, which
// it must fill exactly. slack is how many bytes after dst are scratch the
// decoder may overwrite: with 16 or more, zstd takes its fast path (it
// copies matches in wide words that may run past the end).
func decompressStream(f int, src, dst, dict []byte, zd *zstd.Decoder, slack int) error {
	switch f {
	case FormatBloscLZ:
		n, err := BloscLZDecompress(src, dst)
		if err != nil {
			return err
		}
		if n != len(dst) {
			return fmt.Errorf("blosclz: %d bytes decoded, want %d", n, len(dst))
		}
	case FormatLZ4:
		var n int
		var err error
		if dict != nil {
			n, err = lz4.UncompressBlockWithDict(src, dst, dict)
		} else {
			n, err = lz4.UncompressBlock(src, dst)
		}
		if err != nil {
			return fmt.Errorf("lz4: %v", err)
		}
		if n != len(dst) {
			return fmt.Errorf("lz4: %d bytes decoded, want %d", n, len(dst))
		}
	case FormatZlib:
		r, err := zlib.NewReader(bytes.NewReader(src))
		if err != nil {
			return fmt.Errorf("zlib: %v", err)
		}
		if _, err := io.ReadFull(r, dst); err != nil {
			return fmt.Errorf("zlib: %v", err)
		}
	case FormatZstd:
		if zd == nil {
			zd = plainZstd()
		}
		out, err := zd.DecodeAll(src, dst[:0:len(dst)+slack])
		if err != nil {
			return fmt.Errorf("zstd: %v", err)
		}
		if len(out) != len(dst) || (len(out) > 0 && &out[0] != &dst[0]) {
			return fmt.Errorf("zstd: %d bytes decoded, want %d", len(out), len(dst))
		}
	default:
		return fmt.Errorf("codec format %d is not supported", f)
	}
	return nil
}

var (
	zstdOnce sync.Once
	zstdDec  *zstd.Decoder
)

// plainZstd is a shared decoder without dictionary (DecodeAll is safe for
// concurrent use).
func plainZstd() *zstd.Decoder {
	zstdOnce.Do(func() {
		zstdDec, _ = zstd.NewReader(nil, zstd.WithDecoderConcurrency(0), zstd.WithDecoderMaxMemory(MaxBlockSize+1<<20), zstd.WithDecodeAllCapLimit(true), zstd.WithDecoderLowmem(true))
	})
	return zstdDec
}

// dictZstd makes a decoder for one chunk's dictionary: a zstd-format
// dictionary (what ZDICT trains) or raw content.
func dictZstd(dict []byte) (*zstd.Decoder, error) {
	var opt zstd.DOption
	if len(dict) >= 8 && dict[0] == 0x37 && dict[1] == 0xA4 && dict[2] == 0x30 && dict[3] == 0xEC {
		opt = zstd.WithDecoderDicts(dict)
	} else {
		opt = zstd.WithDecoderDictRaw(0, dict)
	}
	return zstd.NewReader(nil, opt, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxMemory(MaxBlockSize+1<<20), zstd.WithDecodeAllCapLimit(true), zstd.WithDecoderLowmem(true))
}

// compressStream encodes src with codec (a Codec* constant) at clevel into
// dst and returns the length, or 0 when it does not fit (the caller stores
// the stream raw).
func compressStream(codec, clevel int, src, dst []byte) (int, error) {
	switch codec {
	case CodecBloscLZ:
		return BloscLZCompress(src, dst), nil
	case CodecLZ4:
		n, err := lz4.CompressBlock(src, dst, nil)
		if err != nil {
			return 0, nil
		}
		return n, nil
	case CodecLZ4HC:
		n, err := lz4.CompressBlockHC(src, dst, lz4.CompressionLevel(1<<(8+clevel)), nil, nil)
		if err != nil {
			return 0, nil
		}
		return n, nil
	case CodecZlib:
		var buf bytes.Buffer
		w, err := zlib.NewWriterLevel(&buf, clevel)
		if err != nil {
			return 0, err
		}
		w.Write(src)
		w.Close()
		if buf.Len() > len(dst) {
			return 0, nil
		}
		return copy(dst, buf.Bytes()), nil
	case CodecZstd:
		enc := zstdEncoder(clevel)
		out := enc.EncodeAll(src, dst[:0])
		if len(out) > len(dst) || (len(out) > 0 && &out[0] != &dst[0]) {
			return 0, nil
		}
		return len(out), nil
	}
	return 0, fmt.Errorf("codec %d is not supported for writing", codec)
}

var (
	zstdEncMu sync.Mutex
	zstdEncs  = map[zstd.EncoderLevel]*zstd.Encoder{}
)

func zstdEncoder(clevel int) *zstd.Encoder {
	lvl := zstd.EncoderLevelFromZstd(clevel)
	zstdEncMu.Lock()
	defer zstdEncMu.Unlock()
	if e := zstdEncs[lvl]; e != nil {
		return e
	}
	e, _ := zstd.NewWriter(nil, zstd.WithEncoderLevel(lvl), zstd.WithEncoderConcurrency(1), zstd.WithZeroFrames(true))
	zstdEncs[lvl] = e
	return e
}

// CodecFormat maps a codec code to the format stored in chunk flags.
func CodecFormat(codec int) (int, error) {
	switch codec {
	case CodecBloscLZ:
		return FormatBloscLZ, nil
	case CodecLZ4, CodecLZ4HC:
		return FormatLZ4, nil
	case CodecZlib:
		return FormatZlib, nil
	case CodecZstd:
		return FormatZstd, nil
	}
	return 0, fmt.Errorf("unknown codec %d", codec)
}
