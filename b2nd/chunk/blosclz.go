package chunk

import "errors"

// BloscLZ is c-blosc2's own LZ77 codec. There is no Go library for it, so
// both directions are written here from the format its decoder defines:
//
//   - the first instruction is a literal run; a control byte below 32 is a
//     literal run of ctrl+1 bytes that follow;
//   - otherwise it is a match: length (ctrl>>5)+2, or, when ctrl>>5 is 7,
//     9 plus the sum of extension bytes (each 255 continues); then one byte
//     that, with the control byte's low 5 bits, gives the distance minus
//     one; a distance byte of 255 with low bits 31 is followed by a 16-bit
//     big-endian far distance (plus 8191).
//
// Copies may overlap (distance < length), byte by byte.

const blosclzMaxDistance = 8191

var errBloscLZ = errors.New("blosclz: corrupt stream")

// BloscLZDecompress decodes src into dst and returns the bytes written.
func BloscLZDecompress(src, dst []byte) (int, error) {
	if len(src) == 0 {
		return 0, nil
	}
	ip, op := 0, 0
	ctrl := int(src[ip] & 31)
	ip++
	for {
		if ctrl >= 32 {
			length := (ctrl >> 5) - 1
			ofs := (ctrl & 31) << 8
			if length == 6 {
				for {
					if ip+1 >= len(src) {
						return 0, errBloscLZ
					}
					code := int(src[ip])
					ip++
					length += code
					if code != 255 {
						break
					}
				}
			} else if ip+1 >= len(src) {
				return 0, errBloscLZ
			}
			code := int(src[ip])
			ip++
			length += 3
			dist := ofs + code + 1
			if code == 255 && ofs == 31<<8 {
				if ip+1 >= len(src) {
					return 0, errBloscLZ
				}
				far := int(src[ip])<<8 | int(src[ip+1])
				ip += 2
				dist = far + blosclzMaxDistance + 1
			}
			if op+length > len(dst) || dist > op {
				return 0, errBloscLZ
			}
			ref := op - dist
			if dist >= length {
				copy(dst[op:op+length], dst[ref:ref+length])
			} else {
				for k := 0; k < length; k++ {
					dst[op+k] = dst[ref+k]
				}
			}
			op += length
			if ip >= len(src) {
				break
			}
			ctrl = int(src[ip])
			ip++
		} else {
			n := ctrl + 1
			if op+n > len(dst) || ip+n > len(src) {
				return 0, errBloscLZ
			}
			copy(dst[op:], src[ip:ip+n])
			op += n
			ip += n
			if ip >= len(src) {
				break
			}
			ctrl = int(src[ip])
			ip++
		}
	}
	return op, nil
}

// BloscLZCompress encodes src into dst with a greedy hash-chain-free
// matcher and returns the bytes written, or 0 when the result would not be
// smaller than src (the caller then stores the block uncompressed, as
// c-blosc2 does).
func BloscLZCompress(src, dst []byte) int {
	n := len(src)
	if n < 16 || len(dst) < 2 {
		return 0
	}
	const hashLog = 14
	var table [1 << hashLog]int32
	hash := func(i int) uint32 {
		v := uint32(src[i]) | uint32(src[i+1])<<8 | uint32(src[i+2])<<16 | uint32(src[i+3])<<24
		return (v * 2654435761) >> (32 - hashLog)
	}
	op := 0
	limit := len(dst)
	if limit > n-1 {
		limit = n - 1 // must beat storing it raw
	}
	litStart := 0
	emitLiterals := func(end int) bool {
		for litStart < end {
			k := end - litStart
			if k > 32 {
				k = 32
			}
			if op+1+k > limit {
				return false
			}
			dst[op] = byte(k - 1)
			copy(dst[op+1:], src[litStart:litStart+k])
			op += 1 + k
			litStart += k
		}
		return true
	}
	i := 1 // the first instruction must be a literal
	for i+4 <= n {
		h := hash(i)
		cand := int(table[h]) - 1
		table[h] = int32(i + 1)
		dist := i - cand
		if cand < 0 || dist > blosclzMaxDistance+65535 || src[cand] != src[i] || src[cand+1] != src[i+1] || src[cand+2] != src[i+2] {
			i++
			continue
		}
		length := 3
		for i+length < n-1 && src[cand+length] == src[i+length] { // a stream may not end with a match
			length++
		}
		if !emitLiterals(i) {
			return 0
		}
		// Encode the match.
		need := 1 + 1 + 2 + (length-9)/255 + 2
		if op+need > limit {
			return 0
		}
		d := dist - 1
		far := d >= blosclzMaxDistance
		var hi int
		if far {
			hi = 31
		} else {
			hi = d >> 8
		}
		if length-2 < 7 {
			dst[op] = byte((length-2)<<5 | hi)
			op++
		} else {
			dst[op] = byte(7<<5 | hi)
			op++
			rest := length - 9
			for rest >= 255 {
				dst[op] = 255
				op++
				rest -= 255
			}
			dst[op] = byte(rest)
			op++
		}
		if far {
			dst[op] = 255
			f := dist - blosclzMaxDistance - 1
			dst[op+1] = byte(f >> 8)
			dst[op+2] = byte(f)
			op += 3
		} else {
			dst[op] = byte(d)
			op++
		}
		i += length
		litStart = i
	}
	if !emitLiterals(n) {
		return 0
	}
	if op >= n {
		return 0
	}
	return op
}
