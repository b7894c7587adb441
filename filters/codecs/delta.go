package codecs

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/bits"

	"github.com/tileflight/tileflight/filters/stage"
	"github.com/tileflight/tileflight/format/datatype"
	"github.com/tileflight/tileflight/format/wire"
)

// intSpec is the integer type a windowed filter works with.
type intSpec struct {
	size   int
	signed bool
}

// windowedType says which integer type bit width reduction (pd=false) or
// positive delta (pd=true) applies to t as, or ok=false when TileDB passes
// t through untouched: floats, strings and other byte types (except that
// positive delta treats BOOL, BLOB and the geometry types as uint8), and
// date/time types before format version 20.
func windowedType(t datatype.Datatype, version uint32, pd bool) (intSpec, bool) {
	switch t {
	case datatype.Int16:
		return intSpec{2, true}, true
	case datatype.Uint16:
		return intSpec{2, false}, true
	case datatype.Int32:
		return intSpec{4, true}, true
	case datatype.Uint32:
		return intSpec{4, false}, true
	case datatype.Int64:
		return intSpec{8, true}, true
	case datatype.Uint64:
		return intSpec{8, false}, true
	case datatype.Int8:
		return intSpec{1, true}, pd
	case datatype.Uint8, datatype.Bool, datatype.Blob, datatype.GeomWKB, datatype.GeomWKT:
		return intSpec{1, false}, pd
	}
	if (t.IsDatetime() || t.IsTime()) && version >= 20 {
		return intSpec{8, true}, true
	}
	return intSpec{}, false
}

func (s intSpec) bits() uint { return uint(8 * s.size) }

// load reads one value zero-extended.
func (s intSpec) load(b []byte) uint64 {
	switch s.size {
	case 1:
		return uint64(b[0])
	case 2:
		return uint64(binary.LittleEndian.Uint16(b))
	case 4:
		return uint64(binary.LittleEndian.Uint32(b))
	}
	return binary.LittleEndian.Uint64(b)
}

func (s intSpec) store(b []byte, v uint64) {
	switch s.size {
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

// loadPadded reads a value from fewer than size bytes, zero-padded.
func (s intSpec) loadPadded(b []byte) uint64 {
	var tmp [8]byte
	copy(tmp[:s.size], b)
	return s.load(tmp[:])
}

// ext sign-extends (signed) a zero-extended value of width bits to 64 bits.
func ext(v uint64, width uint, signed bool) uint64 {
	if !signed || width == 64 {
		return v
	}
	return uint64(int64(v<<(64-width)) >> (64 - width))
}

// less compares two zero-extended values in the type's order.
func (s intSpec) less(a, b uint64) bool {
	if s.signed {
		return int64(ext(a, s.bits(), true)) < int64(ext(b, s.bits(), true))
	}
	return a < b
}

// windows splits a part of n bytes the way TileDB does: windows of
// min(n, maxWindow) rounded down to whole elements, the last one short.
func windows(n int, maxWindow uint32, size int) (win int, count int, err error) {
	if n == 0 {
		return 0, 0, nil
	}
	win = min(n, int(maxWindow)) / size * size
	if win == 0 {
		if n < size {
			return n, 1, nil // a lone fragment of an element: stored raw
		}
		return 0, 0, fmt.Errorf("max window size %d is smaller than one %d-byte element", maxWindow, size)
	}
	return win, (n + win - 1) / win, nil
}

// countWindows is the number of windows of all parts, which the windowed
// filters store before the windows themselves.
func countWindows(parts [][]byte, maxWindow uint32, size int) (int, error) {
	total := 0
	for _, p := range parts {
		_, c, err := windows(len(p), maxWindow, size)
		if err != nil {
			return 0, err
		}
		total += c
	}
	return total, nil
}

// bitWidth is TileDB's bit width reduction filter. Per part, per window:
// the window's minimum is stored in the metadata and the values are
// stored relative to it in the narrowest of 8/16/32/64 bits that holds
// max-min+1 (as a signed value for signed types).
type bitWidth struct {
	sameType
	window uint32
}

func (f bitWidth) Forward(ctx *stage.Context, in stage.Buffers) (stage.Buffers, error) {
	spec, ok := windowedType(ctx.Type, ctx.Version, false)
	if !ok {
		return in, nil
	}
	es := spec.size
	total := stage.Size(in.Data)
	nwin, err := countWindows(in.Data, f.window, es)
	if err != nil {
		return stage.Buffers{}, fmt.Errorf("bit_width_reduction: %w", err)
	}
	meta := wire.NewWriter(make([]byte, 0, 8+nwin*(es+5)))
	meta.Uint32(uint32(total))
	meta.Uint32(uint32(nwin))
	out := make([]byte, 0, total)
	var off [8]byte
	for _, p := range in.Data {
		win, count, _ := windows(len(p), f.window, es)
		for i := range count {
			w := p[i*win : min((i+1)*win, len(p))]
			n := len(w) / es
			lo, width := spec.reduce(w[:n*es])
			spec.store(off[:], lo)
			meta.Write(off[:es])
			meta.Uint8(uint8(width))
			meta.Uint32(uint32(len(w)))
			if width >= spec.bits() || len(w)%es != 0 {
				out = append(out, w...)
				continue
			}
			nb := int(width / 8)
			for j := range n {
				v := spec.load(w[j*es:]) - lo
				out = binary.LittleEndian.AppendUint64(out, v)[:len(out)+nb]
			}
		}
	}
	return stage.Buffers{Meta: prependMeta(meta.Bytes(), in.Meta), Data: [][]byte{out}}, nil
}

// reduce returns a window's minimum and the bit width TileDB picks for it
// (the full width when the range or range+1 overflows the type; the
// minimum is then unused on read).
func (s intSpec) reduce(w []byte) (lo uint64, width uint) {
	n := len(w) / s.size
	if n == 0 {
		return 0, s.bits()
	}
	lo = s.load(w)
	hi := lo
	for j := 1; j < n; j++ {
		v := s.load(w[j*s.size:])
		if s.less(v, lo) {
			lo = v
		}
		if s.less(hi, v) {
			hi = v
		}
	}
	// hi >= lo in the type's order, so the difference taken on 64 bits
	// of sign-extended values is the exact range.
	d := ext(hi, s.bits(), s.signed) - ext(lo, s.bits(), s.signed)
	maxT := uint64(math.MaxUint64) >> (64 - s.bits())
	if s.signed {
		maxT >>= 1
	}
	if d >= maxT { // range or range+1 does not fit the type
		return lo, s.bits()
	}
	r := d + 1
	var need uint
	if s.signed {
		switch {
		case r <= math.MaxInt8:
			need = 8
		case r <= math.MaxInt16:
			need = 16
		case r <= math.MaxInt32:
			need = 32
		default:
			need = 64
		}
	} else {
		need = uint(bits.Len64(r))
		switch {
		case need <= 8:
			need = 8
		case need <= 16:
			need = 16
		case need <= 32:
			need = 32
		default:
			need = 64
		}
	}
	return lo, need
}

func (f bitWidth) Reverse(ctx *stage.Context, in stage.Buffers) (stage.Buffers, error) {
	return f.ReverseInto(ctx, in, nil)
}

type bwrWindow struct {
	offset uint64
	width  uint
	nbytes uint32
}

func (f bitWidth) ReverseInto(ctx *stage.Context, in stage.Buffers, dst []byte) (stage.Buffers, error) {
	spec, ok := windowedType(ctx.Type, ctx.Version, false)
	if !ok {
		return in, nil
	}
	es := spec.size
	data := stage.Concat(in.Data)
	r := wire.NewReader(stage.Concat(in.Meta))
	origLen := r.Uint32("bit_width_reduction: original length")
	nwin := r.Count(4, es+5, "bit_width_reduction: number of windows")
	if r.Err() != nil {
		return stage.Buffers{}, fmt.Errorf("bit_width_reduction: metadata: %w", r.Err())
	}
	// First pass: validate every window against the data, so the output
	// is sized only from checked numbers; second pass: decode.
	readWindow := func(r *wire.Reader) bwrWindow {
		var w bwrWindow
		if b := r.Bytes(es, "window offset"); len(b) == es {
			w.offset = spec.load(b)
		}
		w.width = uint(r.Uint8("window bit width"))
		w.nbytes = r.Uint32("window length")
		return w
	}
	mr := *r
	var consumed, produced uint64
	for i := range nwin {
		w := readWindow(&mr)
		if mr.Err() != nil {
			return stage.Buffers{}, fmt.Errorf("bit_width_reduction: metadata: window %d: %w", i, mr.Err())
		}
		produced += uint64(w.nbytes)
		if w.width >= spec.bits() || int(w.nbytes)%es != 0 {
			consumed += uint64(w.nbytes)
		} else {
			if w.width != 8 && w.width != 16 && w.width != 32 {
				return stage.Buffers{}, fmt.Errorf("bit_width_reduction: %w: window %d: bit width %d", wire.ErrCorrupt, i, w.width)
			}
			consumed += uint64(w.nbytes) / uint64(es) * uint64(w.width/8)
		}
		if consumed > uint64(len(data)) {
			return stage.Buffers{}, fmt.Errorf("bit_width_reduction: %w: window %d needs %d bytes, the data has %d", wire.ErrTruncated, i, consumed, len(data))
		}
	}
	if produced != uint64(origLen) || consumed != uint64(len(data)) {
		return stage.Buffers{}, fmt.Errorf("bit_width_reduction: %w: windows hold %d bytes from %d (metadata says %d from %d)",
			wire.ErrCorrupt, produced, consumed, origLen, len(data))
	}
	out := grow(dst, int(produced))
	src, o := data, out
	for range nwin {
		w := readWindow(r)
		nb := int(w.nbytes)
		if w.width >= spec.bits() || nb%es != 0 {
			copy(o, src[:nb])
			src, o = src[nb:], o[nb:]
			continue
		}
		n := nb / es
		k := int(w.width / 8)
		unreduce(o[:nb], src[:n*k], spec, k, w.offset)
		src, o = src[n*k:], o[nb:]
	}
	return stage.Buffers{Meta: rest(r), Data: [][]byte{out}}, nil
}

// unreduce widens k-byte values (sign-extended for signed types) back to
// spec.size bytes and adds the window offset.
func unreduce(dst, src []byte, spec intSpec, k int, off uint64) {
	n := len(src) / k
	sh := uint(64 - 8*k)
	switch {
	case spec.size == 8 && k == 1 && spec.signed:
		for j := range n {
			binary.LittleEndian.PutUint64(dst[8*j:], uint64(int64(int8(src[j])))+off)
		}
	case spec.size == 8 && k == 1:
		for j := range n {
			binary.LittleEndian.PutUint64(dst[8*j:], uint64(src[j])+off)
		}
	default:
		for j := range n {
			v := spec.loadPadded(src[j*k : j*k+k])
			if spec.signed {
				v = uint64(int64(v<<sh) >> sh)
			}
			spec.store(dst[j*spec.size:], v+off)
		}
	}
}

// positiveDelta is TileDB's positive delta filter: per part, per window,
// the first value goes to the metadata and every value is stored as its
// difference to the previous one (the first difference is 0). Forward
// fails when the values decrease.
type positiveDelta struct {
	sameType
	window uint32
}

func (f positiveDelta) Forward(ctx *stage.Context, in stage.Buffers) (stage.Buffers, error) {
	spec, ok := windowedType(ctx.Type, ctx.Version, true)
	if !ok {
		return in, nil
	}
	es := spec.size
	nwin, err := countWindows(in.Data, f.window, es)
	if err != nil {
		return stage.Buffers{}, fmt.Errorf("positive_delta: %w", err)
	}
	meta := wire.NewWriter(make([]byte, 0, 4+nwin*(es+4)))
	meta.Uint32(uint32(nwin))
	out := make([]byte, stage.Size(in.Data))
	o := out
	var tmp [8]byte
	for _, p := range in.Data {
		win, count, _ := windows(len(p), f.window, es)
		for i := range count {
			w := p[i*win : min((i+1)*win, len(p))]
			first := spec.loadPadded(w[:min(es, len(w))])
			spec.store(tmp[:], first)
			meta.Write(tmp[:es])
			meta.Uint32(uint32(len(w)))
			if len(w)%es != 0 {
				copy(o, w)
				o = o[len(w):]
				continue
			}
			prev := first
			for j := 0; j < len(w); j += es {
				cur := spec.load(w[j:])
				if spec.less(cur, prev) {
					return stage.Buffers{}, errors.New("positive_delta: values decrease, a positive delta cannot encode them")
				}
				spec.store(o[j:], cur-prev)
				prev = cur
			}
			o = o[len(w):]
		}
	}
	return stage.Buffers{Meta: prependMeta(meta.Bytes(), in.Meta), Data: [][]byte{out}}, nil
}

func (f positiveDelta) Reverse(ctx *stage.Context, in stage.Buffers) (stage.Buffers, error) {
	return f.ReverseInto(ctx, in, nil)
}

func (f positiveDelta) ReverseInto(ctx *stage.Context, in stage.Buffers, dst []byte) (stage.Buffers, error) {
	spec, ok := windowedType(ctx.Type, ctx.Version, true)
	if !ok {
		return in, nil
	}
	es := spec.size
	data := stage.Concat(in.Data)
	r := wire.NewReader(stage.Concat(in.Meta))
	nwin := r.Count(4, es+4, "positive_delta: number of windows")
	if r.Err() != nil {
		return stage.Buffers{}, fmt.Errorf("positive_delta: metadata: %w", r.Err())
	}
	// The windows cover the data exactly; check that before writing.
	mr := *r
	var total uint64
	for i := range nwin {
		mr.Skip(es, "window offset")
		total += uint64(mr.Uint32("window length"))
		if mr.Err() != nil {
			return stage.Buffers{}, fmt.Errorf("positive_delta: metadata: window %d: %w", i, mr.Err())
		}
		if total > uint64(len(data)) {
			return stage.Buffers{}, fmt.Errorf("positive_delta: %w: window %d ends at byte %d, the data has %d", wire.ErrTruncated, i, total, len(data))
		}
	}
	if total != uint64(len(data)) {
		return stage.Buffers{}, fmt.Errorf("positive_delta: %w: windows hold %d bytes, the data has %d", wire.ErrCorrupt, total, len(data))
	}
	out := grow(dst, len(data))
	pos := 0
	for range nwin {
		first := spec.load(r.Bytes(es, "window offset"))
		nb := int(r.Uint32("window length"))
		w, o := data[pos:pos+nb], out[pos:pos+nb]
		pos += nb
		if nb%es != 0 {
			copy(o, w)
			continue
		}
		PrefixSum(o, w, es, first)
	}
	return stage.Buffers{Meta: rest(r), Data: [][]byte{out}}, nil
}

// PrefixSum writes into dst the running sums, starting from first, of the
// little-endian integers of elemSize bytes in src (wrapping, so signedness
// does not matter): dst[i] = first + src[0] + ... + src[i]. It undoes
// positive delta encoding and does not allocate.
func PrefixSum(dst, src []byte, elemSize int, first uint64) {
	n := len(src) / elemSize
	dst = dst[:n*elemSize]
	switch elemSize {
	case 8:
		acc := first
		i := 0
		for ; i+4 <= n; i += 4 {
			s := src[8*i : 8*i+32]
			d := dst[8*i : 8*i+32]
			a0 := acc + binary.LittleEndian.Uint64(s[0:])
			a1 := a0 + binary.LittleEndian.Uint64(s[8:])
			a2 := a1 + binary.LittleEndian.Uint64(s[16:])
			acc = a2 + binary.LittleEndian.Uint64(s[24:])
			binary.LittleEndian.PutUint64(d[0:], a0)
			binary.LittleEndian.PutUint64(d[8:], a1)
			binary.LittleEndian.PutUint64(d[16:], a2)
			binary.LittleEndian.PutUint64(d[24:], acc)
		}
		for ; i < n; i++ {
			acc += binary.LittleEndian.Uint64(src[8*i:])
			binary.LittleEndian.PutUint64(dst[8*i:], acc)
		}
	case 4:
		acc := uint32(first)
		for i := range n {
			acc += binary.LittleEndian.Uint32(src[4*i:])
			binary.LittleEndian.PutUint32(dst[4*i:], acc)
		}
	case 2:
		acc := uint16(first)
		for i := range n {
			acc += binary.LittleEndian.Uint16(src[2*i:])
			binary.LittleEndian.PutUint16(dst[2*i:], acc)
		}
	default:
		acc := byte(first)
		for i := range n {
			acc += src[i]
			dst[i] = acc
		}
	}
}
