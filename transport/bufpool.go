package transport

import (
	"math/bits"
	"sync"
)

// dirtyPool is the server's gRPC buffer pool (experimental.BufferPool in
// ServerOptions): power-of-two tiers of sync.Pools, from 256 bytes to
// 64 MiB, whose buffers are handed out as they were left.
//
// gRPC's default pool clears every buffer it hands out, and buffers above
// 1 MiB are not pooled at all but allocated (cleared too). Every buffer
// gRPC takes from its pool is then written over in full before it is
// read: an HTTP/2 frame read into it, a message assembled from frames, a
// message marshalled into it. A DoPut received each byte twice into
// cleared memory (a frame, then its message); this pool skips the
// clearing and keeps DoPut-sized messages (a few MiB) pooled.
type dirtyPool struct {
	tiers [dirtyMaxExp - dirtyMinExp + 1]sync.Pool
}

const (
	dirtyMinExp = 8  // 256 B
	dirtyMaxExp = 26 // 64 MiB, the default -max-message-bytes
)

var recvPool = &dirtyPool{}

// tier returns the index of the smallest tier holding n bytes, or -1.
func (p *dirtyPool) tier(n int) int {
	e := max(bits.Len(uint(n-1)), dirtyMinExp)
	if n <= 0 || e > dirtyMaxExp {
		return -1
	}
	return e - dirtyMinExp
}

func (p *dirtyPool) Get(n int) *[]byte {
	t := p.tier(n)
	if t < 0 {
		b := make([]byte, n)
		return &b
	}
	if v, ok := p.tiers[t].Get().(*[]byte); ok {
		*v = (*v)[:n]
		return v
	}
	b := make([]byte, n, 1<<(t+dirtyMinExp))
	return &b
}

// Put keeps buffers whose capacity is a tier's exactly (those Get made);
// others go to the collector.
func (p *dirtyPool) Put(b *[]byte) {
	c := cap(*b)
	if c == 0 || c&(c-1) != 0 {
		return
	}
	t := p.tier(c)
	if t < 0 || 1<<(t+dirtyMinExp) != c {
		return
	}
	p.tiers[t].Put(b)
}
