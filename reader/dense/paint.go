package dense

import (
	"context"
	"encoding/binary"
	"fmt"
	"sync"

	"github.com/tileflight/tileflight/arrowconv"
	"github.com/tileflight/tileflight/errkind"
	"github.com/tileflight/tileflight/reader/tileio"
)

// sub is a run of n coordinates of one dimension inside one space tile:
// result index i (within the chunk's coordinate list of that dimension)
// and offset o inside the tile.
type sub struct {
	i int
	o uint64
	n int
}

// maxChunkCells bounds the cells of one chunk.
const maxChunkCells = 1 << 28

// region is the part of a chunk inside one space tile.
type region struct {
	tile   []uint64
	subs   [][]sub
	lo, hi []uint64 // bounding box, absolute offsets
	// skip holds the fragments whose tile here the filter's statistics
	// prove can hold no passing cell: their tiles are not read, and the
	// cells they are the newest writer of fail (see pruneTiles).
	skip map[*frag]bool
}

// layout of a chunk's result: cells per dimension, result strides, and the
// dimensions from slowest to fastest.
type chunkLayout struct {
	cnt []int
	rs  []int
	ord []int
}

func (d *Reader) layoutOf(c *Chunk) chunkLayout {
	nd := d.g.nd
	l := chunkLayout{cnt: make([]int, nd), rs: make([]int, nd), ord: make([]int, nd)}
	n := uint64(1)
	for i, ps := range c.dims {
		k := count(ps)
		l.cnt[i] = int(min(k, 1<<40))
		n = min(n*k, 1<<62)
	}
	c.n = int(n)
	s := 1
	for k := 0; k < nd; k++ {
		i := k
		if c.rowMaj {
			i = nd - 1 - k
		}
		l.rs[i] = s
		s *= l.cnt[i]
		l.ord[nd-1-k] = i
	}
	return l
}

// regions splits a chunk by space tile.
func (d *Reader) regions(c *Chunk) []region {
	g := d.g
	nd := g.nd
	tiles := make([][]uint64, nd)
	subs := make([]map[uint64][]sub, nd)
	for i, ps := range c.dims {
		subs[i] = map[uint64][]sub{}
		ext := g.ext[i]
		ri := 0
		for _, p := range ps {
			off, left := p.off, p.n
			for left > 0 {
				t := off / ext
				k := min(left, (t+1)*ext-off)
				if _, ok := subs[i][t]; !ok {
					tiles[i] = append(tiles[i], t)
				}
				subs[i][t] = append(subs[i][t], sub{i: ri, o: off - t*ext, n: int(k)})
				ri += int(k)
				off += k
				left -= k
			}
		}
		if len(tiles[i]) == 0 {
			return nil
		}
	}
	var out []region
	idx := make([]int, nd)
	for {
		r := region{tile: make([]uint64, nd), subs: make([][]sub, nd), lo: make([]uint64, nd), hi: make([]uint64, nd)}
		for i := range idx {
			t := tiles[i][idx[i]]
			r.tile[i] = t
			r.subs[i] = subs[i][t]
			lo, hi := ^uint64(0), uint64(0)
			for _, s := range r.subs[i] {
				lo = min(lo, t*g.ext[i]+s.o)
				hi = max(hi, t*g.ext[i]+s.o+uint64(s.n)-1)
			}
			r.lo[i], r.hi[i] = lo, hi
		}
		out = append(out, r)
		k := 0
		for ; k < nd; k++ {
			idx[k]++
			if idx[k] < len(tiles[k]) {
				break
			}
			idx[k] = 0
		}
		if k == nd {
			return out
		}
	}
}

// paintList returns the fragments to paint a region with, oldest first,
// and whether unwritten cells need the fill value first: the newest
// fragment covering the whole region hides everything older.
func (d *Reader) paintList(r *region) (list []*frag, fill bool) {
	fill = true
	for k := len(d.frags) - 1; k >= 0; k-- {
		fr := d.frags[k]
		inter, cover := true, true
		for i := range r.lo {
			if fr.nlo[i] > r.hi[i] || fr.nhi[i] < r.lo[i] {
				inter = false
				break
			}
			if fr.nlo[i] > r.lo[i] || fr.nhi[i] < r.hi[i] {
				cover = false
			}
		}
		if !inter {
			continue
		}
		list = append(list, fr)
		if cover {
			fill = false
			break
		}
	}
	for i, j := 0, len(list)-1; i < j; i, j = i+1, j-1 {
		list[i], list[j] = list[j], list[i]
	}
	return list, fill
}

// walk calls fn for every run of the region's cells restricted to the box
// [lo, hi] (absolute offsets; nil = no restriction): dst is the first
// result position (the run's result positions are consecutive), src the
// first cell position in the tile and stride the tile step between cells.
func (d *Reader) walk(l *chunkLayout, r *region, lo, hi []uint64, fn func(dst, src, stride, n int)) {
	g := d.g
	nd := g.nd
	subs := r.subs
	if lo != nil {
		subs = make([][]sub, nd)
		for i, ss := range r.subs {
			base := r.tile[i] * g.ext[i]
			for _, s := range ss {
				a, b := base+s.o, base+s.o+uint64(s.n)-1
				a, b = max(a, lo[i]), min(b, hi[i])
				if a > b {
					continue
				}
				subs[i] = append(subs[i], sub{i: s.i + int(a-(base+s.o)), o: a - base, n: int(b - a + 1)})
			}
			if len(subs[i]) == 0 {
				return
			}
		}
	}
	last := l.ord[nd-1]
	// A chunk of many short runs takes a while: the read's cancellation
	// is looked at every few thousand runs, and stops the walk (build
	// then answers the cancellation, never the part painted).
	runs := 0
	stopped := false
	var rec func(level, dst, src int)
	rec = func(level, dst, src int) {
		dim := l.ord[level]
		cs := int(g.cellStr[dim])
		if dim == last {
			for _, s := range subs[dim] {
				fn(dst+s.i*l.rs[dim], src+int(s.o)*cs, cs, s.n)
			}
			runs += len(subs[dim])
			if runs >= 4096 {
				runs = 0
				stopped = d.bg.Err() != nil
			}
			return
		}
		for _, s := range subs[dim] {
			for k := 0; k < s.n && !stopped; k++ {
				rec(level+1, dst+(s.i+k)*l.rs[dim], src+(int(s.o)+k)*cs)
			}
		}
	}
	rec(0, 0, 0)
}

// build loads the chunk's tiles and assembles its columns.
func (d *Reader) build(ctx context.Context, c *Chunk) error {
	l := d.layoutOf(c)
	// A chunk is at least one coordinate of the slowest dimension (or one
	// space tile): when that alone is absurdly large, refuse rather than
	// allocate it.
	if c.n > maxChunkCells {
		return errkind.Errorf(errkind.ResourceExhausted, "array %s: %d cells in one row of the subarray (or one space tile); at most %d: narrow the subarray or use another layout",
			d.p.Array.Dir, c.n, maxChunkCells)
	}
	c.cols = make([]colData, len(d.fields))
	regs := d.regions(c)
	// The chunk's columns are charged to the read's budget before they
	// are built; a whole tile handed on as it is (wrapTile) stays charged
	// as the loader charged it, and only its dimension columns are new.
	charge := int64(c.n) * int64(d.rowBytes)
	if c.full && len(regs) == 1 && d.prog == nil {
		if list, fill := d.paintList(&regs[0]); !fill && len(list) == 1 {
			charge = int64(c.n) * int64(d.dimBytes)
		}
	}
	if err := d.hold(ctx, c, charge); err != nil {
		return err
	}
	if d.prog != nil {
		if err := d.pruneTiles(c, &l, regs); err != nil {
			return err
		}
		if !d.agg && d.p.Query != nil && d.p.Query.DropFailing && allFail(c.fail) {
			// Every cell's newest version is in a tile whose statistics
			// rule the filter out, and failing cells are dropped: nothing
			// of this chunk is read or built.
			c.n, c.fail = 0, nil
			return nil
		}
	}
	for i, f := range d.fields {
		if f.Role == arrowconv.Dimension {
			c.cols[i] = colData{data: d.dimColumn(c, &l, i, f)}
		}
	}
	if d.agg {
		if d.stats != nil && d.prog == nil && c.full && len(regs) == 1 {
			if list, fill := d.paintList(&regs[0]); !fill && len(list) == 1 {
				fr := list[0]
				took, err := d.stats(fr.f, fr.tileIndex(regs[0].tile), uint64(c.n))
				if err != nil {
					return errkind.Wrap(errkind.DataLoss, fmt.Errorf("array %s: fragment %s: %w", d.p.Array.Dir, fr.f.Name, err))
				}
				if took {
					c.answered = true
					return nil
				}
			}
		}
		d.markWritten(c, &l, regs)
	}
	if c.full && len(regs) == 1 && d.prog == nil {
		list, fill := d.paintList(&regs[0])
		if !fill && len(list) == 1 {
			if err := d.wrapTile(ctx, c, list[0], regs[0].tile); err != nil {
				return err
			}
			return ctx.Err() // its dimension columns may be part built

		}
	}
	for i, f := range d.fields {
		if f.Role == arrowconv.Dimension {
			continue
		}
		var err error
		if f.IsVar() {
			err = d.buildVar(ctx, c, &l, regs, i, f)
		} else {
			err = d.buildFixed(ctx, c, &l, regs, i, f)
		}
		if err != nil {
			return err
		}
	}
	if d.prog != nil {
		if err := ctx.Err(); err != nil {
			return err
		}
		return d.filterChunk(c)
	}
	// A walk cut short by the cancellation left the chunk part painted.
	return ctx.Err()
}

// tileRef names one tile a chunk paints from. hi > 0 says painting reads
// only bytes [lo, hi) of the tile's Data (see cellRange).
type tileRef struct {
	fr     *frag
	name   string
	t      []uint64
	lo, hi uint64
	zstd   bool // load compressed when it can be (tileio.LoadZstd)
}

// cellRange is the byte range [lo, hi) of fragment fr's tile under region
// r, for cells of cs bytes, that painting the region reads: from the
// first to the last of the cells of r inside fr's domain, in the tile's
// cell order. A cell's position in the tile is the sum of its in-tile
// offsets times the cell strides, which grows with each offset, so the
// box's low and high corners are its first and last cells (gaps between
// a dimension's runs only make the range wider than needed). ok is false
// when the region and the fragment do not meet.
func (d *Reader) cellRange(r *region, fr *frag, cs int) (lo, hi uint64, ok bool) {
	g := d.g
	var first, last uint64
	for i := range r.lo {
		a, b := max(r.lo[i], fr.nlo[i]), min(r.hi[i], fr.nhi[i])
		if a > b {
			return 0, 0, false
		}
		base := r.tile[i] * g.ext[i]
		first += (a - base) * g.cellStr[i]
		last += (b - base) * g.cellStr[i]
	}
	return first * uint64(cs), (last + 1) * uint64(cs), true
}

// load loads a tile of chunk c: it waits for room in the budget until the
// consumer waits for c.
func (d *Reader) load(ctx context.Context, c *Chunk, r tileRef) (*tileio.Tile, error) {
	fr, name, t := r.fr, r.name, r.t
	var tile *tileio.Tile
	var err error
	switch {
	case r.zstd:
		tile, err = d.loader.LoadZstd(ctx, fr.f, name, fr.tileIndex(t), c.need)
	case r.hi > 0:
		tile, err = d.loader.LoadRange(ctx, fr.f, name, fr.tileIndex(t), c.need, r.lo, r.hi)
	default:
		tile, err = d.loader.LoadWhen(ctx, fr.f, name, fr.tileIndex(t), c.need)
	}
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("array %s: %w", d.p.Array.Dir, err)
	}
	return tile, nil
}

// loadInOrder loads refs, up to d.window at once, and calls use with each
// tile in the order of refs (painting order matters: newer fragments
// paint over older ones); each tile is released after use.
func (d *Reader) loadInOrder(ctx context.Context, c *Chunk, refs []tileRef, use func(i int, t *tileio.Tile) error) error {
	if d.window <= 1 || len(refs) <= 1 {
		for i, r := range refs {
			t, err := d.load(ctx, c, r)
			if err != nil {
				return err
			}
			err = use(i, t)
			t.Release()
			if err != nil {
				return err
			}
		}
		return nil
	}
	type loaded struct {
		t   *tileio.Tile
		err error
	}
	lctx, cancel := context.WithCancel(ctx)
	results := make([]chan loaded, len(refs))
	for i := range results {
		results[i] = make(chan loaded, 1)
	}
	slots := make(chan struct{}, d.window)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := range refs {
			select {
			case slots <- struct{}{}:
			case <-lctx.Done():
				return
			}
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				t, err := d.load(lctx, c, refs[i])
				results[i] <- loaded{t, err}
			}(i)
		}
	}()
	next := 0
	defer func() {
		cancel()
		wg.Wait()
		for i := next; i < len(refs); i++ {
			select {
			case x := <-results[i]:
				if x.t != nil {
					x.t.Release()
				}
			default:
			}
		}
	}()
	for next < len(refs) {
		var x loaded
		select {
		case x = <-results[next]:
		case <-lctx.Done():
			return lctx.Err()
		}
		i := next
		next++
		<-slots
		if x.err != nil {
			return x.err
		}
		err := use(i, x.t)
		x.t.Release()
		if err != nil {
			return err
		}
	}
	return nil
}

func (d *Reader) checkTile(fr *frag, f arrowconv.Field, tile *tileio.Tile, ti uint64) error {
	if tile.Cells != d.g.tileSize ||
		(!f.IsVar() && uint64(len(tile.Data)) != tile.Cells*uint64(f.CellSize())) ||
		(f.IsVar() && uint64(len(tile.Offsets)) != 8*(tile.Cells+1)) ||
		(f.Nullable && uint64(len(tile.Validity)) != tile.Cells) {
		return errkind.Errorf(errkind.DataLoss, "array %s: fragment %s: attribute %q: tile %d holds %d cells, a space tile has %d",
			d.p.Array.Dir, fr.f.Name, f.Name, ti, tile.Cells, d.g.tileSize)
	}
	return nil
}

// wrapTile makes the chunk's attribute columns the tile buffers themselves.
func (d *Reader) wrapTile(ctx context.Context, c *Chunk, fr *frag, t []uint64) error {
	var refs []tileRef
	var cols []int
	for i, f := range d.fields {
		if f.Role == arrowconv.Dimension {
			continue
		}
		if !fr.has[f.Name] {
			col, err := d.fillColumn(f, c.n)
			if err != nil {
				return err
			}
			c.cols[i] = col
			continue
		}
		refs = append(refs, tileRef{fr: fr, name: f.Name, t: t, zstd: d.passZstd && i < d.nout && f.SameBytes()})
		cols = append(cols, i)
	}
	// The budget bounds tiles being decoded; a wrapped tile is result
	// memory once loaded, like a copied one, and is released as such.
	err := d.loadInOrder(ctx, c, refs, func(k int, tile *tileio.Tile) error {
		i := cols[k]
		f := d.fields[i]
		if tile.Zstd != nil {
			if tile.Cells != d.g.tileSize || tile.Cells != uint64(c.n) {
				return errkind.Errorf(errkind.DataLoss, "array %s: fragment %s: attribute %q: tile %d holds %d cells, a space tile has %d",
					d.p.Array.Dir, fr.f.Name, f.Name, fr.tileIndex(t), tile.Cells, d.g.tileSize)
			}
			c.cols[i] = colData{zstd: tile.Zstd}
			c.from = fmt.Sprintf("fragment %s: tile %d", fr.f.Name, fr.tileIndex(t))
			return nil
		}
		if err := d.checkTile(fr, f, tile, fr.tileIndex(t)); err != nil {
			return err
		}
		col := colData{data: tile.Data, validity: tile.Validity}
		if f.IsVar() {
			col.offsets = tile.Offsets[:8*tile.Cells]
		}
		c.cols[i] = col
		return nil
	})
	if err != nil {
		return err
	}
	c.wrapped = true
	return d.cutZstd(c)
}

func (d *Reader) fillColumn(f arrowconv.Field, n int) (colData, error) {
	at := d.attrs[f.Name]
	var col colData
	if f.IsVar() {
		col.offsets = make([]byte, 8*n)
		col.data = make([]byte, n*len(at.FillValue))
		for k := 0; k < n; k++ {
			binary.LittleEndian.PutUint64(col.offsets[8*k:], uint64(k*len(at.FillValue)))
		}
		repeat(col.data, at.FillValue)
	} else {
		if len(at.FillValue) != f.CellSize() {
			return col, errkind.Errorf(errkind.DataLoss, "array %s: attribute %q: fill value of %d bytes for %d-byte cells", d.p.Array.Dir, f.Name, len(at.FillValue), f.CellSize())
		}
		col.data = make([]byte, n*f.CellSize())
		repeat(col.data, at.FillValue)
	}
	if f.Nullable {
		col.validity = make([]byte, n)
		if at.FillValid {
			repeat(col.validity, []byte{1})
		}
	}
	return col, nil
}

// repeat fills dst with copies of pat (len(dst) a multiple of len(pat)).
func repeat(dst, pat []byte) {
	if len(pat) == 0 || len(dst) == 0 {
		return
	}
	n := copy(dst, pat)
	for n < len(dst) {
		n += copy(dst[n:], dst[:n])
	}
}

func (d *Reader) buildFixed(ctx context.Context, c *Chunk, l *chunkLayout, regs []region, ci int, f arrowconv.Field) error {
	at := d.attrs[f.Name]
	cs := f.CellSize()
	if len(at.FillValue) != cs {
		return errkind.Errorf(errkind.DataLoss, "array %s: attribute %q: fill value of %d bytes for %d-byte cells", d.p.Array.Dir, f.Name, len(at.FillValue), cs)
	}
	out := make([]byte, c.n*cs)
	var valid []byte
	if f.Nullable {
		valid = make([]byte, c.n)
	}
	fillValid := byte(0)
	if at.FillValid {
		fillValid = 1
	}
	paintFill := func(r *region, lo, hi []uint64) {
		d.walk(l, r, lo, hi, func(dst, _, _, n int) {
			repeat(out[dst*cs:(dst+n)*cs], at.FillValue)
			if valid != nil {
				v := valid[dst : dst+n]
				for k := range v {
					v[k] = fillValid
				}
			}
		})
	}
	// Painting order within a region: the fill value, then fragments
	// oldest first. Tiles load ahead, in parallel, and paint in that order.
	type op struct {
		r    *region
		fr   *frag
		kind int // 0 fill the region, 1 fill the fragment's part, 2 paint its tile
	}
	var ops []op
	var refs []tileRef
	for ri := range regs {
		r := &regs[ri]
		list, fill := d.paintList(r)
		if fill {
			ops = append(ops, op{r, nil, 0})
		}
		for _, fr := range list {
			if !fr.has[f.Name] || r.skip[fr] {
				ops = append(ops, op{r, fr, 1})
				continue
			}
			ops = append(ops, op{r, fr, 2})
			ref := tileRef{fr: fr, name: f.Name, t: r.tile}
			// Painting reads only the cells of the region inside the
			// fragment: a filtered tile may then be decoded only in the
			// chunks holding them (tileio.LoadRange). Not under a filter
			// condition (it evaluates other cells' values) nor for
			// aggregates (they read tiles whole).
			if d.prog == nil && !d.agg {
				if lo, hi, ok := d.cellRange(r, fr, cs); ok {
					ref.lo, ref.hi = lo, hi
				}
			}
			refs = append(refs, ref)
		}
	}
	next := 0
	// untilTile runs the ops before the next tile paint and returns it.
	untilTile := func() *op {
		for next < len(ops) {
			o := &ops[next]
			next++
			switch o.kind {
			case 0:
				paintFill(o.r, nil, nil)
			case 1:
				paintFill(o.r, o.fr.nlo, o.fr.nhi)
			default:
				return o
			}
		}
		return nil
	}
	err := d.loadInOrder(ctx, c, refs, func(_ int, tile *tileio.Tile) error {
		o := untilTile()
		r, fr := o.r, o.fr
		if err := d.checkTile(fr, f, tile, fr.tileIndex(r.tile)); err != nil {
			return err
		}
		src, sv := tile.Data, tile.Validity
		d.walk(l, r, fr.nlo, fr.nhi, func(dst, s, stride, n int) {
			if stride == 1 {
				copy(out[dst*cs:(dst+n)*cs], src[s*cs:(s+n)*cs])
				if valid != nil {
					copy(valid[dst:dst+n], sv[s:s+n])
				}
				return
			}
			copyStrided(out[dst*cs:(dst+n)*cs], src, s, stride, n, cs)
			if valid != nil {
				for k := 0; k < n; k++ {
					valid[dst+k] = sv[s+k*stride]
				}
			}
		})
		return nil
	})
	if err != nil {
		return err
	}
	untilTile()
	c.cols[ci] = colData{data: out, validity: valid}
	return nil
}

// copyStrided copies n cells of cs bytes, src cells s, s+stride, ...
func copyStrided(dst, src []byte, s, stride, n, cs int) {
	switch cs {
	case 8:
		for k := 0; k < n; k++ {
			binary.LittleEndian.PutUint64(dst[8*k:], binary.LittleEndian.Uint64(src[8*(s+k*stride):]))
		}
	case 4:
		for k := 0; k < n; k++ {
			binary.LittleEndian.PutUint32(dst[4*k:], binary.LittleEndian.Uint32(src[4*(s+k*stride):]))
		}
	case 2:
		for k := 0; k < n; k++ {
			binary.LittleEndian.PutUint16(dst[2*k:], binary.LittleEndian.Uint16(src[2*(s+k*stride):]))
		}
	case 1:
		for k := 0; k < n; k++ {
			dst[k] = src[s+k*stride]
		}
	default:
		for k := 0; k < n; k++ {
			p := (s + k*stride) * cs
			copy(dst[k*cs:(k+1)*cs], src[p:p+cs])
		}
	}
}

// buildVar maps every result cell to its source (a fragment tile's cell,
// or the fill value), then copies each source tile's cells out while it is
// loaded, and finally assembles offsets and values in result order.
func (d *Reader) buildVar(ctx context.Context, c *Chunk, l *chunkLayout, regs []region, ci int, f arrowconv.Field) error {
	at := d.attrs[f.Name]
	n := c.n
	srcID := make([]int32, n)
	srcCell := make([]uint32, n)
	for k := range srcID {
		srcID[k] = -1
	}
	type source struct {
		fr   *frag
		tile []uint64
	}
	var sources []source
	for ri := range regs {
		r := &regs[ri]
		list, _ := d.paintList(r)
		for _, fr := range list {
			id := int32(-1)
			if fr.has[f.Name] && !r.skip[fr] {
				id = int32(len(sources))
				sources = append(sources, source{fr, r.tile})
			}
			d.walk(l, r, fr.nlo, fr.nhi, func(dst, s, stride, cnt int) {
				for k := 0; k < cnt; k++ {
					srcID[dst+k] = id
					srcCell[dst+k] = uint32(s + k*stride)
				}
			})
		}
	}
	// Positions of each source's cells, in result order.
	starts := make([]int, len(sources)+1)
	for _, id := range srcID {
		if id >= 0 {
			starts[id+1]++
		}
	}
	for k := 1; k < len(starts); k++ {
		starts[k] += starts[k-1]
	}
	pos := make([]int, starts[len(sources)])
	next := append([]int(nil), starts[:len(sources)]...)
	for p, id := range srcID {
		if id >= 0 {
			pos[next[id]] = p
			next[id]++
		}
	}
	lens := make([]uint64, n)
	var valid []byte
	if f.Nullable {
		valid = make([]byte, n)
	}
	extracts := make([][]byte, len(sources))
	refs := make([]tileRef, len(sources))
	for s, src := range sources {
		refs[s] = tileRef{fr: src.fr, name: f.Name, t: src.tile}
	}
	err := d.loadInOrder(ctx, c, refs, func(s int, tile *tileio.Tile) error {
		src := sources[s]
		if err := d.checkTile(src.fr, f, tile, src.fr.tileIndex(src.tile)); err != nil {
			return err
		}
		var ex []byte
		for _, p := range pos[starts[s]:starts[s+1]] {
			cell := int(srcCell[p])
			a, b := tile.Offset(cell), tile.Offset(cell+1)
			if a > b || b > uint64(len(tile.Data)) {
				return errkind.Errorf(errkind.DataLoss, "array %s: fragment %s: attribute %q: tile %d: cell %d spans [%d, %d) of %d bytes",
					d.p.Array.Dir, src.fr.f.Name, f.Name, src.fr.tileIndex(src.tile), cell, a, b, len(tile.Data))
			}
			lens[p] = b - a
			ex = append(ex, tile.Data[a:b]...)
			if valid != nil {
				valid[p] = tile.Validity[cell]
			}
		}
		extracts[s] = ex
		return nil
	})
	if err != nil {
		return err
	}
	fillValid := byte(0)
	if at.FillValid {
		fillValid = 1
	}
	offs := make([]byte, 8*n)
	total := uint64(0)
	for p, id := range srcID {
		if id < 0 {
			lens[p] = uint64(len(at.FillValue))
			if valid != nil {
				valid[p] = fillValid
			}
		}
		binary.LittleEndian.PutUint64(offs[8*p:], total)
		total += lens[p]
	}
	data := make([]byte, total)
	cursor := make([]uint64, len(sources))
	o := uint64(0)
	for p, id := range srcID {
		if id < 0 {
			copy(data[o:], at.FillValue)
		} else {
			copy(data[o:o+lens[p]], extracts[id][cursor[id]:])
			cursor[id] += lens[p]
		}
		o += lens[p]
	}
	c.cols[ci] = colData{data: data, offsets: offs, validity: valid}
	return nil
}

// dimColumn writes the coordinates of dimension field f for every cell of
// the chunk: each coordinate repeats rs times, and the block of all the
// dimension's coordinates repeats to fill the chunk.
func (d *Reader) dimColumn(c *Chunk, l *chunkLayout, ci int, f arrowconv.Field) []byte {
	dim := d.p.Array.Schema.DimensionIndex(f.Name)
	sz := d.g.typ.Size()
	out := make([]byte, c.n*sz)
	if c.n == 0 {
		return out
	}
	rs := l.rs[dim]
	block := out[:rs*l.cnt[dim]*sz]
	o := 0
	if rs == 1 {
		// The innermost dimension (a 1-D array's only one): every cell a
		// new coordinate. A typed loop per run, not a copy call per cell:
		// this column is as long as the result and was a fifth of the
		// daemon's CPU on a whole 1-D DoGet.
		for _, p := range c.dims[dim] {
			o = putIota(block, o, sz, d.g.lo[dim]+p.off, p.n)
		}
	} else {
		var one [8]byte
		for _, p := range c.dims[dim] {
			for k := uint64(0); k < p.n; k++ {
				binary.LittleEndian.PutUint64(one[:], d.g.lo[dim]+p.off+k)
				repeat(block[o:o+rs*sz], one[:sz])
				o += rs * sz
			}
		}
	}
	repeat(out, block)
	return out
}

// putIota writes n consecutive sz-byte little-endian integers from first
// into b at byte offset o, and returns the offset after them. Values wrap
// to sz bytes, which is two's complement for signed dimension types.
func putIota(b []byte, o, sz int, first, n uint64) int {
	switch sz {
	case 8:
		dst := b[o : o+int(n)*8]
		for k := 0; k+8 <= len(dst); k += 8 {
			binary.LittleEndian.PutUint64(dst[k:], first)
			first++
		}
	case 4:
		dst := b[o : o+int(n)*4]
		for k := 0; k+4 <= len(dst); k += 4 {
			binary.LittleEndian.PutUint32(dst[k:], uint32(first))
			first++
		}
	case 2:
		dst := b[o : o+int(n)*2]
		for k := 0; k+2 <= len(dst); k += 2 {
			binary.LittleEndian.PutUint16(dst[k:], uint16(first))
			first++
		}
	default:
		dst := b[o : o+int(n)]
		for k := range dst {
			dst[k] = byte(first)
			first++
		}
	}
	return o + int(n)*sz
}

func le64(b []byte) uint64 { return binary.LittleEndian.Uint64(b) }

// allFail says whether fail marks every cell (nil: none marked).
func allFail(fail []bool) bool {
	if fail == nil {
		return false
	}
	for _, f := range fail {
		if !f {
			return false
		}
	}
	return true
}
