package sparse

import (
	"container/heap"
	"context"
	"io"
	"slices"
)

// compareGlobal orders two cells in the array's global order: Hilbert
// value then coordinates for Hilbert arrays; else the space tile in tile
// order, then the coordinates in cell order.
func (r *Reader) compareGlobal(a *ltile, i int, b *ltile, j int) int {
	if r.hilbert {
		if c := cmpOrdered(a.hv[i], b.hv[j]); c != 0 {
			return c
		}
		for d, di := range r.dims {
			if c := di.compare(a.coord(d, i), b.coord(d, j)); c != 0 {
				return c
			}
		}
		return 0
	}
	for _, d := range r.tileOrder {
		di := r.dims[d]
		if c := cmpOrdered(di.tileIndex(a.coord(d, i)), di.tileIndex(b.coord(d, j))); c != 0 {
			return c
		}
	}
	for _, d := range r.cellOrder {
		if c := r.dims[d].compare(a.coord(d, i), b.coord(d, j)); c != 0 {
			return c
		}
	}
	return 0
}

func (r *Reader) sameCoords(a *ltile, i int, b *ltile, j int) bool {
	for d, di := range r.dims {
		if di.compare(a.coord(d, i), b.coord(d, j)) != 0 {
			return false
		}
	}
	return true
}

// newer reports whether cell (a, i) is a newer version than (b, j):
// later timestamp, then later fragment, then later position.
func newer(a *ltile, i int, b *ltile, j int) bool {
	ta, tb := a.timestamp(i), b.timestamp(j)
	if ta != tb {
		return ta > tb
	}
	if a.frag.i != b.frag.i {
		return a.frag.i > b.frag.i
	}
	if a.job.tile != b.job.tile {
		return a.job.tile > b.job.tile
	}
	return i > j
}

// cursor walks one fragment's selected cells in stored (global) order.
type cursor struct {
	p   *prefetcher
	cur *ltile
	k   int
	// key is the current cell's position in the global order as integers
	// (see Reader.orderKey), kept when every dimension has a fixed-size
	// numeric type: the merge then compares keys, computed once per
	// cell, instead of decoding coordinates and dividing them into tile
	// indexes at every heap comparison.
	key []uint64
}

func (c *cursor) cell() (*ltile, int) { return c.cur, c.cur.pos(c.k) }

// advance moves to the next selected cell; cur is nil at the end.
func (c *cursor) advance(ctx context.Context) error {
	if c.cur != nil {
		c.k++
		if c.k < c.cur.count() {
			return nil
		}
		c.cur.release()
		c.cur = nil
	}
	t, err := c.p.get(ctx)
	if err != nil {
		return err
	}
	c.cur, c.k = t, 0
	return nil
}

// orderKey writes into key the cell's place in the global order, for
// arrays whose dimensions all have numeric keys (Reader.numericKeys):
// the Hilbert value or the space tile's index along each dimension in
// tile order, then each coordinate's sortKey in cell order. Keys compare
// as compareGlobal does.
func (r *Reader) orderKey(t *ltile, i int, key []uint64) []uint64 {
	key = key[:0]
	if r.hilbert {
		key = append(key, t.hv[i])
		for d, di := range r.dims {
			key = append(key, di.sortKey(t.coord(d, i)))
		}
		return key
	}
	for _, d := range r.tileOrder {
		key = append(key, r.dims[d].tileIndex(t.coord(d, i)))
	}
	for _, d := range r.cellOrder {
		key = append(key, r.dims[d].sortKey(t.coord(d, i)))
	}
	return key
}

// numericKeys reports whether orderKey orders this array's cells
// exactly: sortKey is exact for every numeric kind, not for strings.
func (r *Reader) numericKeys() bool {
	for _, di := range r.dims {
		if di.kind == kindBytes {
			return false
		}
	}
	return true
}

// mergeSource merges the fragments' cursors in global order, keeping the
// newest version of each coordinate unless the array allows duplicates.
type mergeSource struct {
	r       *Reader
	all     []*cursor
	h       cursorHeap
	started bool
}

type cursorHeap struct {
	r    *Reader
	keys bool // cursors carry order keys
	cs   []*cursor
}

func (h *cursorHeap) Len() int { return len(h.cs) }
func (h *cursorHeap) Less(i, j int) bool {
	a, ai := h.cs[i].cell()
	b, bi := h.cs[j].cell()
	var c int
	if h.keys {
		c = slices.Compare(h.cs[i].key, h.cs[j].key)
	} else {
		c = h.r.compareGlobal(a, ai, b, bi)
	}
	if c != 0 {
		return c < 0
	}
	// Equal coordinates: older versions first, so that duplicates come
	// out in write order.
	return newer(b, bi, a, ai)
}
func (h *cursorHeap) Swap(i, j int) { h.cs[i], h.cs[j] = h.cs[j], h.cs[i] }
func (h *cursorHeap) Push(x any)    { h.cs = append(h.cs, x.(*cursor)) }
func (h *cursorHeap) Pop() any {
	x := h.cs[len(h.cs)-1]
	h.cs = h.cs[:len(h.cs)-1]
	return x
}

func (r *Reader) newMergeSource() *mergeSource {
	m := &mergeSource{r: r, h: cursorHeap{r: r, keys: r.numericKeys()}}
	for _, f := range r.frags {
		if len(f.jobs) == 0 {
			continue
		}
		m.all = append(m.all, &cursor{p: newPrefetcher(r, f.jobs, 2, false)})
	}
	return m
}

func (m *mergeSource) start(ctx context.Context) error {
	for _, c := range m.all {
		if err := m.advance(ctx, c); err != nil {
			return err
		}
		if c.cur != nil {
			m.h.cs = append(m.h.cs, c)
		}
	}
	heap.Init(&m.h)
	m.started = true
	return nil
}

// advance moves a cursor to its next cell and computes that cell's key.
func (m *mergeSource) advance(ctx context.Context, c *cursor) error {
	if err := c.advance(ctx); err != nil {
		return err
	}
	if m.h.keys && c.cur != nil {
		t, i := c.cell()
		c.key = m.r.orderKey(t, i, c.key)
	}
	return nil
}

// step advances the heap's top cursor.
func (m *mergeSource) step(ctx context.Context) error {
	c := m.h.cs[0]
	if err := m.advance(ctx, c); err != nil {
		return err
	}
	if c.cur == nil {
		heap.Pop(&m.h)
	} else {
		heap.Fix(&m.h, 0)
	}
	return nil
}

func (m *mergeSource) fill(ctx context.Context, b *batcher, max int) error {
	if !m.started {
		if err := m.start(ctx); err != nil {
			return err
		}
	}
	for max > 0 {
		if m.h.Len() == 0 {
			return io.EOF
		}
		// A tile's buffers outlive its budget release, so the cells kept
		// here stay readable after their cursors move on.
		t, i := m.h.cs[0].cell()
		if err := m.step(ctx); err != nil {
			return err
		}
		if m.r.dedup {
			// Every version of these coordinates is next in the merge.
			for m.h.Len() > 0 {
				u, j := m.h.cs[0].cell()
				if !m.r.sameCoords(t, i, u, j) {
					break
				}
				if newer(u, j, t, i) {
					t, i = u, j
				}
				if err := m.step(ctx); err != nil {
					return err
				}
			}
		}
		if t.del == nil || !t.del[i] {
			b.add(t, i, 1)
			max--
		}
	}
	return nil
}

func (m *mergeSource) close() {
	for _, c := range m.all {
		if c.cur != nil {
			c.cur.release()
			c.cur = nil
		}
		c.p.close()
	}
}
