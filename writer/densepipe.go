package writer

import (
	"cmp"
	"fmt"
	"runtime"
	"slices"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/tileflight/tileflight/format/schema"
)

// The tile pipeline of a streaming dense write of fixed-size attributes.
//
// A DoPut's cells arrive in the subarray's order, so a space tile can be
// filtered as soon as the last of its cells has arrived: the pipeline
// plans the fragments (bands of tiles along the slowest input dimension,
// about Options.MaxFragmentBytes of input each) before any cell arrives,
// hands each tile to the filter workers (GOMAXPROCS goroutines) the
// moment it is complete, and lets each input batch go once every tile
// reading it is filtered. Receiving, filtering (on every core) and
// writing the previous fragment thus overlap, and only the last tile's
// filtering is left when the stream ends.
//
// The cells are never concatenated: a worker gathers a tile's runs
// straight from the retained input batches (the Arrow buffers of the
// DoPut), and a tile lying whole and contiguous inside one batch is
// filtered in place, without any copy. A contiguous tile spanning several
// batches (a 16 MiB tile from pyarrow's 8 MiB batches, say) is not
// gathered either: its statistics fold over the batches' pieces in cell
// order and its chunks are compressed from them (spanParts).
//
// Memory: Append blocks while the retained input exceeds
// MaxFragmentBytes and tiles are being filtered (so a slow disk or CPU
// slows the client instead of growing the heap); the filtered tiles of
// the fragments not yet stored; one tile of scratch per worker for the
// tiles that are gathered (strided, nullable, partly covered).
//
// Var-sized attributes take the buffered path of stream.go: their cells'
// sizes, and so the fragments' extents, are not known in advance.

// inSeg is one appended batch: the bytes of every field for the global
// input cells [lo, hi).
type inSeg struct {
	lo, hi      int64
	data, valid [][]byte // per field (index into the pipe's fields)
	rec         arrow.RecordBatch
	bytes       int64
}

// pfrag is one planned fragment of the pipeline.
type pfrag struct {
	fr     *fragment
	sts    []spaceTile
	per    int     // cells per space tile
	start  int64   // global input cell of the fragment's first cell
	end    int64   // start + the fragment's cells
	lo, hi []int64 // per tile: the input cells [lo, hi) (from start) its runs read
	order  []int   // tiles by hi: the order they become complete
	byLo   []int   // tiles by lo
	next   int     // order[next] is the next tile to hand out
	low    int     // byLo[low] is the first unfiltered tile in lo order
	built  []bool
	left   int
	outs   [][]tileOut
	done   chan struct{} // closed when every tile is filtered
}

type tileJob struct {
	f *pfrag
	t int
}

type densePipe struct {
	dw     *DenseWriter
	fields []*field
	bpc    int64 // input bytes per cell, all fields
	budget int64
	conc   int

	mu        sync.Mutex
	cond      *sync.Cond
	started   bool
	segs      []inSeg
	recvd     int64 // cells appended
	held      int64 // bytes of segs
	queue     []tileJob
	inflight  int      // tiles handed out and not yet filtered
	active    []*pfrag // planned fragments with tiles not yet filtered
	cur       *pfrag   // the fragment whose tiles are being handed out
	sealed    []*pfrag // every tile handed out, waiting for the store
	nextStart int64    // global input cell where the next fragment starts
	inputDone bool
	stopping  bool
	err       error
	failed    chan struct{} // closed with the first failure
	stop      chan struct{} // closed by shutdown
	wdone     chan struct{} // closed when the writer returns
	wg        sync.WaitGroup
}

// pipelined says whether a dense write of s goes through the tile
// pipeline: every attribute fixed-size.
func pipelined(fields []*field) bool {
	for _, f := range fields {
		if f.isVar {
			return false
		}
	}
	return true
}

func newDensePipe(dw *DenseWriter) *densePipe {
	p := &densePipe{dw: dw, fields: dw.w.fields, budget: dw.w.opt.maxBytes(), conc: dw.w.opt.Concurrency,
		failed: make(chan struct{}), stop: make(chan struct{}), wdone: make(chan struct{})}
	if p.conc <= 0 {
		p.conc = runtime.GOMAXPROCS(0)
	}
	for _, f := range p.fields {
		p.bpc += int64(f.cellSize)
		if f.nullable {
			p.bpc++
		}
	}
	p.cond = sync.NewCond(&p.mu)
	return p
}

// add appends the next n cells (cols validated by checkColumns); rec, if
// any, is retained until its cells are filtered. It returns the first
// failure of the pipeline, if any.
func (p *densePipe) add(cols map[string]*col, n int, rec arrow.RecordBatch) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.err != nil {
		return p.err
	}
	if !p.started {
		p.started = true
		p.wg.Add(p.conc + 1)
		for range p.conc {
			go p.worker()
		}
		go p.writer()
	}
	if n > 0 {
		sg := inSeg{lo: p.recvd, hi: p.recvd + int64(n), data: make([][]byte, len(p.fields)), valid: make([][]byte, len(p.fields))}
		for i, f := range p.fields {
			c := cols[f.name]
			sg.data[i], sg.valid[i] = c.data, c.valid
			sg.bytes += int64(len(c.data) + len(c.valid))
		}
		if rec != nil {
			rec.Retain()
			sg.rec = rec
		}
		p.segs = append(p.segs, sg)
		p.recvd += int64(n)
		p.held += sg.bytes
	}
	p.dispatch()
	// Back-pressure: wait while too much input is held, as long as
	// filtering is under way to free some of it (a band of tiles larger
	// than the budget must still be let in whole).
	for p.err == nil && p.held > p.budget && p.inflight > 0 {
		p.cond.Wait()
	}
	return p.err
}

// dispatch plans fragments as their first cells arrive and hands out the
// tiles whose cells have all arrived. Called with mu held.
func (p *densePipe) dispatch() {
	for p.err == nil {
		f := p.cur
		if f == nil {
			if p.recvd <= p.nextStart {
				return
			}
			var err error
			if f, err = p.plan(); err != nil {
				p.setErr(err)
				return
			}
			p.cur = f
			p.active = append(p.active, f)
		}
		for f.next < len(f.order) && f.start+f.hi[f.order[f.next]] <= p.recvd {
			p.queue = append(p.queue, tileJob{f, f.order[f.next]})
			f.next++
			p.inflight++
		}
		p.cond.Broadcast()
		if f.next < len(f.order) {
			return
		}
		p.sealed = append(p.sealed, f)
		p.cur = nil
		p.nextStart = f.end
	}
}

// plan lays out the fragment starting at input cell p.nextStart: whole
// bands of tiles along the slowest input dimension, as many as fit in
// the fragment budget (at least one), the last ending with the subarray.
func (p *densePipe) plan() (*pfrag, error) {
	dw := p.dw
	w := dw.w
	g := dw.g
	d := dw.slow
	ext := g.ext[d]
	first := g.sub[d][0] + uint64(p.nextStart/dw.plane) // domain offset
	bandBytes := dw.plane * int64(ext) * p.bpc
	k := uint64(max(p.budget/max(bandBytes, 1), 1))
	last := g.sub[d][1]
	if rest := (last - first) / ext; k <= rest {
		if e := (first/ext+k)*ext - 1; e < last {
			last = e
		}
	}
	sub := append([][2]int64(nil), dw.subarray...)
	dim := &w.s.Dimensions[d]
	base := schema.AsUint64(dim.Type, dim.Lo())
	sub[d] = [2]int64{int64(first + base), int64(last + base)}
	pg, err := newGrid(w.s, sub)
	if err != nil {
		return nil, err
	}
	fr, sts := denseShell(w.s, w.layout, p.fields, pg, sub, dw.layout)
	f := &pfrag{fr: fr, sts: sts, per: int(pg.perTil), start: p.nextStart, end: p.nextStart + int64(pg.cells)}
	nt := len(sts)
	f.lo, f.hi = make([]int64, nt), make([]int64, nt)
	for t := range sts {
		st := &sts[t]
		lo, hi := int64(-1), int64(0)
		for _, r := range st.runs {
			if r.n == 0 {
				continue
			}
			if lo < 0 || r.ipos < lo {
				lo = r.ipos
			}
			hi = max(hi, r.ipos+(r.n-1)*st.step+1)
		}
		f.lo[t], f.hi[t] = max(lo, 0), hi
	}
	f.order = make([]int, nt)
	f.byLo = make([]int, nt)
	for t := range f.order {
		f.order[t], f.byLo[t] = t, t
	}
	slices.SortStableFunc(f.order, func(a, b int) int { return cmp.Compare(f.hi[a], f.hi[b]) })
	slices.SortStableFunc(f.byLo, func(a, b int) int { return cmp.Compare(f.lo[a], f.lo[b]) })
	f.built = make([]bool, nt)
	f.left = nt
	f.outs = make([][]tileOut, nt)
	f.done = make(chan struct{})
	return f, nil
}

func (p *densePipe) setErr(err error) {
	if p.err == nil {
		p.err = err
		close(p.failed)
	}
	p.cond.Broadcast()
}

// worker filters the tiles handed out, one at a time.
func (p *densePipe) worker() {
	defer p.wg.Done()
	var sc scratch
	var segs []inSeg
	p.mu.Lock()
	for {
		for len(p.queue) == 0 && !p.stopping && p.err == nil {
			p.cond.Wait()
		}
		if p.stopping || p.err != nil {
			p.mu.Unlock()
			return
		}
		j := p.queue[0]
		p.queue = p.queue[1:]
		// The segments the tile reads stay retained until it is marked
		// filtered below, so a copy of their headers can be read unlocked.
		lo, hi := j.f.start+j.f.lo[j.t], j.f.start+j.f.hi[j.t]
		i := p.segIndex(lo)
		segs = segs[:0]
		for ; i < len(p.segs) && p.segs[i].lo < hi; i++ {
			segs = append(segs, p.segs[i])
		}
		p.mu.Unlock()

		outs, err := p.filterTile(j, segs, &sc)

		p.mu.Lock()
		p.inflight--
		if err != nil {
			p.setErr(err)
			continue
		}
		f := j.f
		f.outs[j.t] = outs
		f.built[j.t] = true
		f.left--
		if f.left == 0 {
			close(f.done)
		}
		p.release()
		p.cond.Broadcast()
	}
}

// segIndex is the index of the segment holding input cell c. Called with
// mu held.
func (p *densePipe) segIndex(c int64) int {
	i, _ := slices.BinarySearchFunc(p.segs, c, func(s inSeg, c int64) int {
		if s.hi <= c {
			return -1
		}
		if s.lo > c {
			return 1
		}
		return 0
	})
	return i
}

// release lets go of the input no unfiltered tile reads. Called with mu
// held.
func (p *densePipe) release() {
	wm := p.nextStart // where the fragments not yet planned start
	if p.cur != nil {
		wm = p.cur.end
	}
	keep := p.active[:0]
	for _, f := range p.active {
		for f.low < len(f.byLo) && f.built[f.byLo[f.low]] {
			f.low++
		}
		if f.low == len(f.byLo) {
			continue
		}
		keep = append(keep, f)
		wm = min(wm, f.start+f.lo[f.byLo[f.low]])
	}
	clear(p.active[len(keep):])
	p.active = keep
	n := 0
	for n < len(p.segs) && p.segs[n].hi <= wm {
		p.drop(&p.segs[n])
		n++
	}
	if n > 0 {
		p.segs = append(p.segs[:0], p.segs[n:]...)
	}
}

func (p *densePipe) drop(s *inSeg) {
	if s.rec != nil {
		s.rec.Release()
	}
	p.held -= s.bytes
	*s = inSeg{}
}

// filterTile builds (gathers) and filters every field of tile j.t.
func (p *densePipe) filterTile(j tileJob, segs []inSeg, sc *scratch) ([]tileOut, error) {
	f := j.f
	st := &f.sts[j.t]
	outs := make([]tileOut, len(p.fields))
	for fi, fld := range p.fields {
		if parts := spanParts(segs, fi, fld, st, f.start, f.per); parts != nil {
			// A whole tile of consecutive input cells that arrived in
			// several batches: summarized and filtered from the batches
			// themselves instead of gathered into one buffer first.
			if stats, ok := fld.partsStats(parts); ok {
				fixed, err := fld.pipe.FilterTileParts(parts)
				if err != nil {
					return nil, fmt.Errorf("%s %q: tile %d: %w", role(fld.dim), fld.name, j.t, err)
				}
				outs[fi] = tileOut{fixed: fixed, stats: stats}
				continue
			}
		}
		tl := statTile{n: f.per, cellSize: fld.cellSize, slabs: st.slabs}
		tl.data = gatherTile(&sc.data, segs, fi, false, fld.cellSize, st, f.start, f.per)
		if fld.nullable {
			tl.valid = gatherTile(&sc.valid, segs, fi, true, 1, st, f.start, f.per)
		}
		o, err := f.fr.filterOne(fld, &tl)
		if err != nil {
			return nil, fmt.Errorf("%s %q: tile %d: %w", role(fld.dim), fld.name, j.t, err)
		}
		outs[fi] = o
	}
	return outs, nil
}

// writer stores the sealed fragments in order as their tiles complete.
func (p *densePipe) writer() {
	defer p.wg.Done()
	defer close(p.wdone)
	w := p.dw.w
	for {
		p.mu.Lock()
		for len(p.sealed) == 0 && !p.stopping && p.err == nil && !(p.inputDone && p.cur == nil) {
			p.cond.Wait()
		}
		if p.stopping || p.err != nil || len(p.sealed) == 0 {
			p.mu.Unlock()
			return
		}
		f := p.sealed[0]
		p.sealed = p.sealed[1:]
		p.mu.Unlock()
		select {
		case <-f.done:
		case <-p.failed:
			return
		case <-p.stop:
			return
		}
		err := w.lw.addBuilt(w.ctx, f.fr, f.outs)
		f.outs = nil
		if err != nil {
			p.mu.Lock()
			p.setErr(err)
			p.mu.Unlock()
			return
		}
	}
}

// finish waits until every cell appended is stored in a fragment, then
// stops the goroutines. The caller has checked that every cell of the
// subarray was appended.
func (p *densePipe) finish() error {
	p.mu.Lock()
	if !p.started {
		p.mu.Unlock()
		return nil
	}
	p.inputDone = true
	p.dispatch()
	if p.err == nil && p.cur != nil {
		p.setErr(fmt.Errorf("dense write: %d cells appended but tiles of the last fragment still miss cells", p.recvd))
	}
	p.cond.Broadcast()
	p.mu.Unlock()
	// The writer returns once the last fragment is stored, or on a failure.
	<-p.wdone
	p.shutdown()
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.err
}

// shutdown stops the workers and the writer (waiting for them) and lets
// every retained batch go. Idempotent.
func (p *densePipe) shutdown() {
	p.mu.Lock()
	if !p.stopping {
		p.stopping = true
		close(p.stop)
	}
	p.cond.Broadcast()
	p.mu.Unlock()
	p.wg.Wait()
	p.mu.Lock()
	for i := range p.segs {
		p.drop(&p.segs[i])
	}
	p.segs, p.queue, p.active, p.sealed, p.cur = nil, nil, nil, nil, nil
	p.mu.Unlock()
}

// gatherTile returns tile st's cells of field fi (or its validity) from
// the segments: the input itself when the tile is one stretch of input
// inside one segment, else a copy into buf (zeroed where the subarray
// does not cover the tile).
func gatherTile(buf *[]byte, segs []inSeg, fi int, valid bool, cs int, st *spaceTile, base int64, n int) []byte {
	src := func(s *inSeg) []byte {
		if valid {
			return s.valid[fi]
		}
		return s.data[fi]
	}
	if contiguous(st, n) {
		g := base + st.runs[0].ipos
		for i := range segs {
			if s := &segs[i]; g >= s.lo && g+int64(n) <= s.hi {
				off := int(g-s.lo) * cs
				return src(s)[off : off+n*cs : off+n*cs]
			}
		}
	}
	dst := grow(buf, n*cs, !st.full)
	for _, r := range st.runs {
		gatherRun(dst[int(r.tpos)*cs:int(r.tpos+r.n)*cs], segs, src, cs, base+r.ipos, r.n, st.step)
	}
	return dst
}

// spanParts returns, for a tile of one stretch of n consecutive input
// cells that lies in more than one segment, the pieces of field fi's
// values in each segment, in order; nil for any other tile (inside one
// segment the tile is a slice of it already, see gatherTile). Only
// fixed-size fields without validity, whose statistics walk the cells in
// order, are split this way.
func spanParts(segs []inSeg, fi int, fld *field, st *spaceTile, base int64, n int) [][]byte {
	if fld.isVar || fld.nullable || fld.dim || !cellOrder(st.slabs, n) || !contiguous(st, n) {
		return nil
	}
	g, end := base+st.runs[0].ipos, base+st.runs[0].ipos+int64(n)
	cs := int64(fld.cellSize)
	var parts [][]byte
	for i := range segs {
		s := &segs[i]
		if s.hi <= g || s.lo >= end {
			continue
		}
		if s.lo <= g && end <= s.hi {
			return nil // inside one segment
		}
		a, b := max(g, s.lo), min(end, s.hi)
		parts = append(parts, s.data[fi][(a-s.lo)*cs:(b-s.lo)*cs])
	}
	return parts
}

// cellOrder says whether the statistics of a tile of n cells walk slabs
// visiting every cell once in cell order (so the pieces of spanParts,
// summarized in order, add the cells up in the same order).
func cellOrder(slabs [][2]int, n int) bool {
	next := 0
	for _, s := range slabs {
		if s[0] != next {
			return false
		}
		next = s[1]
	}
	return slabs == nil || next == n
}

// contiguous says whether the runs of st fill its n cells with one
// stretch of consecutive input cells (a tile spanning whole rows of a
// row-major input, say).
func contiguous(st *spaceTile, n int) bool {
	if !st.full || len(st.runs) == 0 || st.runs[0].tpos != 0 || (st.step != 1 && n > 1) {
		return false
	}
	next := st.runs[0]
	for _, r := range st.runs {
		if r.tpos != next.tpos || r.ipos != next.ipos {
			return false
		}
		next = run{tpos: r.tpos + r.n, ipos: r.ipos + r.n}
	}
	return next.tpos == int64(n)
}

// gatherRun copies the n cells g, g+step, ... (global input cells) into
// dst.
func gatherRun(dst []byte, segs []inSeg, src func(*inSeg) []byte, cs int, g, n, step int64) {
	i := 0
	for i < len(segs) && segs[i].hi <= g {
		i++
	}
	if step == 1 {
		for n > 0 {
			s := &segs[i]
			k := min(n, s.hi-g)
			off := int(g-s.lo) * cs
			copy(dst[:int(k)*cs], src(s)[off:off+int(k)*cs])
			dst = dst[int(k)*cs:]
			g += k
			n -= k
			i++
		}
		return
	}
	if s := &segs[i]; g+(n-1)*step < s.hi {
		b := src(s)[int(g-s.lo)*cs:]
		switch cs {
		case 8:
			strideN(asSlice[uint64](dst), asSlice[uint64](b), n, step)
			return
		case 4:
			strideN(asSlice[uint32](dst), asSlice[uint32](b), n, step)
			return
		case 2:
			strideN(asSlice[uint16](dst), asSlice[uint16](b), n, step)
			return
		case 1:
			strideN(dst, b, n, step)
			return
		}
	}
	for k := int64(0); k < n; k++ {
		for segs[i].hi <= g {
			i++
		}
		s := &segs[i]
		off := int(g-s.lo) * cs
		copy(dst[int(k)*cs:int(k+1)*cs], src(s)[off:off+cs])
		g += step
	}
}

func strideN[T uint8 | uint16 | uint32 | uint64](dst, src []T, n, step int64) {
	d := dst[:n]
	var p int64
	for i := range d {
		d[i] = src[p]
		p += step
	}
}
