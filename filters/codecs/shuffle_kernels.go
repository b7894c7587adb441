package codecs

import "encoding/binary"

// The byte and bit transpositions below are specialised for the element
// sizes TileDB has (1, 2, 4, 8 bytes) and work on 8 elements at a time in
// 64-bit registers: an 8x8 byte matrix or an 8x8 bit matrix is transposed
// with three rounds of masked swaps instead of 64 single-byte moves.

// swapBlocks exchanges, between rows a and b, the s-byte blocks that lie
// off the diagonal of each 2x2 block grid (one round of a recursive
// transpose). mask keeps the low block of every 2s-byte group.
func swapBlocks(a, b *uint64, shift uint, mask uint64) {
	t := ((*a >> shift) ^ *b) & mask
	*b ^= t
	*a ^= t << shift
}

// transpose8x8 transposes the 8x8 byte matrix whose row i is w[i] (byte r
// of the word = column r).
func transpose8x8(w *[8]uint64) {
	const m1, m2, m4 = 0x00FF00FF00FF00FF, 0x0000FFFF0000FFFF, 0x00000000FFFFFFFF
	swapBlocks(&w[0], &w[1], 8, m1)
	swapBlocks(&w[2], &w[3], 8, m1)
	swapBlocks(&w[4], &w[5], 8, m1)
	swapBlocks(&w[6], &w[7], 8, m1)
	swapBlocks(&w[0], &w[2], 16, m2)
	swapBlocks(&w[1], &w[3], 16, m2)
	swapBlocks(&w[4], &w[6], 16, m2)
	swapBlocks(&w[5], &w[7], 16, m2)
	swapBlocks(&w[0], &w[4], 32, m4)
	swapBlocks(&w[1], &w[5], 32, m4)
	swapBlocks(&w[2], &w[6], 32, m4)
	swapBlocks(&w[3], &w[7], 32, m4)
}

// transpose4x4Pairs transposes the two 4x4 byte matrices held in the low
// and high halves of w[0..3].
func transpose4x4Pairs(w *[4]uint64) {
	const m1, m2 = 0x00FF00FF00FF00FF, 0x0000FFFF0000FFFF
	swapBlocks(&w[0], &w[1], 8, m1)
	swapBlocks(&w[2], &w[3], 8, m1)
	swapBlocks(&w[0], &w[2], 16, m2)
	swapBlocks(&w[1], &w[3], 16, m2)
}

// spread moves the 4 bytes of x to the even bytes of the result.
func spread(x uint64) uint64 {
	x &= 0xFFFFFFFF
	x = (x | x<<16) & 0x0000FFFF0000FFFF
	return (x | x<<8) & 0x00FF00FF00FF00FF
}

// gather is the inverse of spread: the even bytes of x packed into 4.
func gather(x uint64) uint64 {
	x &= 0x00FF00FF00FF00FF
	x = (x | x>>8) & 0x0000FFFF0000FFFF
	return (x | x>>16) & 0xFFFFFFFF
}

// ByteShuffle writes src byte-shuffled for elements of elemSize bytes
// into dst (len(dst) >= len(src)): all first bytes, then all second bytes,
// and so on. Trailing bytes that do not fill an element are copied as they
// are, as blosc does. It does not allocate.
func ByteShuffle(dst, src []byte, elemSize int) {
	n := len(src) / max(elemSize, 1)
	dst = dst[:len(src)]
	switch {
	case elemSize <= 1 || n == 0:
		copy(dst, src)
		return
	case elemSize == 2:
		s0, s1 := dst[:n], dst[n:2*n]
		i := 0
		for ; i+8 <= n; i += 8 {
			a := binary.LittleEndian.Uint64(src[2*i:])
			b := binary.LittleEndian.Uint64(src[2*i+8:])
			binary.LittleEndian.PutUint64(s0[i:], gather(a)|gather(b)<<32)
			binary.LittleEndian.PutUint64(s1[i:], gather(a>>8)|gather(b>>8)<<32)
		}
		for ; i < n; i++ {
			s0[i], s1[i] = src[2*i], src[2*i+1]
		}
	case elemSize == 4:
		s0, s1, s2, s3 := dst[:n], dst[n:2*n], dst[2*n:3*n], dst[3*n:4*n]
		i := 0
		var w [4]uint64
		for ; i+8 <= n; i += 8 {
			e := src[4*i : 4*i+32]
			for j := range 4 {
				w[j] = uint64(binary.LittleEndian.Uint32(e[4*j:])) | uint64(binary.LittleEndian.Uint32(e[16+4*j:]))<<32
			}
			transpose4x4Pairs(&w)
			binary.LittleEndian.PutUint64(s0[i:], w[0])
			binary.LittleEndian.PutUint64(s1[i:], w[1])
			binary.LittleEndian.PutUint64(s2[i:], w[2])
			binary.LittleEndian.PutUint64(s3[i:], w[3])
		}
		for ; i < n; i++ {
			s0[i], s1[i], s2[i], s3[i] = src[4*i], src[4*i+1], src[4*i+2], src[4*i+3]
		}
	case elemSize == 8:
		i := 0
		var w [8]uint64
		for ; i+8 <= n; i += 8 {
			e := src[8*i : 8*i+64]
			for r := range 8 {
				w[r] = binary.LittleEndian.Uint64(e[8*r:])
			}
			transpose8x8(&w)
			for j := range 8 {
				binary.LittleEndian.PutUint64(dst[j*n+i:], w[j])
			}
		}
		for ; i < n; i++ {
			for j := range 8 {
				dst[j*n+i] = src[8*i+j]
			}
		}
	default:
		for i := range n {
			for j := range elemSize {
				dst[j*n+i] = src[i*elemSize+j]
			}
		}
	}
	copy(dst[n*elemSize:], src[n*elemSize:])
}

// ByteUnshuffle is the inverse of ByteShuffle. It does not allocate.
func ByteUnshuffle(dst, src []byte, elemSize int) {
	n := len(src) / max(elemSize, 1)
	dst = dst[:len(src)]
	switch {
	case elemSize <= 1 || n == 0:
		copy(dst, src)
		return
	case elemSize == 2:
		s0, s1 := src[:n], src[n:2*n]
		i := 0
		for ; i+8 <= n; i += 8 {
			a := binary.LittleEndian.Uint64(s0[i:])
			b := binary.LittleEndian.Uint64(s1[i:])
			binary.LittleEndian.PutUint64(dst[2*i:], spread(a)|spread(b)<<8)
			binary.LittleEndian.PutUint64(dst[2*i+8:], spread(a>>32)|spread(b>>32)<<8)
		}
		for ; i < n; i++ {
			dst[2*i], dst[2*i+1] = s0[i], s1[i]
		}
	case elemSize == 4:
		s0, s1, s2, s3 := src[:n], src[n:2*n], src[2*n:3*n], src[3*n:4*n]
		i := 0
		var w [4]uint64
		for ; i+8 <= n; i += 8 {
			w[0] = binary.LittleEndian.Uint64(s0[i:])
			w[1] = binary.LittleEndian.Uint64(s1[i:])
			w[2] = binary.LittleEndian.Uint64(s2[i:])
			w[3] = binary.LittleEndian.Uint64(s3[i:])
			transpose4x4Pairs(&w)
			e := dst[4*i : 4*i+32]
			for j := range 4 {
				binary.LittleEndian.PutUint32(e[4*j:], uint32(w[j]))
				binary.LittleEndian.PutUint32(e[16+4*j:], uint32(w[j]>>32))
			}
		}
		for ; i < n; i++ {
			dst[4*i], dst[4*i+1], dst[4*i+2], dst[4*i+3] = s0[i], s1[i], s2[i], s3[i]
		}
	case elemSize == 8:
		i := 0
		var w [8]uint64
		for ; i+8 <= n; i += 8 {
			for j := range 8 {
				w[j] = binary.LittleEndian.Uint64(src[j*n+i:])
			}
			transpose8x8(&w)
			e := dst[8*i : 8*i+64]
			for r := range 8 {
				binary.LittleEndian.PutUint64(e[8*r:], w[r])
			}
		}
		for ; i < n; i++ {
			for j := range 8 {
				dst[8*i+j] = src[j*n+i]
			}
		}
	default:
		for i := range n {
			for j := range elemSize {
				dst[i*elemSize+j] = src[j*n+i]
			}
		}
	}
	copy(dst[n*elemSize:], src[n*elemSize:])
}

// transposeBits transposes the 8x8 bit matrix whose row r is byte r of x
// (bit c of the byte = column c).
func transposeBits(x uint64) uint64 {
	t := (x ^ (x >> 7)) & 0x00AA00AA00AA00AA
	x ^= t ^ (t << 7)
	t = (x ^ (x >> 14)) & 0x0000CCCC0000CCCC
	x ^= t ^ (t << 14)
	t = (x ^ (x >> 28)) & 0x00000000F0F0F0F0
	return x ^ t ^ (t << 28)
}

// bitBlock is the block size TileDB hands to blosc's bitshuffle.
const bitBlock = 8192

// BitShuffle bit-shuffles one TileDB part into dst (len(dst) >= len(src))
// exactly as TileDB does: a part whose size is not a multiple of 8 and of
// elemSize is copied unchanged; otherwise it is cut into blocks of 8192
// bytes, and in every block the largest multiple of 8 elements is
// transposed bit by bit (bit k of byte j of element i goes to bit position
// (8j+k)*m + i of the block) and the remaining elements are copied.
func BitShuffle(dst, src []byte, elemSize int) { bitParts(dst, src, elemSize, false) }

// BitUnshuffle is the inverse of BitShuffle.
func BitUnshuffle(dst, src []byte, elemSize int) { bitParts(dst, src, elemSize, true) }

func bitParts(dst, src []byte, es int, invert bool) {
	es = max(es, 1)
	dst = dst[:len(src)]
	if len(src)%es != 0 || len(src)%8 != 0 {
		copy(dst, src)
		return
	}
	var tmp [bitBlock]byte // per-block scratch, on the stack
	for off := 0; off < len(src); off += bitBlock {
		end := min(off+bitBlock, len(src))
		s, d := src[off:end], dst[off:end]
		m := len(s) / es
		m -= m % 8
		if invert {
			bitUnshuffleBlock(d, s, m, es, &tmp)
		} else {
			bitShuffleBlock(d, s, m, es, &tmp)
		}
		copy(d[m*es:], s[m*es:])
	}
}

// bitShuffleBlock transposes m elements (m a multiple of 8, m*es at most
// bitBlock) of es bytes: a byte shuffle into a stack buffer gathers byte
// j of every element into stream j, then each stream is cut into its 8
// bit-planes, 64 elements (8 words) at a time.
func bitShuffleBlock(dst, src []byte, m, es int, tmp *[bitBlock]byte) {
	t := tmp[:m*es]
	ByteShuffle(t, src[:m*es], es)
	rows := m / 8 // bytes per bit-plane
	var w [8]uint64
	for j := range es {
		stream := t[j*m : j*m+m]
		planes := dst[8*j*rows : 8*(j+1)*rows]
		g := 0
		for ; g+8 <= rows; g += 8 {
			for q := range 8 {
				w[q] = transposeBits(binary.LittleEndian.Uint64(stream[8*(g+q):]))
			}
			transpose8x8(&w) // w[k] = plane k's bytes for groups g..g+7
			for k := range 8 {
				binary.LittleEndian.PutUint64(planes[k*rows+g:], w[k])
			}
		}
		for ; g < rows; g++ {
			x := transposeBits(binary.LittleEndian.Uint64(stream[8*g:]))
			for k := range 8 {
				planes[k*rows+g] = byte(x >> (8 * k))
			}
		}
	}
}

// bitUnshuffleBlock is the inverse of bitShuffleBlock.
func bitUnshuffleBlock(dst, src []byte, m, es int, tmp *[bitBlock]byte) {
	t := tmp[:m*es]
	rows := m / 8
	var w [8]uint64
	for j := range es {
		stream := t[j*m : j*m+m]
		planes := src[8*j*rows : 8*(j+1)*rows]
		g := 0
		for ; g+8 <= rows; g += 8 {
			for k := range 8 {
				w[k] = binary.LittleEndian.Uint64(planes[k*rows+g:])
			}
			transpose8x8(&w) // w[q] = the 8 planes' bytes of group g+q
			for q := range 8 {
				binary.LittleEndian.PutUint64(stream[8*(g+q):], transposeBits(w[q]))
			}
		}
		for ; g < rows; g++ {
			var x uint64
			for k := range 8 {
				x |= uint64(planes[k*rows+g]) << (8 * k)
			}
			binary.LittleEndian.PutUint64(stream[8*g:], transposeBits(x))
		}
	}
	ByteUnshuffle(dst[:m*es], t, es)
}
