package names

import (
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"sync"
	"time"
)

// The unique part of a TileDB 2.30 name is 32 lower-case hex digits: an
// 8-digit counter, then 24 random digits. The counter starts at a random
// value (top bit clear) each new millisecond of the wall clock and
// increments for every further name in the same millisecond, so names made
// by one process within one millisecond sort in creation order.
type labelGen struct {
	mu      sync.Mutex
	lastMS  uint64
	counter uint32
}

var gen labelGen

// now is the clock, replaceable in tests.
var now = func() uint64 { return uint64(time.Now().UnixMilli()) }

func random64() uint64 {
	var b [8]byte
	rand.Read(b[:])
	return binary.LittleEndian.Uint64(b[:])
}

func (g *labelGen) next() (string, uint64) {
	ms := now()
	g.mu.Lock()
	if ms != g.lastMS {
		g.lastMS = ms
		g.counter = uint32(random64()) & 0x7FFFFFFF
	} else {
		g.counter++
	}
	c := g.counter
	g.mu.Unlock()
	r := random64()
	return fmt.Sprintf("%08x%08x%016x", c, uint32(random64()), r), ms
}

// NewUUID returns a fresh 32-hex-digit unique part, made the way TileDB
// 2.30 makes them.
func NewUUID() string {
	u, _ := gen.next()
	return u
}

// New returns a fresh name `__t1_t2_uuid_v` (Form3), or `__t1_t2_uuid`
// (Form2) when version is 0, which is how TileDB names schemas and
// metadata files. As in TileDB, t1 = t2 = 0 means "now". TileDB refuses
// t1 > t2; New swaps them rather than return a name nothing can parse.
func New(t1, t2 uint64, version uint32) Name {
	if t1 > t2 {
		t1, t2 = t2, t1
	}
	u, ms := gen.next()
	if t1 == 0 && t2 == 0 {
		t1, t2 = ms, ms
	}
	n := Name{T1: t1, T2: t2, UUID: u, Form: Form2}
	if version != 0 {
		n.Form, n.Version = Form3, version
	}
	return n
}
