package transport

import "testing"

func TestDirtyPool(t *testing.T) {
	p := &dirtyPool{}
	for _, tc := range []struct {
		n       int
		wantCap int
	}{
		{1, 256},
		{256, 256},
		{257, 512},
		{16 << 10, 16 << 10},
		{(1 << 20) + 1, 2 << 20},
		{64 << 20, 64 << 20},
		{(64 << 20) + 1, (64 << 20) + 1}, // above the top tier: allocated as asked
	} {
		b := p.Get(tc.n)
		if len(*b) != tc.n || cap(*b) != tc.wantCap {
			t.Fatalf("Get(%d): len %d cap %d, want len %d cap %d", tc.n, len(*b), cap(*b), tc.n, tc.wantCap)
		}
		p.Put(b)
	}
	// A buffer comes back as it was left (not cleared) and with the length
	// asked for; buffers of other capacities are not kept. sync.Pool keeps
	// what it is given across one collection (its victim cache), and under
	// the race detector it drops a random share of what is put back: each
	// try puts a marked buffer back and looks for it.
	odd := make([]byte, 1000)
	p.Put(&odd)
	for range 100 {
		b := p.Get(1000)
		(*b)[0] = 42
		p.Put(b)
		c := p.Get(700)
		if len(*c) != 700 || cap(*c) != 1024 {
			t.Fatalf("Get(700): len %d cap %d", len(*c), cap(*c))
		}
		if (*c)[0] == 42 {
			return
		}
		p.Put(c)
	}
	t.Fatal("the pool never returned the buffer put back as it was left")
}
