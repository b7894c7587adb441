package codecs

import (
	"bytes"
	"fmt"
	"image"
	"math"

	encwebp "github.com/gen2brain/webp"
	"golang.org/x/image/webp"

	"github.com/tileflight/tileflight/filters/stage"
	"github.com/tileflight/tileflight/format/pipeline"
	"github.com/tileflight/tileflight/format/wire"
)

// webpFilter is TileDB's WebP filter on uint8 image tiles: each data part
// is one WebP image (metadata: u32 part count, u32 encoded size per part).
// Decoding goes through golang.org/x/image/webp; lossy images are turned
// into RGB with libwebp's own arithmetic (fancy chroma upsampling and its
// fixed-point BT.601 conversion) so that the pixels equal what TileDB
// returns.
//
// Encoding goes through github.com/gen2brain/webp: libwebp itself compiled
// to WebAssembly and run by the wazero runtime (no cgo; a system libwebp is
// used instead when the binary is dynamically linked and one is installed).
// It is the only maintained cgo-free WebP encoder the Go module proxy
// serves, and it is the encoder TileDB links, so lossy tiles are real VP8
// at the quality asked, as TileDB writes them.
type webpFilter struct {
	sameType
	f pipeline.Filter
}

func (w webpFilter) depth() int {
	if w.f.WebPFormat >= pipeline.WebPRGBA {
		return 4
	}
	return 3
}

// Forward encodes each data part, which must be one whole tile (the
// pipeline never chunks a tile under WebP), as one WebP image of y extent
// rows and x extent / pixel depth columns. Lossless images keep every
// byte, alpha included under transparent pixels (libwebp's "exact"
// option); lossy images are VP8 at the filter's quality.
func (w webpFilter) Forward(_ *stage.Context, in stage.Buffers) (stage.Buffers, error) {
	d := w.depth()
	x, y := int(w.f.WebPXExtent), int(w.f.WebPYExtent)
	if x%d != 0 {
		return stage.Buffers{}, fmt.Errorf("webp: x tile extent %d is not a multiple of the %d-byte pixel", x, d)
	}
	meta := wire.NewWriter(make([]byte, 0, 4+4*len(in.Data)))
	meta.Uint32(uint32(len(in.Data)))
	out := make([][]byte, 0, len(in.Data))
	for i, part := range in.Data {
		if len(part) != x*y {
			return stage.Buffers{}, fmt.Errorf("webp: part %d has %d bytes: a WebP tile is exactly %d rows of %d bytes", i, len(part), y, x)
		}
		enc, err := w.encode(part, x/d, y)
		if err != nil {
			return stage.Buffers{}, fmt.Errorf("webp: part %d: encoding a %dx%d image: %w", i, x/d, y, err)
		}
		if uint64(len(enc)) > math.MaxUint32 {
			return stage.Buffers{}, fmt.Errorf("webp: part %d: %d encoded bytes do not fit the u32 part size", i, len(enc))
		}
		meta.Uint32(uint32(len(enc)))
		out = append(out, enc)
	}
	return stage.Buffers{Meta: prependMeta(meta.Bytes(), in.Meta), Data: out}, nil
}

// webpQuality maps TileDB's float quality (0..100) to the encoder's
// integer one. The encoder's API reads 0 as "default" (75), so quality
// below 1 is encoded at 1, its lowest real setting.
func webpQuality(q float32) int {
	return int(max(1, min(100, math.Round(float64(q)))))
}

// encode turns one tile of packed pixels into a WebP image.
func (w webpFilter) encode(px []byte, wd, ht int) (b []byte, err error) {
	img := image.NewNRGBA(image.Rect(0, 0, wd, ht))
	d := w.depth()
	bgr := w.f.WebPFormat == pipeline.WebPBGR || w.f.WebPFormat == pipeline.WebPBGRA
	for i := range wd * ht {
		s, o := px[i*d:i*d+d], img.Pix[4*i:4*i+4]
		o[0], o[1], o[2], o[3] = s[0], s[1], s[2], 255
		if bgr {
			o[0], o[2] = s[2], s[0]
		}
		if d == 4 {
			o[3] = s[3]
		}
	}
	opt := encwebp.Options{Lossless: w.f.WebPLossless, Exact: true, Quality: webpQuality(w.f.WebPQuality), Method: encwebp.DefaultMethod}
	if w.f.WebPLossless {
		// For lossless, quality and method are effort, not fidelity: 25
		// and 1 compress a 512 x 512 photo-like tile as well as libwebp's
		// default (75, 4) in half the time (BenchmarkWebPForward).
		opt.Quality, opt.Method = 25, 1
	}
	// The encoder runs in a WebAssembly sandbox; a trap there surfaces as
	// a panic or an error, never as a crash of the daemon.
	defer func() {
		if p := recover(); p != nil {
			b, err = nil, fmt.Errorf("encoder failure: %v", p)
		}
	}()
	var buf bytes.Buffer
	if err := encwebp.Encode(&buf, img, opt); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// webpMaxSide bounds the image a header may announce: TileDB limits WebP
// tiles to 16383x16383 pixels.
const webpMaxSide = 16383

func (w webpFilter) Reverse(ctx *stage.Context, in stage.Buffers) (stage.Buffers, error) {
	data := stage.Concat(in.Data)
	r, sizes, err := partSizes("webp", stage.Concat(in.Meta), len(data))
	if err != nil {
		return stage.Buffers{}, err
	}
	var out []byte
	for i, s := range sizes {
		part := data[:s]
		data = data[s:]
		cfg, err := webp.DecodeConfig(bytes.NewReader(part))
		if err != nil {
			return stage.Buffers{}, fmt.Errorf("webp: %w: part %d: %v", wire.ErrCorrupt, i, err)
		}
		if cfg.Width <= 0 || cfg.Height <= 0 || cfg.Width > webpMaxSide || cfg.Height > webpMaxSide {
			return stage.Buffers{}, fmt.Errorf("webp: %w: part %d: image of %dx%d pixels", wire.ErrCorrupt, i, cfg.Width, cfg.Height)
		}
		// A tile image is exactly the tile: y extent rows of x extent
		// bytes. Checking that before decoding also keeps a forged header
		// from sizing a huge allocation.
		if x, y := int(w.f.WebPXExtent), int(w.f.WebPYExtent); cfg.Width*w.depth() != x || cfg.Height != y {
			return stage.Buffers{}, fmt.Errorf("webp: %w: part %d: image of %dx%d pixels does not fill the %dx%d-byte tile",
				wire.ErrCorrupt, i, cfg.Width, cfg.Height, y, x)
		}
		img, err := decodeWebP(part)
		if err != nil {
			return stage.Buffers{}, fmt.Errorf("webp: %w: part %d: %v", wire.ErrCorrupt, i, err)
		}
		out, err = w.appendPixels(out, img)
		if err != nil {
			return stage.Buffers{}, fmt.Errorf("webp: part %d: %w", i, err)
		}
	}
	return stage.Buffers{Meta: rest(r), Data: [][]byte{out}}, nil
}

// decodeWebP runs the third-party decoder, turning a panic on hostile
// input (none is known) into an error: no input may stop the daemon.
func decodeWebP(b []byte) (img image.Image, err error) {
	defer func() {
		if p := recover(); p != nil {
			img, err = nil, fmt.Errorf("decoder failure: %v", p)
		}
	}()
	return webp.Decode(bytes.NewReader(b))
}

// appendPixels appends img in the filter's pixel format.
func (w webpFilter) appendPixels(out []byte, img image.Image) ([]byte, error) {
	b := img.Bounds()
	wd, ht := b.Dx(), b.Dy()
	d := w.depth()
	start := len(out)
	out = append(out, make([]byte, wd*ht*d)...)
	px := out[start:]
	bgr := w.f.WebPFormat == pipeline.WebPBGR || w.f.WebPFormat == pipeline.WebPBGRA
	put := func(i int, r, g, bl, a byte) {
		p := px[i*d : i*d+d]
		if bgr {
			r, bl = bl, r
		}
		p[0], p[1], p[2] = r, g, bl
		if d == 4 {
			p[3] = a
		}
	}
	switch m := img.(type) {
	case *image.NRGBA:
		for y := range ht {
			row := m.Pix[m.PixOffset(b.Min.X, b.Min.Y+y):]
			for x := range wd {
				s := row[4*x : 4*x+4]
				put(y*wd+x, s[0], s[1], s[2], s[3])
			}
		}
	case *image.YCbCr:
		yuvToRGB(m, nil, put)
	case *image.NYCbCrA:
		yuvToRGB(&m.YCbCr, m, put)
	default:
		return nil, fmt.Errorf("%w: unexpected decoded image type %T", wire.ErrCorrupt, img)
	}
	return out, nil
}

// yuvToRGB converts a 4:2:0 image as libwebp's default decoder does: the
// chroma of each pixel interpolated from its four nearest chroma samples
// with weights 9/16, 3/16, 3/16, 1/16 (nearest first; at the image edges
// the missing neighbours are replaced by the nearest sample), then
// libwebp's 14-bit fixed-point BT.601 matrix.
func yuvToRGB(m *image.YCbCr, alpha *image.NYCbCrA, put func(i int, r, g, b, a byte)) {
	b := m.Rect
	wd, ht := b.Dx(), b.Dy()
	cw, ch := (wd+1)/2, (ht+1)/2
	near := func(p, n int) (int, int) { // nearest and second chroma index
		if p == 0 {
			return 0, 0
		}
		if p%2 == 1 {
			return p / 2, min(p/2+1, n-1)
		}
		return p / 2, p/2 - 1
	}
	cb := func(cy, cx int) (int, int) {
		o := (cy)*m.CStride + cx
		return int(m.Cb[o]), int(m.Cr[o])
	}
	for y := range ht {
		ny, fy := near(y, ch)
		yrow := m.Y[y*m.YStride:]
		for x := range wd {
			nx, fx := near(x, cw)
			u0, v0 := cb(ny, nx)
			u1, v1 := cb(ny, fx)
			u2, v2 := cb(fy, nx)
			u3, v3 := cb(fy, fx)
			u := (9*u0 + 3*u1 + 3*u2 + u3 + 8) >> 4
			v := (9*v0 + 3*v1 + 3*v2 + v3 + 8) >> 4
			yy := int(yrow[x])
			a := byte(255)
			if alpha != nil {
				a = alpha.A[y*alpha.AStride+x]
			}
			put(y*wd+x, yuvR(yy, v), yuvG(yy, u, v), yuvB(yy, u), a)
		}
	}
}

func mulHi(v, c int) int { return (v * c) >> 8 }

func clip8(v int) byte {
	if v&^16383 == 0 {
		return byte(v >> 6)
	}
	if v < 0 {
		return 0
	}
	return 255
}

func yuvR(y, v int) byte    { return clip8(mulHi(y, 19077) + mulHi(v, 26149) - 14234) }
func yuvG(y, u, v int) byte { return clip8(mulHi(y, 19077) - mulHi(u, 6419) - mulHi(v, 13320) + 8708) }
func yuvB(y, u int) byte    { return clip8(mulHi(y, 19077) + mulHi(u, 33050) - 17685) }
