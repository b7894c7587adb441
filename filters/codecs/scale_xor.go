package codecs

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/tileflight/tileflight/filters/stage"
	"github.com/tileflight/tileflight/format/datatype"
	"github.com/tileflight/tileflight/format/wire"
)

// intOfSize is the signed integer type TileDB maps a byte width to.
func intOfSize(n int) (datatype.Datatype, bool) { return datatype.IntOfSize(n, true) }

// scaleFloat is TileDB's float scaling filter: w = round((x - offset) /
// scale) stored as a signed integer of width bytes; read back as
// scale*w + offset. The input is taken as float32 or float64 by its size
// alone, as TileDB does.
type scaleFloat struct {
	scale, offset float64
	width         int
}

func (f scaleFloat) OutputType(in datatype.Datatype) datatype.Datatype {
	t, _ := intOfSize(f.width)
	return t
}

// toInt converts a rounded value to the stored integer as x86-64's
// truncating conversions do (TileDB's static_cast): widths up to 4 go
// through a 32-bit conversion then keep the low bytes; anything that does
// not fit (or NaN) becomes the "integer indefinite" value 0x80...0.
func toInt(r float64, width int) uint64 {
	if width == 8 {
		if !(r >= -0x1p63 && r < 0x1p63) {
			return 1 << 63
		}
		return uint64(int64(r))
	}
	if !(r >= -0x1p31 && r < 0x1p31) {
		return 1 << 31
	}
	return uint64(int64(r))
}

func (f scaleFloat) Forward(ctx *stage.Context, in stage.Buffers) (stage.Buffers, error) {
	ts := ctx.Type.Size()
	if ts != 4 && ts != 8 {
		return stage.Buffers{}, fmt.Errorf("scale_float: input type %s is neither 4 nor 8 bytes wide", ctx.Type)
	}
	n := 0
	for i, p := range in.Data {
		if len(p)%ts != 0 {
			return stage.Buffers{}, fmt.Errorf("scale_float: part %d of %d bytes is not whole %s values", i, len(p), ctx.Type)
		}
		n += len(p) / ts
	}
	out := make([]byte, n*f.width)
	o := out
	stored := intSpec{size: f.width, signed: true}
	meta := wire.NewWriter(make([]byte, 0, 4+4*len(in.Data)))
	meta.Uint32(uint32(len(in.Data)))
	for _, p := range in.Data {
		cnt := len(p) / ts
		meta.Uint32(uint32(cnt * f.width))
		for j := range cnt {
			var r float64
			if ts == 4 {
				x := math.Float32frombits(binary.LittleEndian.Uint32(p[4*j:]))
				// float32 arithmetic throughout, as TileDB does for float
				q := (x - float32(f.offset)) / float32(f.scale)
				r = math.Round(float64(q))
			} else {
				x := math.Float64frombits(binary.LittleEndian.Uint64(p[8*j:]))
				r = math.Round((x - f.offset) / f.scale)
			}
			stored.store(o[j*f.width:], toInt(r, f.width))
		}
		o = o[cnt*f.width:]
	}
	return stage.Buffers{Meta: prependMeta(meta.Bytes(), in.Meta), Data: [][]byte{out}}, nil
}

func getSigned(b []byte, n int) int64 {
	switch n {
	case 1:
		return int64(int8(b[0]))
	case 2:
		return int64(int16(binary.LittleEndian.Uint16(b)))
	case 4:
		return int64(int32(binary.LittleEndian.Uint32(b)))
	}
	return int64(binary.LittleEndian.Uint64(b))
}

func (f scaleFloat) Reverse(ctx *stage.Context, in stage.Buffers) (stage.Buffers, error) {
	ts := ctx.Type.Size()
	if ts != 4 && ts != 8 {
		return stage.Buffers{}, fmt.Errorf("scale_float: output type %s is neither 4 nor 8 bytes wide", ctx.Type)
	}
	data := stage.Concat(in.Data)
	r, sizes, err := partSizes("scale_float", stage.Concat(in.Meta), len(data))
	if err != nil {
		return stage.Buffers{}, err
	}
	n := 0
	for _, s := range sizes {
		n += int(s) / f.width // TileDB ignores a part's trailing partial value
	}
	out := make([]byte, n*ts)
	o := out
	for _, s := range sizes {
		part := data[:s]
		data = data[s:]
		cnt := len(part) / f.width
		for j := range cnt {
			w := getSigned(part[j*f.width:], f.width)
			if ts == 4 {
				// the integer is first converted to float, then scaled in
				// double precision; the explicit conversions keep Go from
				// fusing the multiply-add.
				e := float64(float32(w))
				v := float32(float64(f.scale*e) + f.offset)
				binary.LittleEndian.PutUint32(o[4*j:], math.Float32bits(v))
			} else {
				v := float64(f.scale*float64(w)) + f.offset
				binary.LittleEndian.PutUint64(o[8*j:], math.Float64bits(v))
			}
		}
		o = o[cnt*ts:]
	}
	return stage.Buffers{Meta: rest(r), Data: [][]byte{out}}, nil
}

// xorFilter is TileDB's XOR filter: each value of a part is replaced by
// its XOR with the previous one; the output is typed as the signed
// integer of the input's width.
type xorFilter struct{}

func (xorFilter) OutputType(in datatype.Datatype) datatype.Datatype {
	if t, ok := intOfSize(in.Size()); ok {
		return t
	}
	return in
}

func (xorFilter) Forward(ctx *stage.Context, in stage.Buffers) (stage.Buffers, error) {
	es := ctx.Type.Size()
	if _, ok := intOfSize(es); !ok {
		return stage.Buffers{}, fmt.Errorf("xor: type %s has no integer of its width", ctx.Type)
	}
	out := make([]byte, stage.Size(in.Data))
	off := 0
	for i, p := range in.Data {
		if len(p)%es != 0 {
			return stage.Buffers{}, fmt.Errorf("xor: part %d of %d bytes is not whole %d-byte values", i, len(p), es)
		}
		XorDelta(out[off:off+len(p)], p, es)
		off += len(p)
	}
	return stage.Buffers{Meta: prependMeta(partsMeta(in.Data), in.Meta), Data: [][]byte{out}}, nil
}

func (x xorFilter) Reverse(ctx *stage.Context, in stage.Buffers) (stage.Buffers, error) {
	return x.ReverseInto(ctx, in, nil)
}

func (xorFilter) ReverseInto(ctx *stage.Context, in stage.Buffers, dst []byte) (stage.Buffers, error) {
	es := ctx.Type.Size()
	if _, ok := intOfSize(es); !ok {
		return stage.Buffers{}, fmt.Errorf("xor: type %s has no integer of its width", ctx.Type)
	}
	data := stage.Concat(in.Data)
	r, sizes, err := partSizes("xor", stage.Concat(in.Meta), len(data))
	if err != nil {
		return stage.Buffers{}, err
	}
	total := 0
	for i, s := range sizes {
		if int(s)%es != 0 {
			return stage.Buffers{}, fmt.Errorf("xor: %w: part %d of %d bytes is not whole %d-byte values", wire.ErrCorrupt, i, s, es)
		}
		total += int(s)
	}
	if total != len(data) {
		return stage.Buffers{}, fmt.Errorf("xor: %w: parts hold %d bytes but the data has %d", wire.ErrCorrupt, total, len(data))
	}
	out := grow(dst, total)
	off := 0
	for _, s := range sizes {
		XorUndelta(out[off:off+int(s)], data[off:off+int(s)], es)
		off += int(s)
	}
	return stage.Buffers{Meta: rest(r), Data: [][]byte{out}}, nil
}

// XorDelta writes src with every elemSize-byte value XORed with the one
// before it (the first kept). It does not allocate.
func XorDelta(dst, src []byte, elemSize int) {
	n := len(src) / elemSize
	if n == 0 {
		return
	}
	switch elemSize {
	case 8:
		prev := uint64(0)
		for i := range n {
			v := binary.LittleEndian.Uint64(src[8*i:])
			binary.LittleEndian.PutUint64(dst[8*i:], v^prev)
			prev = v
		}
	case 4:
		prev := uint32(0)
		for i := range n {
			v := binary.LittleEndian.Uint32(src[4*i:])
			binary.LittleEndian.PutUint32(dst[4*i:], v^prev)
			prev = v
		}
	case 2:
		prev := uint16(0)
		for i := range n {
			v := binary.LittleEndian.Uint16(src[2*i:])
			binary.LittleEndian.PutUint16(dst[2*i:], v^prev)
			prev = v
		}
	default:
		prev := byte(0)
		for i := range n {
			dst[i] = src[i] ^ prev
			prev = src[i]
		}
	}
}

// XorUndelta is the inverse of XorDelta. It does not allocate.
func XorUndelta(dst, src []byte, elemSize int) {
	n := len(src) / elemSize
	switch elemSize {
	case 8:
		acc := uint64(0)
		for i := range n {
			acc ^= binary.LittleEndian.Uint64(src[8*i:])
			binary.LittleEndian.PutUint64(dst[8*i:], acc)
		}
	case 4:
		acc := uint32(0)
		for i := range n {
			acc ^= binary.LittleEndian.Uint32(src[4*i:])
			binary.LittleEndian.PutUint32(dst[4*i:], acc)
		}
	case 2:
		acc := uint16(0)
		for i := range n {
			acc ^= binary.LittleEndian.Uint16(src[2*i:])
			binary.LittleEndian.PutUint16(dst[2*i:], acc)
		}
	default:
		acc := byte(0)
		for i := range n {
			acc ^= src[i]
			dst[i] = acc
		}
	}
}
