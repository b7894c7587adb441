package chunk

import "unsafe"

// The SSE2 kernels of unshuffle_amd64.s (SSE2 is part of amd64, so no CPU
// check is needed). Each writes n elements (n a multiple of 16) from the
// planes' first n bytes.

//go:noescape
func unshuffle8SSE2(dst *byte, planes *[8]*byte, n int)

//go:noescape
func unshuffle8NT(dst *byte, planes *[8]*byte, n int)

//go:noescape
func unshuffle4SSE2(dst *byte, planes *[4]*byte, n int)

//go:noescape
func unshuffle2SSE2(dst *byte, planes *[2]*byte, n int)

// ntElements is the fewest 8-byte elements (64 KiB) unshuffled with
// non-temporal stores: a whole block going into a record batch's buffer is
// written once and read next by the transport, long after it would have
// left the cache, so the stores skip reading the destination's lines
// first (about 5 % of a whole .b2nd read's CPU); smaller runs (a box's
// rows) stay in the cache.
const ntElements = 8192

// unshuffleWide writes elements [e0, e0+m) of the planes (ts of them, ts
// 2, 4 or 8) to out, for the largest m <= e1-e0 that the kernels take in
// one call, and returns m (0 when ts has no kernel or fewer than 16
// elements are left).
func unshuffleWide(planes [][]byte, e0, e1 int, out []byte) int {
	ts := len(planes)
	m := (e1 - e0) &^ 15
	if m == 0 || len(out) < m*ts {
		return 0
	}
	switch ts {
	case 8:
		var p [8]*byte
		for j := range p {
			p[j] = &planes[j][e0:e1][0]
		}
		if uintptr(unsafe.Pointer(&out[0]))%16 == 0 && m >= ntElements {
			unshuffle8NT(&out[0], &p, m)
		} else {
			unshuffle8SSE2(&out[0], &p, m)
		}
	case 4:
		var p [4]*byte
		for j := range p {
			p[j] = &planes[j][e0:e1][0]
		}
		unshuffle4SSE2(&out[0], &p, m)
	case 2:
		unshuffle2SSE2(&out[0], &[2]*byte{&planes[0][e0:e1][0], &planes[1][e0:e1][0]}, m)
	default:
		return 0
	}
	return m
}
