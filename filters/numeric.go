package filters

import (
	"encoding/binary"
	"fmt"
	"math/bits"

	"github.com/tileflight/tileflight/format/datatype"
	"github.com/tileflight/tileflight/format/wire"
)

// RLE, delta and double delta on fixed-width values. Values are
// little-endian; the arithmetic of delta and double delta wraps at the
// value width, so decoding depends only on the width, encoding of double
// delta also on the signedness (it sizes its bit fields from the true
// deltas).

// rleCodec: runs of equal cells (cell = the tile's cell size), each as the
// cell's bytes and a big-endian u16 run length (runs stop at 65535).
type rleCodec struct{ size int }

func (c rleCodec) compress(dst, src []byte) ([]byte, error) {
	w := c.size
	if w <= 0 || len(src)%w != 0 {
		return dst, fmt.Errorf("%w: rle: %d bytes are not whole %d-byte cells", ErrUnsupported, len(src), w)
	}
	for i := 0; i < len(src); {
		v := src[i : i+w]
		j := i + w
		run := 1
		for j < len(src) && run < 0xFFFF && string(src[j:j+w]) == string(v) {
			j += w
			run++
		}
		dst = append(dst, v...)
		dst = append(dst, byte(run>>8), byte(run))
		i = j
	}
	return dst, nil
}

func (c rleCodec) decompress(dst, src []byte) error {
	w := c.size
	rs := w + 2
	if len(src)%rs != 0 {
		return fmt.Errorf("%w: rle: %d bytes are not whole %d-byte runs", wire.ErrCorrupt, len(src), rs)
	}
	o := 0
	for p := 0; p < len(src); p += rs {
		run := int(src[p+w])<<8 | int(src[p+w+1])
		if run*w > len(dst)-o {
			return fmt.Errorf("%w: rle: runs exceed the part's %d bytes", wire.ErrCorrupt, len(dst))
		}
		if run == 0 {
			continue
		}
		copy(dst[o:o+w], src[p:p+w])
		// Double the filled span: O(log run) copies for long runs.
		for f := w; f < run*w; f *= 2 {
			copy(dst[o+f:o+run*w], dst[o:o+f])
		}
		o += run * w
	}
	if o != len(dst) {
		return fmt.Errorf("%w: rle: runs hold %d bytes, want %d", wire.ErrCorrupt, o, len(dst))
	}
	return nil
}

// valueLayout is the value width and signedness TileDB's delta and double
// delta compressors use for a datatype (strings and ANY are bytes).
func valueLayout(t datatype.Datatype) (width int, signed bool, err error) {
	switch t {
	case datatype.Float32, datatype.Float64:
		return 0, false, fmt.Errorf("%w: delta compression of %s", ErrUnsupported, t)
	case datatype.Int8, datatype.Char:
		return 1, true, nil
	case datatype.Int16:
		return 2, true, nil
	case datatype.Uint16:
		return 2, false, nil
	case datatype.Int32:
		return 4, true, nil
	case datatype.Uint32:
		return 4, false, nil
	case datatype.Int64:
		return 8, true, nil
	case datatype.Uint64:
		return 8, false, nil
	case datatype.Uint8, datatype.Bool, datatype.Blob, datatype.GeomWKB, datatype.GeomWKT, datatype.Any:
		return 1, false, nil
	}
	if t.IsString() {
		return 1, false, nil
	}
	if t.IsDatetime() || t.IsTime() {
		return 8, true, nil
	}
	return 0, false, fmt.Errorf("%w: delta compression of %s", ErrUnsupported, t)
}

func load(b []byte, w int, signed bool) uint64 {
	switch w {
	case 1:
		if signed {
			return uint64(int64(int8(b[0])))
		}
		return uint64(b[0])
	case 2:
		v := binary.LittleEndian.Uint16(b)
		if signed {
			return uint64(int64(int16(v)))
		}
		return uint64(v)
	case 4:
		v := binary.LittleEndian.Uint32(b)
		if signed {
			return uint64(int64(int32(v)))
		}
		return uint64(v)
	}
	return binary.LittleEndian.Uint64(b)
}

func store(b []byte, w int, v uint64) {
	switch w {
	case 1:
		b[0] = byte(v)
	case 2:
		binary.LittleEndian.PutUint16(b, uint16(v))
	case 4:
		binary.LittleEndian.PutUint32(b, uint32(v))
	default:
		binary.LittleEndian.PutUint64(b, v)
	}
}

// deltaCodec: u64 value count, the first value, then each value minus the
// previous one, all at the value width.
type deltaCodec struct{ w int }

func newDelta(t datatype.Datatype) (codec, error) {
	w, _, err := valueLayout(t)
	if err != nil {
		return nil, err
	}
	return deltaCodec{w: w}, nil
}

func (c deltaCodec) compress(dst, src []byte) ([]byte, error) {
	w := c.w
	if len(src)%w != 0 {
		return dst, fmt.Errorf("%w: delta: %d bytes are not whole %d-byte values", ErrUnsupported, len(src), w)
	}
	n := len(src) / w
	dst = binary.LittleEndian.AppendUint64(dst, uint64(n))
	if n == 0 {
		return dst, nil
	}
	start := len(dst)
	dst = grow(dst, len(src))
	out := dst[start:]
	copy(out[:w], src[:w])
	if w == 8 {
		prev := binary.LittleEndian.Uint64(src)
		for i := 8; i < len(src); i += 8 {
			v := binary.LittleEndian.Uint64(src[i:])
			binary.LittleEndian.PutUint64(out[i:], v-prev)
			prev = v
		}
		return dst, nil
	}
	prev := load(src, w, false)
	for i := w; i < len(src); i += w {
		v := load(src[i:], w, false)
		store(out[i:], w, v-prev)
		prev = v
	}
	return dst, nil
}

func (c deltaCodec) decompress(dst, src []byte) error {
	w := c.w
	r := wire.NewReader(src)
	n := r.Uint64("delta: value count")
	if r.Err() != nil {
		return r.Err()
	}
	if n != uint64(len(dst)/w) || len(dst)%w != 0 {
		return fmt.Errorf("%w: delta: %d values for a %d-byte part", wire.ErrCorrupt, n, len(dst))
	}
	in := r.Rest()
	if len(in) < len(dst) {
		return fmt.Errorf("%w: delta: %d values need %d bytes, have %d", wire.ErrTruncated, n, len(dst), len(in))
	}
	if n == 0 {
		return nil
	}
	if w == 8 {
		acc := uint64(0)
		for i := 0; i < len(dst); i += 8 {
			acc += binary.LittleEndian.Uint64(in[i:])
			binary.LittleEndian.PutUint64(dst[i:], acc)
		}
		return nil
	}
	acc := uint64(0)
	for i := 0; i < len(dst); i += w {
		acc += load(in[i:], w, false)
		store(dst[i:], w, acc)
	}
	return nil
}

// doubleDeltaCodec: u8 bit size, u64 value count, then either the raw
// values (when the double deltas would need nearly the full width) or the
// first two values followed by each double delta as a sign bit and
// bitsize magnitude bits, packed most significant bit first into
// little-endian u64 words.
type doubleDeltaCodec struct {
	w      int
	signed bool
}

func newDoubleDelta(t datatype.Datatype) (codec, error) {
	w, s, err := valueLayout(t)
	if err != nil {
		return nil, err
	}
	return doubleDeltaCodec{w: w, signed: s}, nil
}

// subSigned returns a-b as an int64 if the true difference fits, where a
// and b are w-byte values read with their signedness.
func subSigned(a, b uint64, w int, signed bool) (int64, bool) {
	if w < 8 || signed {
		d := int64(a) - int64(b)
		// Narrow types cannot overflow; int64 overflows when the signs of
		// the operands differ and the result's sign differs from a's.
		if w == 8 && (int64(a) >= 0) != (int64(b) >= 0) && (d >= 0) != (int64(a) >= 0) {
			return 0, false
		}
		return d, true
	}
	if a >= b {
		d := a - b
		return int64(d), d <= 1<<63-1
	}
	d := b - a
	return -int64(d), d <= 1<<63
}

func absU(v int64) uint64 {
	if v < 0 {
		return uint64(-v) // -MinInt64 wraps to 1<<63, its magnitude
	}
	return uint64(v)
}

func (c doubleDeltaCodec) compress(dst, src []byte) ([]byte, error) {
	w := c.w
	if len(src)%w != 0 {
		return dst, fmt.Errorf("%w: double delta: %d bytes are not whole %d-byte values", ErrUnsupported, len(src), w)
	}
	n := len(src) / w
	// Bit size of the largest |double delta| and of the first delta.
	bitsize := 0
	if n > 2 {
		var maxd uint64
		prev := int64(0)
		for i := 1; i < n; i++ {
			d, ok := subSigned(load(src[i*w:], w, c.signed), load(src[(i-1)*w:], w, c.signed), w, c.signed)
			if !ok {
				return dst, fmt.Errorf("%w: double delta: a delta exceeds the int64 range", ErrUnsupported)
			}
			if i == 1 {
				maxd = absU(d)
			} else {
				dd := d - prev
				if (d >= 0) != (prev >= 0) && (dd >= 0) != (d >= 0) {
					return dst, fmt.Errorf("%w: double delta: a double delta exceeds the int64 range", ErrUnsupported)
				}
				maxd = max(maxd, absU(dd))
			}
			prev = d
		}
		bitsize = max(1, bits.Len64(maxd))
	}
	dst = append(dst, uint8(bitsize))
	dst = binary.LittleEndian.AppendUint64(dst, uint64(n))
	if bitsize >= 8*w-1 {
		return append(dst, src...), nil
	}
	if n == 0 {
		return dst, nil
	}
	dst = append(dst, src[:min(2, n)*w]...)
	if n <= 2 {
		return dst, nil
	}
	bw := bitWriter{out: dst}
	prevD := int64(load(src[w:], w, c.signed) - load(src, w, c.signed))
	prevV := load(src[w:], w, c.signed)
	for i := 2; i < n; i++ {
		v := load(src[i*w:], w, c.signed)
		d := int64(v - prevV)
		dd := d - prevD
		sign := uint64(0)
		if dd < 0 {
			sign = 1
		}
		bw.write(sign, 1)
		bw.write(absU(dd), uint(bitsize))
		prevD, prevV = d, v
	}
	return bw.finish(), nil
}

func (c doubleDeltaCodec) decompress(dst, src []byte) error {
	w := c.w
	r := wire.NewReader(src)
	bitsize := int(r.Uint8("double delta: bit size"))
	n := r.Uint64("double delta: value count")
	if r.Err() != nil {
		return r.Err()
	}
	if len(dst)%w != 0 || n != uint64(len(dst)/w) {
		return fmt.Errorf("%w: double delta: %d values for a %d-byte part", wire.ErrCorrupt, n, len(dst))
	}
	in := r.Rest()
	if bitsize >= 8*w-1 {
		if len(in) != len(dst) {
			return fmt.Errorf("%w: double delta: %d raw bytes for a %d-byte part", wire.ErrCorrupt, len(in), len(dst))
		}
		copy(dst, in)
		return nil
	}
	if n == 0 {
		return nil
	}
	head := int(min(n, 2)) * w
	if len(in) < head {
		return fmt.Errorf("%w: double delta: first values", wire.ErrTruncated)
	}
	copy(dst, in[:head])
	if n <= 2 {
		return nil
	}
	need := (uint64(n-2)*uint64(bitsize+1) + 63) / 64 * 8
	if uint64(len(in)-head) < need {
		return fmt.Errorf("%w: double delta: %d values of %d bits need %d bytes, have %d", wire.ErrTruncated, n, bitsize+1, need, len(in)-head)
	}
	br := bitReader{in: in[head:]}
	a, b := load(dst, w, false), load(dst[w:], w, false) // v[i-2], v[i-1]
	for i := 2; i < int(n); i++ {
		sign := br.read(1)
		mag := br.read(uint(bitsize))
		dd := mag
		if sign != 0 {
			dd = -mag
		}
		v := dd + 2*b - a
		store(dst[i*w:], w, v)
		a, b = b, v
	}
	return nil
}

// bitWriter packs bit fields most significant bit first into u64 words
// appended little-endian.
type bitWriter struct {
	out  []byte
	acc  uint64
	used uint
}

func (b *bitWriter) write(v uint64, n uint) {
	for n > 0 {
		take := min(n, 64-b.used)
		chunk := (v >> (n - take)) & (1<<take - 1)
		if take == 64 {
			chunk = v
		}
		b.acc |= chunk << (64 - b.used - take)
		b.used += take
		n -= take
		if b.used == 64 {
			b.out = binary.LittleEndian.AppendUint64(b.out, b.acc)
			b.acc, b.used = 0, 0
		}
	}
}

func (b *bitWriter) finish() []byte {
	if b.used > 0 {
		b.out = binary.LittleEndian.AppendUint64(b.out, b.acc)
		b.acc, b.used = 0, 0
	}
	return b.out
}

// bitReader reads what bitWriter wrote; the caller checked the length.
type bitReader struct {
	in   []byte
	acc  uint64
	left uint
}

func (b *bitReader) read(n uint) uint64 {
	var v uint64
	for n > 0 {
		if b.left == 0 {
			b.acc = binary.LittleEndian.Uint64(b.in)
			b.in = b.in[8:]
			b.left = 64
		}
		take := min(n, b.left)
		chunk := b.acc >> (b.left - take)
		if take < 64 {
			chunk &= 1<<take - 1
		}
		v = v<<take | chunk
		b.left -= take
		n -= take
	}
	return v
}
