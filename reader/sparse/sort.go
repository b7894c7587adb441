package sparse

import (
	"cmp"
	"context"
	"github.com/tileflight/tileflight/internal/radix"
	"io"
	"math/bits"
	"runtime"
	"slices"
)

// chunkCells bounds the cells of the tiles one row/col-major chunk loads
// (a chunk always takes at least one group of tiles, so it may exceed it).
var chunkCells uint64 = 1 << 20

// chunk is a slab of the leading sort dimension, [lo, hi) (nil: unbounded),
// with the tiles whose MBR meets it.
type chunk struct {
	lo, hi []byte
	jobs   []*tileJob
}

// sortSource produces row-major or col-major results: the leading sort
// dimension is cut into slabs whose tiles fit a bounded number of cells;
// each slab's cells are sorted, deduplicated and emitted before the next
// slab is loaded. Tiles spanning several slabs stay loaded until their
// last slab.
type sortSource struct {
	r       *Reader
	order   []int // dimensions in sort priority
	exact   bool  // the two keys decide coordinate equality
	chunks  []chunk
	ci      int
	loaded  map[*tileJob]*ltile
	tiles   []*ltile
	refs    []sref
	scratch []sref
	k, rep  int
}

type sref struct {
	k0, k1 uint64
	t, pos uint32
	m      uint8
}

func (r *Reader) newSortSource() (*sortSource, error) {
	nd := len(r.dims)
	s := &sortSource{r: r, loaded: map[*tileJob]*ltile{}}
	for k := 0; k < nd; k++ {
		d := k
		if r.plan.Layout == "col-major" {
			d = nd - 1 - k
		}
		s.order = append(s.order, d)
	}
	s.exact = nd <= 2
	for _, d := range s.order {
		if r.dims[d].kind == kindBytes {
			s.exact = false
		}
	}
	var jobs []*tileJob
	for _, f := range r.frags {
		jobs = append(jobs, f.jobs...)
	}
	s.chunks = r.planChunks(s.order[0], jobs)
	return s, nil
}

func (r *Reader) planChunks(kd int, jobs []*tileJob) []chunk {
	di := r.dims[kd]
	jobs = slices.Clone(jobs)
	slices.SortStableFunc(jobs, func(a, b *tileJob) int { return di.compare(a.mbr[kd].Start, b.mbr[kd].Start) })
	var (
		chunks []chunk
		active []*tileJob
		lo     []byte
	)
	for i := 0; i < len(jobs); {
		set := slices.Clone(active)
		cells := uint64(0)
		for _, j := range active {
			cells += j.cells
		}
		added := false
		for i < len(jobs) {
			g := i
			gc := uint64(0)
			for g < len(jobs) && di.compare(jobs[g].mbr[kd].Start, jobs[i].mbr[kd].Start) == 0 {
				gc += jobs[g].cells
				g++
			}
			if added && cells+gc > chunkCells {
				break
			}
			set = append(set, jobs[i:g]...)
			cells += gc
			i = g
			added = true
		}
		var hi []byte
		if i < len(jobs) {
			hi = jobs[i].mbr[kd].Start
		}
		chunks = append(chunks, chunk{lo: lo, hi: hi, jobs: set})
		active = active[:0]
		if hi != nil {
			for _, j := range set {
				if di.compare(j.mbr[kd].End, hi) >= 0 {
					active = append(active, j)
				}
			}
		}
		lo = hi
	}
	return chunks
}

func (s *sortSource) compare(a, b *sref) int {
	if c := cmpOrdered(a.k0, b.k0); c != 0 {
		return c
	}
	if c := cmpOrdered(a.k1, b.k1); c != 0 {
		return c
	}
	if !s.exact {
		ta, tb := s.tiles[a.t], s.tiles[b.t]
		for _, d := range s.order {
			if c := s.r.dims[d].compare(ta.coord(d, int(a.pos)), tb.coord(d, int(b.pos))); c != 0 {
				return c
			}
		}
	}
	return 0
}

// loadChunk loads the next slab's tiles and sorts its cells.
func (s *sortSource) loadChunk(ctx context.Context) error {
	r := s.r
	c := &s.chunks[s.ci]
	s.ci++
	in := map[*tileJob]bool{}
	var todo []*tileJob
	for _, j := range c.jobs {
		in[j] = true
		if _, ok := s.loaded[j]; !ok {
			todo = append(todo, j)
		}
	}
	for j, t := range s.loaded {
		if !in[j] {
			t.release()
			delete(s.loaded, j)
		}
	}
	p := newPrefetcher(r, todo, runtime.GOMAXPROCS(0)+1, false)
	for range todo {
		// get skips tiles without selected cells; record what was asked.
		next := p.next
		t, err := p.get(ctx)
		if err != nil {
			p.close()
			return err
		}
		for k := next; k < p.next; k++ {
			s.loaded[todo[k]] = nil
		}
		if t == nil {
			break
		}
		s.loaded[t.job] = t
	}
	p.close()

	s.tiles = s.tiles[:0]
	s.refs = s.refs[:0]
	kd := s.order[0]
	dk := r.dims[kd]
	var d1 *dimInfo
	if len(s.order) > 1 {
		d1 = r.dims[s.order[1]]
	}
	// With no per-cell timestamps, a cell is newer than another with the
	// same coordinates when its fragment starts later (then: later
	// fragment, later tile, later position). Cells appended in that order
	// need only a stable sort by key, which radix sorting gives.
	jobs := c.jobs
	byKey := s.exact
	for _, j := range jobs {
		if t := s.loaded[j]; t != nil && t.ts != nil {
			byKey = false
		}
	}
	if byKey {
		jobs = slices.Clone(jobs)
		slices.SortStableFunc(jobs, func(a, b *tileJob) int {
			if c := cmp.Compare(a.frag.start, b.frag.start); c != 0 {
				return c
			}
			if c := cmp.Compare(a.frag.i, b.frag.i); c != 0 {
				return c
			}
			return cmp.Compare(a.tile, b.tile)
		})
	}
	for _, j := range jobs {
		t := s.loaded[j]
		if t == nil {
			continue
		}
		ti := uint32(len(s.tiles))
		s.tiles = append(s.tiles, t)
		for k := 0; k < t.count(); k++ {
			i := t.pos(k)
			v := t.coord(kd, i)
			if c.lo != nil && dk.compare(v, c.lo) < 0 || c.hi != nil && dk.compare(v, c.hi) >= 0 {
				continue
			}
			ref := sref{k0: dk.sortKey(v), t: ti, pos: uint32(i), m: uint8(t.multAt(k))}
			if d1 != nil {
				ref.k1 = d1.sortKey(t.coord(s.order[1], i))
			}
			s.refs = append(s.refs, ref)
		}
	}
	if byKey && len(s.refs) > 0 {
		s.refs, s.scratch = radixSort(s.refs, s.scratch)
	} else {
		s.sortRefs()
	}
	// Keep the newest version of each coordinate (the last of its group),
	// then drop the cells deleted after deduplication.
	out := s.refs[:0]
	for i := 0; i < len(s.refs); i++ {
		ref := s.refs[i]
		if r.dedup {
			for i+1 < len(s.refs) && s.compare(&s.refs[i], &s.refs[i+1]) == 0 {
				i++
			}
			ref = s.refs[i]
		}
		if t := s.tiles[ref.t]; t.del != nil && t.del[ref.pos] {
			continue
		}
		out = append(out, ref)
	}
	s.refs = out
	s.k, s.rep = 0, 0
	return nil
}

// sortRefs orders the slab's cells by coordinates, older versions of
// equal coordinates first.
func (s *sortSource) sortRefs() {
	slices.SortFunc(s.refs, func(a, b sref) int {
		if c := s.compare(&a, &b); c != 0 {
			return c
		}
		ta, tb := s.tiles[a.t], s.tiles[b.t]
		if newer(ta, int(a.pos), tb, int(b.pos)) {
			return 1
		}
		if newer(tb, int(b.pos), ta, int(a.pos)) {
			return -1
		}
		return 0
	})
}

// radixSort sorts refs stably by (k0, k1) with package radix: by k1,
// then (stably) by k0, each over only the bits in which the keys differ
// from their minimum (coordinates of a slab rarely span more than a few
// bytes); the refs are then moved once, into scratch. It returns the
// sorted slice and the other buffer, for reuse.
func radixSort(refs, scratch []sref) (sorted, spare []sref) {
	n := len(refs)
	if cap(scratch) < n {
		scratch = make([]sref, n)
	}
	scratch = scratch[:n]
	if n == 0 {
		return refs, scratch
	}
	lo0, hi0, lo1, hi1 := refs[0].k0, refs[0].k0, refs[0].k1, refs[0].k1
	for i := range refs {
		k0, k1 := refs[i].k0, refs[i].k1
		lo0, hi0 = min(lo0, k0), max(hi0, k0)
		lo1, hi1 = min(lo1, k1), max(hi1, k1)
	}
	keys := make([]uint64, n)
	perm := make([]uint32, n)
	var sorter radix.Sorter
	for i := range refs {
		keys[i] = refs[i].k1 - lo1
		perm[i] = uint32(i)
	}
	sorter.Sort(keys, perm, bits.Len64(hi1-lo1))
	for i, p := range perm {
		keys[i] = refs[p].k0 - lo0
	}
	sorter.Sort(keys, perm, bits.Len64(hi0-lo0))
	for i, p := range perm {
		scratch[i] = refs[p]
	}
	return scratch, refs
}

func (s *sortSource) fill(ctx context.Context, b *batcher, max int) error {
	for max > 0 {
		if s.k >= len(s.refs) {
			if s.ci >= len(s.chunks) {
				return io.EOF
			}
			if err := s.loadChunk(ctx); err != nil {
				return err
			}
			continue
		}
		ref := &s.refs[s.k]
		b.add(s.tiles[ref.t], int(ref.pos), 1)
		max--
		s.rep++
		if s.rep >= int(ref.m) {
			s.k++
			s.rep = 0
		}
	}
	return nil
}

func (s *sortSource) close() {
	for j, t := range s.loaded {
		t.release()
		delete(s.loaded, j)
	}
}
