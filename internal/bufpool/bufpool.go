// Package bufpool recycles large byte buffers across queries: bounded free
// lists by size class, and reference-counted buffers that Arrow arrays can
// hold (Buf is a memory.Allocator whose Free drops a reference), so that a
// tile decoded for a record batch goes back to the free lists once gRPC
// has sent the batch instead of being collected.
//
// Why: a streamed scan allocates its whole result in tile-sized buffers
// (a 10 M cell sparse scan: 240 MB decoded plus 80 MB read per query);
// every one was a fresh, large allocation, and at the daemon's GOGC=50
// over a heap of about 40 MB that made 15 collections per scan (about a
// fifth of the daemon's CPU). A sync.Pool would not do: it is emptied by
// the very collections it is meant to avoid.
//
// Buffers from Get are not zeroed: they hold whatever their last user
// wrote, so a caller must overwrite every byte it later reads.
package bufpool

import (
	"math/bits"
	"sync"
	"sync/atomic"

	"github.com/apache/arrow-go/v18/arrow/memory"
)

// MaxPooled bounds the bytes all free lists hold together; a buffer handed
// back beyond it is left to the collector.
const MaxPooled = 64 << 20

// classBytes bounds what one size class keeps (at least two buffers).
const classBytes = 16 << 20

// minClass is the smallest size class: smaller buffers are not worth the
// free list's channel operations.
const minClass = 4096

var (
	lists  sync.Map // class capacity -> chan []byte
	pooled atomic.Int64
	live   atomic.Int64 // Bufs made and not yet recycled

	// poison, when set (SetPoison), overwrites a buffer as it is handed
	// back, so that a reader still using it sees garbage.
	poison func([]byte)
)

// class is the capacity of the size class that holds n bytes: 8 classes
// per power of two above minClass, so a buffer wastes at most an eighth of
// its capacity (a 100 000 cell float64 tile, 800 032 bytes with its decode
// slack, gets 851 968).
func class(n int) int {
	if n <= minClass {
		return minClass
	}
	step := 1 << max(bits.Len(uint(n-1))-4, 0)
	return (n + step - 1) &^ (step - 1)
}

func list(c int) chan []byte {
	if l, ok := lists.Load(c); ok {
		return l.(chan []byte)
	}
	l, _ := lists.LoadOrStore(c, make(chan []byte, max(2, classBytes/c)))
	return l.(chan []byte)
}

// Get returns a buffer of length n whose capacity is n's size class. Its
// contents are undefined.
func Get(n int) []byte {
	c := class(n)
	select {
	case b := <-list(c):
		pooled.Add(-int64(c))
		return b[:n]
	default:
		return make([]byte, n, c)
	}
}

// Put hands back a buffer Get returned (any length: its capacity names its
// class). The caller must not use b afterwards. Buffers of another
// capacity are ignored.
func Put(b []byte) {
	c := cap(b)
	if c < minClass || class(c) != c {
		return
	}
	if poison != nil {
		poison(b[:c])
	}
	if pooled.Add(int64(c)) > MaxPooled {
		pooled.Add(-int64(c))
		return
	}
	select {
	case list(c) <- b[:0]:
	default:
		pooled.Add(-int64(c))
	}
}

// Pooled is the bytes the free lists hold (tests, metrics).
func Pooled() int64 { return pooled.Load() }

// Live is how many Bufs New made that are not yet recycled (tests: a
// reader that has released everything leaves it unchanged).
func Live() int64 { return live.Load() }

// Poison overwrites b with 0xA5 bytes: the hook tests give SetPoison.
func Poison(b []byte) {
	for i := range b {
		b[i] = 0xA5
	}
}

// SetPoison makes Put overwrite every buffer handed back with f (nil: no
// longer), so that tests see any read of a buffer after its release as
// garbage. It is for tests, set before any concurrent use (TestMain); it
// returns the function restoring the previous hook.
func SetPoison(f func([]byte)) (restore func()) {
	old := poison
	poison = f
	return func() { poison = old }
}

// Buf is a pooled buffer shared by reference count: New returns it with
// one reference; Retain adds one, Release drops one, and the last Release
// hands the buffer back to the free lists. As a memory.Allocator it is the
// owner of Arrow buffers wrapping its bytes (memory.NewBufferWithAllocator
// after a Retain): their release calls Free, which drops that reference.
type Buf struct {
	b    []byte
	refs atomic.Int32
}

// New returns a Buf of n bytes (capacity at least c), not zeroed, with one
// reference.
func New(n, c int) *Buf {
	b := &Buf{b: Get(max(n, c))[:n]}
	b.refs.Store(1)
	live.Add(1)
	return b
}

// Bytes is the buffer (valid while a reference is held).
func (b *Buf) Bytes() []byte { return b.b }

// Retain adds a reference.
func (b *Buf) Retain() { b.refs.Add(1) }

// Release drops a reference; the last one recycles the buffer.
func (b *Buf) Release() {
	switch n := b.refs.Add(-1); {
	case n == 0:
		live.Add(-1)
		Put(b.b)
	case n < 0:
		panic("bufpool: Buf released more often than retained")
	}
}

// Allocate is never used: Buf only owns the bytes it was made with.
func (b *Buf) Allocate(n int) []byte { return make([]byte, n) }

// Reallocate copies into a fresh slice: Buf's bytes are never resized.
func (b *Buf) Reallocate(n int, old []byte) []byte {
	nb := make([]byte, n)
	copy(nb, old)
	return nb
}

// Free drops the reference an Arrow buffer held (see Buf).
func (b *Buf) Free([]byte) { b.Release() }

var _ memory.Allocator = (*Buf)(nil)

// Trim empties the free lists and returns the bytes they held, now left
// to the collector. Buffers in use are not touched: they come back to the
// (emptied) lists as usual. The daemon trims when it is idle
// (internal/idletrim): pooled buffers are live heap, which the next
// query's heap goal would otherwise count.
func Trim() int64 {
	var n int64
	lists.Range(func(k, l any) bool {
		c := int64(k.(int))
		for {
			select {
			case <-l.(chan []byte):
				pooled.Add(-c)
				n += c
			default:
				return true
			}
		}
	})
	return n
}
