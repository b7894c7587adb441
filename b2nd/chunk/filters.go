package chunk

import (
	"encoding/binary"
	"fmt"
)

// This file holds the filters of c-blosc2, forward (encode) and backward
// (decode). Each works on one block; leftover bytes that do not make a
// whole element (or, for bitshuffle, a whole group of eight elements) are
// copied through, as c-blosc2 does.

// Shuffle groups byte j of every element together: dst[j*n+i] = src[i*ts+j].
func Shuffle(ts int, src, dst []byte) {
	n := len(src) / ts
	if ts <= 1 || n == 0 {
		copy(dst, src)
		return
	}
	for j := 0; j < ts; j++ {
		out := dst[j*n : (j+1)*n]
		for i := range out {
			out[i] = src[i*ts+j]
		}
	}
	copy(dst[n*ts:], src[n*ts:])
}

// Unshuffle undoes Shuffle.
func Unshuffle(ts int, src, dst []byte) {
	n := len(src) / ts
	if ts <= 1 || n == 0 {
		copy(dst, src)
		return
	}
	var pa [16][]byte
	unshufflePlanes(splitPlanes(src, ts, n, pa[:0]), 0, n, dst)
	copy(dst[n*ts:], src[n*ts:])
}

// splitPlanes returns the ts byte planes of n bytes each at the start of
// src (appended to planes, so that a caller's small array holds them).
func splitPlanes(src []byte, ts, n int, planes [][]byte) [][]byte {
	for j := 0; j < ts; j++ {
		planes = append(planes, src[j*n:(j+1)*n])
	}
	return planes
}

// UnshuffleSpan undoes Shuffle for the bytes [a, b) of the block only
// (widened to whole elements): src is the whole shuffled block, dst the
// whole decoded block, of which only that range is written. A reader of a
// box narrower than the block unshuffles what it reads, not the block.
func UnshuffleSpan(ts int, src, dst []byte, a, b int) {
	b = min(b, len(src))
	if a >= b {
		return
	}
	n := len(src) / ts
	if ts <= 1 || n == 0 {
		copy(dst[a:b], src[a:b])
		return
	}
	e0, e1 := a/ts, min((b+ts-1)/ts, n)
	if b > n*ts { // the leftover bytes that make no whole element
		lo := max(a, n*ts)
		copy(dst[lo:b], src[lo:b])
	}
	if e0 >= e1 {
		return
	}
	var pa [16][]byte
	unshufflePlanes(splitPlanes(src, ts, n, pa[:0]), e0, e1, dst[e0*ts:])
}

// UnshufflePlanesSpan is UnshuffleSpan over a block whose shuffled bytes
// are given as its byte planes (plane j holds byte j of every element, as
// split streams store them; all planes of one length n, the block n*len
// elements long): only the bytes [a, b) of dst, widened to whole elements,
// are written. A plane may lie anywhere (in a mapped file when it was
// stored raw), so nothing is copied before the unshuffle.
func UnshufflePlanesSpan(planes [][]byte, dst []byte, a, b int) {
	ts := len(planes)
	n := len(planes[0])
	b = min(b, n*ts)
	if a >= b {
		return
	}
	e0, e1 := a/ts, (b+ts-1)/ts
	unshufflePlanes(planes, e0, e1, dst[e0*ts:])
}

// UnshufflePlanesTo writes exactly the bytes [a, b) of the block that
// the planes make (see UnshufflePlanesSpan; b at most the block's length)
// to out[:b-a]: the unshuffle is the copy out, so a block's items go from
// its streams straight to where the caller wants them (a record batch's
// buffer) without passing through a decoded block.
func UnshufflePlanesTo(planes [][]byte, a, b int, out []byte) {
	ts := len(planes)
	if a >= b {
		return
	}
	out = out[:b-a]
	e0, e1 := (a+ts-1)/ts, b/ts // whole elements inside [a, b)
	if e0 >= e1 {
		for p := a; p < b; p++ {
			out[p-a] = planes[p%ts][p/ts]
		}
		return
	}
	for p := a; p < e0*ts; p++ {
		out[p-a] = planes[p%ts][p/ts]
	}
	unshufflePlanes(planes, e0, e1, out[e0*ts-a:])
	for p := e1 * ts; p < b; p++ {
		out[p-a] = planes[p%ts][p/ts]
	}
}

// unshufflePlanes writes elements [e0, e1) of the planes to out (from its
// start): a vector kernel where there is one, the portable loops for the
// rest.
func unshufflePlanes(planes [][]byte, e0, e1 int, out []byte) {
	ts := len(planes)
	if w := unshuffleWide(planes, e0, e1, out); w > 0 {
		e0 += w
		out = out[w*ts:]
	}
	m := e1 - e0
	if m <= 0 {
		return
	}
	switch ts {
	case 8:
		p0, p1, p2, p3 := planes[0][e0:e1], planes[1][e0:e1], planes[2][e0:e1], planes[3][e0:e1]
		p4, p5, p6, p7 := planes[4][e0:e1], planes[5][e0:e1], planes[6][e0:e1], planes[7][e0:e1]
		d := out[:8*m]
		i := 0
		// Eight elements at a time: an 8x8 byte transpose in registers.
		for ; i+8 <= m; i += 8 {
			r := [8]uint64{binary.LittleEndian.Uint64(p0[i:]), binary.LittleEndian.Uint64(p1[i:]),
				binary.LittleEndian.Uint64(p2[i:]), binary.LittleEndian.Uint64(p3[i:]),
				binary.LittleEndian.Uint64(p4[i:]), binary.LittleEndian.Uint64(p5[i:]),
				binary.LittleEndian.Uint64(p6[i:]), binary.LittleEndian.Uint64(p7[i:])}
			transpose8(&r)
			for k := 0; k < 8; k++ {
				binary.LittleEndian.PutUint64(d[8*(i+k):], r[k])
			}
		}
		for ; i < m; i++ {
			v := uint64(p0[i]) | uint64(p1[i])<<8 | uint64(p2[i])<<16 | uint64(p3[i])<<24 |
				uint64(p4[i])<<32 | uint64(p5[i])<<40 | uint64(p6[i])<<48 | uint64(p7[i])<<56
			binary.LittleEndian.PutUint64(d[8*i:], v)
		}
	case 4:
		p0, p1, p2, p3 := planes[0][e0:e1], planes[1][e0:e1], planes[2][e0:e1], planes[3][e0:e1]
		d := out[:4*m]
		for i := 0; i < m; i++ {
			v := uint32(p0[i]) | uint32(p1[i])<<8 | uint32(p2[i])<<16 | uint32(p3[i])<<24
			binary.LittleEndian.PutUint32(d[4*i:], v)
		}
	case 2:
		p0, p1 := planes[0][e0:e1], planes[1][e0:e1]
		d := out[:2*m]
		for i := 0; i < m; i++ {
			d[2*i] = p0[i]
			d[2*i+1] = p1[i]
		}
	default:
		d := out[:ts*m]
		for j, p := range planes {
			for i, v := range p[e0:e1] {
				d[i*ts+j] = v
			}
		}
	}
}

// Bitshuffle transposes the bits of groups of eight elements: bit b of
// byte j of element i goes to bit i%8 of byte (j*8+b)*(n/8)+i/8, for the
// n elements rounded down to a multiple of eight; the rest is copied.
func Bitshuffle(ts int, src, dst []byte) {
	n := len(src) / ts
	n -= n % 8
	rowBytes := n / 8
	for i := range dst[:n*ts] {
		dst[i] = 0
	}
	for i := 0; i < n; i++ {
		e := src[i*ts : (i+1)*ts]
		bit := byte(1) << (i % 8)
		col := i / 8
		for j, v := range e {
			if v == 0 {
				continue
			}
			base := j * 8
			for b := 0; b < 8; b++ {
				if v&(1<<b) != 0 {
					dst[(base+b)*rowBytes+col] |= bit
				}
			}
		}
	}
	copy(dst[n*ts:len(src)], src[n*ts:])
}

// Bitunshuffle undoes Bitshuffle. format is the chunk's format version:
// version 2 (Blosc1) chunks bit-shuffled only blocks whose element count
// was a multiple of eight.
func Bitunshuffle(ts int, src, dst []byte, format uint8) {
	n := len(src) / ts
	if format == 2 && n%8 != 0 {
		copy(dst, src)
		return
	}
	n -= n % 8
	rowBytes := n / 8
	for i := range dst[:n*ts] {
		dst[i] = 0
	}
	for j := 0; j < ts; j++ {
		for b := 0; b < 8; b++ {
			row := src[(j*8+b)*rowBytes : (j*8+b+1)*rowBytes]
			mask := byte(1) << b
			for col, v := range row {
				if v == 0 {
					continue
				}
				for k := 0; k < 8; k++ {
					if v&(1<<k) != 0 {
						dst[(col*8+k)*ts+j] |= mask
					}
				}
			}
		}
	}
	copy(dst[n*ts:len(src)], src[n*ts:])
}

// deltaWord is the word size c-blosc2's delta works with for typesize ts.
func deltaWord(ts int) int {
	switch ts {
	case 1, 2, 4, 8:
		return ts
	}
	if ts%8 == 0 {
		return 8
	}
	return 1
}

func word(b []byte, i, w int) uint64 {
	switch w {
	case 1:
		return uint64(b[i])
	case 2:
		return uint64(binary.LittleEndian.Uint16(b[i*2:]))
	case 4:
		return uint64(binary.LittleEndian.Uint32(b[i*4:]))
	}
	return binary.LittleEndian.Uint64(b[i*8:])
}

func putWord(b []byte, i, w int, v uint64) {
	switch w {
	case 1:
		b[i] = byte(v)
	case 2:
		binary.LittleEndian.PutUint16(b[i*2:], uint16(v))
	case 4:
		binary.LittleEndian.PutUint32(b[i*4:], uint32(v))
	default:
		binary.LittleEndian.PutUint64(b[i*8:], v)
	}
}

// DeltaEncode applies c-blosc2's delta: block 0 (first) XORs each word with
// the previous one; the other blocks XOR with the chunk's block 0 (ref,
// its unfiltered bytes).
func DeltaEncode(ts int, first bool, ref, src, dst []byte) {
	w := deltaWord(ts)
	n := len(src) / w
	copy(dst, src)
	if first {
		for i := n - 1; i >= 1; i-- {
			putWord(dst, i, w, word(src, i, w)^word(src, i-1, w))
		}
		return
	}
	for i := 0; i < n; i++ {
		putWord(dst, i, w, word(src, i, w)^word(ref, i, w))
	}
}

// DeltaDecode undoes DeltaEncode in place; ref is the decoded block 0.
func DeltaDecode(ts int, first bool, ref, buf []byte) {
	w := deltaWord(ts)
	n := len(buf) / w
	if first {
		for i := 1; i < n; i++ {
			putWord(buf, i, w, word(buf, i, w)^word(buf, i-1, w))
		}
		return
	}
	for i := 0; i < n; i++ {
		putWord(buf, i, w, word(buf, i, w)^word(ref, i, w))
	}
}

// TruncPrec zeroes low mantissa bits of float32/float64 values (prec > 0:
// keep prec bits; prec < 0: zero -prec bits). It cannot be undone.
func TruncPrec(prec int8, ts int, src, dst []byte) error {
	copy(dst, src)
	mant := 0
	switch ts {
	case 4:
		mant = 23
	case 8:
		mant = 52
	default:
		return fmt.Errorf("trunc_prec: typesize %d is not 4 or 8", ts)
	}
	p := int(prec)
	if p > mant || -p > mant {
		return fmt.Errorf("trunc_prec: precision %d is out of range for typesize %d", p, ts)
	}
	zeroed := mant - p
	if p < 0 {
		zeroed = -p
	}
	if zeroed >= mant {
		return fmt.Errorf("trunc_prec: cannot zero %d bits of a %d-bit mantissa", zeroed, mant)
	}
	n := len(src) / ts
	if ts == 4 {
		mask := ^uint32(1<<zeroed - 1)
		for i := 0; i < n; i++ {
			binary.LittleEndian.PutUint32(dst[4*i:], binary.LittleEndian.Uint32(src[4*i:])&mask)
		}
		return nil
	}
	mask := ^uint64(1<<zeroed - 1)
	for i := 0; i < n; i++ {
		binary.LittleEndian.PutUint64(dst[8*i:], binary.LittleEndian.Uint64(src[8*i:])&mask)
	}
	return nil
}

// BytedeltaEncode stores, for each of the ts byte streams of n bytes (as
// shuffle lays them out), each byte minus the previous one. buggy selects
// c-blosc2's original filter (ID 34), which restarted the running value for
// the bytes after the last whole 16-byte group.
func BytedeltaEncode(ts int, buggy bool, src, dst []byte) {
	n := len(src) / ts
	for ch := 0; ch < ts; ch++ {
		in, out := src[ch*n:(ch+1)*n], dst[ch*n:(ch+1)*n]
		var prev byte
		for i, v := range in {
			if buggy && i == n-n%16 && n > 15 {
				prev = 0
			}
			out[i] = v - prev
			prev = v
		}
	}
	if !buggy {
		copy(dst[n*ts:len(src)], src[n*ts:])
	}
}

// BytedeltaDecode undoes BytedeltaEncode.
func BytedeltaDecode(ts int, buggy bool, src, dst []byte) {
	n := len(src) / ts
	for ch := 0; ch < ts; ch++ {
		in, out := src[ch*n:(ch+1)*n], dst[ch*n:(ch+1)*n]
		var prev byte
		for i, v := range in {
			if buggy && i == n-n%16 && n > 15 {
				prev = 0
			}
			prev += v
			out[i] = prev
		}
	}
	if !buggy {
		copy(dst[n*ts:len(src)], src[n*ts:])
	}
}

// transpose8 transposes an 8x8 byte matrix held as 8 little-endian rows:
// byte j of row k becomes byte k of row j (4x4 blocks, then 2x2, then
// bytes; unrolled so that the rows stay in registers).
func transpose8(r *[8]uint64) {
	const m32, m16, m8 = 0x00000000ffffffff, 0x0000ffff0000ffff, 0x00ff00ff00ff00ff
	r0, r1, r2, r3, r4, r5, r6, r7 := r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7]
	r0, r4 = r0&m32|r4<<32, r0>>32|r4&^m32
	r1, r5 = r1&m32|r5<<32, r1>>32|r5&^m32
	r2, r6 = r2&m32|r6<<32, r2>>32|r6&^m32
	r3, r7 = r3&m32|r7<<32, r3>>32|r7&^m32
	r0, r2 = r0&m16|(r2&m16)<<16, (r0&^m16)>>16|r2&^m16
	r1, r3 = r1&m16|(r3&m16)<<16, (r1&^m16)>>16|r3&^m16
	r4, r6 = r4&m16|(r6&m16)<<16, (r4&^m16)>>16|r6&^m16
	r5, r7 = r5&m16|(r7&m16)<<16, (r5&^m16)>>16|r7&^m16
	r0, r1 = r0&m8|(r1&m8)<<8, (r0&^m8)>>8|r1&^m8
	r2, r3 = r2&m8|(r3&m8)<<8, (r2&^m8)>>8|r3&^m8
	r4, r5 = r4&m8|(r5&m8)<<8, (r4&^m8)>>8|r5&^m8
	r6, r7 = r6&m8|(r7&m8)<<8, (r6&^m8)>>8|r7&^m8
	r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7] = r0, r1, r2, r3, r4, r5, r6, r7
}
