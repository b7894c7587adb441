package sparse

import (
	"context"
	"encoding/binary"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/tileflight/tileflight/arrowconv"
	"github.com/tileflight/tileflight/format/hilbert"
	"github.com/tileflight/tileflight/format/schema"
	"github.com/tileflight/tileflight/internal/bufpool"
	"github.com/tileflight/tileflight/reader/tileio"
	"github.com/tileflight/tileflight/tdbarray"
)

// ltile is one loaded tile of one fragment: the fields the read needs,
// and which of its cells are in the result.
type ltile struct {
	job  *tileJob
	frag *fragState
	n    int

	dims []*tileio.Tile // per dimension (nil when not loaded)
	cols []arrowconv.Tile
	ts   []byte // per-cell timestamps (little-endian uint64), or nil

	// all: every cell is selected (sel is nil); else sel lists the
	// selected cells in stored order.
	all  bool
	sel  []uint32
	mult []uint8  // row/col-major multiplicity per selected cell (nil: 1)
	del  []bool   // per cell: removed after deduplication (nil: none)
	hv   []uint64 // per cell Hilbert value (global merges of Hilbert arrays)

	held []*tileio.Tile
	refs atomic.Int32
	// owners holds, per output column, the pooled buffer its data lies
	// in (nil: garbage collected), for tiles loaded by a pooled
	// prefetcher. The tile's own references go back at release; a batch
	// referencing its cells retains them until built (batcher.add).
	owners []*bufpool.Buf
}

func (t *ltile) count() int {
	if t.all {
		return t.n
	}
	return len(t.sel)
}

func (t *ltile) pos(k int) int {
	if t.all {
		return k
	}
	return int(t.sel[k])
}

func (t *ltile) multAt(k int) int {
	if t.mult == nil {
		return 1
	}
	return int(t.mult[k])
}

func (t *ltile) release() {
	if t == nil {
		return
	}
	if t.refs.Add(-1) == 0 {
		for _, h := range t.held {
			h.Release()
			h.Recycle()
		}
		t.held = nil
	}
}

func (t *ltile) coord(d, i int) []byte {
	tl := t.dims[d]
	if tl.Offsets != nil {
		return tl.Data[tl.Offset(i):tl.Offset(i+1)]
	}
	s := len(tl.Data) / t.n
	return tl.Data[i*s : (i+1)*s]
}

func (t *ltile) timestamp(i int) uint64 {
	if t.ts == nil {
		return t.frag.start
	}
	return binary.LittleEndian.Uint64(t.ts[8*i:])
}

// load fetches and filters one tile. It returns nil when no cell of the
// tile is in the result. Its field tiles wait for room in the budget
// until need is closed (tileio.LoadWhen); pooled loads their data into
// recycled buffers (tileio.LoadPooled), for sources whose batches read a
// tile's cells only through the batcher.
func (r *Reader) load(ctx context.Context, j *tileJob, need <-chan struct{}, pooled bool) (lt *ltile, err error) {
	fs := j.frag
	f := fs.f
	n := int(j.cells)
	lt = &ltile{job: j, frag: fs, n: n, all: true}
	lt.refs.Store(1)
	defer func() {
		if err != nil || lt == nil {
			if lt != nil {
				lt.release()
			}
			lt = nil
		}
	}()
	loaded := map[string]*tileio.Tile{}
	var mu sync.Mutex
	loadOne := func(name string) (*tileio.Tile, error) {
		loadFn := r.loader.LoadWhen
		if pooled {
			loadFn = r.loader.LoadPooled
		}
		t, err := loadFn(ctx, f, name, j.tile, need)
		if err != nil {
			return nil, fmt.Errorf("array %s: %w", r.arr.Dir, err)
		}
		mu.Lock()
		lt.held = append(lt.held, t)
		mu.Unlock()
		if t.Cells != j.cells {
			return nil, dataLoss(fmt.Errorf("array %s: fragment %s: field %q: tile %d has %d cells, metadata says %d", r.arr.Dir, f.Name, name, j.tile, t.Cells, j.cells))
		}
		if t.Offsets != nil && len(t.Offsets) != 8*(n+1) {
			return nil, dataLoss(fmt.Errorf("array %s: fragment %s: field %q: tile %d: %d offset bytes for %d cells", r.arr.Dir, f.Name, name, j.tile, len(t.Offsets), n))
		}
		return t, nil
	}
	// prefetch loads fields in parallel: the tiles of one fragment tile
	// unfilter concurrently. Holding some fields while waiting for others
	// cannot stall the read: the tile the consumer waits for is needed, and
	// needed loads never wait for the budget.
	prefetch := func(names ...string) error {
		var todo []string
		for _, nm := range names {
			if _, ok := loaded[nm]; !ok && !slices.Contains(todo, nm) {
				todo = append(todo, nm)
			}
		}
		if len(todo) == 0 {
			return nil
		}
		tiles := make([]*tileio.Tile, len(todo))
		errs := make([]error, len(todo))
		var wg sync.WaitGroup
		for k := range todo {
			wg.Add(1)
			go func(k int) {
				defer wg.Done()
				tiles[k], errs[k] = loadOne(todo[k])
			}(k)
		}
		wg.Wait()
		for k, nm := range todo {
			if errs[k] != nil {
				return errs[k]
			}
			loaded[nm] = tiles[k]
		}
		return nil
	}
	get := func(name string) (*tileio.Tile, error) {
		if err := prefetch(name); err != nil {
			return nil, err
		}
		return loaded[name], nil
	}

	needDims := !j.all || r.sorted || r.dedup || r.merging || r.hilbert
	for _, c := range r.colDim {
		needDims = needDims || c >= 0
	}
	for _, cu := range fs.conds {
		for _, name := range cu.c.fields {
			needDims = needDims || f.Schema.DimensionIndex(name) >= 0
		}
	}
	if r.prog != nil {
		for _, cf := range r.prog.Cond().Fields {
			needDims = needDims || cf.Dim
		}
	}
	needTS := fs.hasTS && (fs.partialTime || r.dedup)
	for _, cu := range fs.conds {
		needTS = needTS || cu.timestamped
	}
	var first []string
	if needDims {
		for _, di := range r.dims {
			first = append(first, di.name)
		}
	}
	if needTS {
		first = append(first, tileio.FieldTimestamps)
	}
	if fs.hasDelMeta {
		first = append(first, tileio.FieldDeleteTimestamp)
	}
	if j.all && len(fs.conds) == 0 && r.prog == nil {
		// Every cell is in: load the output columns along.
		first = append(first, r.attrCols(f)...)
	}
	if err := prefetch(first...); err != nil {
		return nil, err
	}
	if needDims {
		lt.dims = make([]*tileio.Tile, len(r.dims))
		for d, di := range r.dims {
			t, err := get(di.name)
			if err != nil {
				return nil, err
			}
			if !di.isVar && len(t.Data) != n*di.size {
				return nil, dataLoss(fmt.Errorf("array %s: fragment %s: dimension %q: tile %d: %d bytes for %d cells", r.arr.Dir, f.Name, di.name, j.tile, len(t.Data), n))
			}
			lt.dims[d] = t
		}
	}

	// Cells inside the subarray, with how many range combinations hold
	// each (row/col-major results repeat a cell once per combination).
	var cnt []uint8
	if !j.all {
		cnt = make([]uint8, n)
		for i := range cnt {
			cnt[i] = 1
		}
		for d, di := range r.dims {
			if j.covered[d] {
				continue
			}
			r.filterDim(lt, d, di, cnt)
		}
	}

	if needTS {
		t, err := get(tileio.FieldTimestamps)
		if err != nil {
			return nil, err
		}
		if len(t.Data) != 8*n {
			return nil, dataLoss(fmt.Errorf("array %s: fragment %s: tile %d: %d timestamp bytes for %d cells", r.arr.Dir, f.Name, j.tile, len(t.Data), n))
		}
		lt.ts = t.Data
		if fs.partialTime {
			if cnt == nil {
				cnt = ones(n)
			}
			for i := 0; i < n; i++ {
				if ts := lt.timestamp(i); ts < r.arr.Start || ts > r.arr.End {
					cnt[i] = 0
				}
			}
		}
	}

	// Removals that apply after deduplication: a deleted cell still hides
	// older versions of itself.
	var del []bool
	if fs.hasDelMeta {
		t, err := get(tileio.FieldDeleteTimestamp)
		if err != nil {
			return nil, err
		}
		if len(t.Data) != 8*n {
			return nil, dataLoss(fmt.Errorf("array %s: fragment %s: tile %d: %d delete timestamp bytes for %d cells", r.arr.Dir, f.Name, j.tile, len(t.Data), n))
		}
		for i := 0; i < n; i++ {
			if r.deletedAt(binary.LittleEndian.Uint64(t.Data[8*i:])) {
				if del == nil {
					del = make([]bool, n)
				}
				del[i] = true
			}
		}
	}
	if len(fs.conds) > 0 {
		var names []string
		for _, cu := range fs.conds {
			for _, name := range cu.c.fields {
				if f.Schema.AttributeIndex(name) >= 0 {
					names = append(names, name)
				}
			}
		}
		if err := prefetch(names...); err != nil {
			return nil, err
		}
		fields := map[string]*condField{}
		for _, cu := range fs.conds {
			for _, name := range cu.c.fields {
				if _, ok := fields[name]; ok {
					continue
				}
				cf := &condField{}
				if d := f.Schema.DimensionIndex(name); d >= 0 {
					dd := &f.Schema.Dimensions[d]
					cf.typ, cf.isVar, cf.size, cf.tile = dd.Type, dd.IsVar(), dd.Type.Size()*int(max(dd.CellValNum, 1)), lt.dims[d]
				} else if a := f.Schema.AttributeIndex(name); a >= 0 {
					at := &f.Schema.Attributes[a]
					cf.typ, cf.isVar, cf.nullable = at.Type, at.IsVar(), at.Nullable
					if !cf.isVar {
						cf.size = int(at.CellSize())
					}
					t, err := get(name)
					if err != nil {
						return nil, err
					}
					if !cf.isVar && len(t.Data) != n*cf.size || cf.nullable && t.Validity != nil && len(t.Validity) != n {
						return nil, dataLoss(fmt.Errorf("array %s: fragment %s: field %q: tile %d: buffers do not match %d cells", r.arr.Dir, f.Name, name, j.tile, n))
					}
					cf.tile = t
				}
				if cf.isVar {
					cf.size = 0
				}
				fields[name] = cf
			}
		}
		for i := 0; i < n; i++ {
			if cnt != nil && cnt[i] == 0 || del != nil && del[i] {
				continue
			}
			for _, cu := range fs.conds {
				keep := cu.timestamped && lt.timestamp(i) > cu.c.ts || evalKeep(cu.c.keep, fields, i)
				if !keep {
					if del == nil {
						del = make([]bool, n)
					}
					del[i] = true
					break
				}
			}
		}
	}
	if r.prog != nil {
		var err error
		if del, err = r.applyFilter(lt, cnt, del, get); err != nil {
			return nil, err
		}
	}
	if del != nil && !r.dedup {
		if cnt == nil {
			cnt = ones(n)
		}
		for i, d := range del {
			if d {
				cnt[i] = 0
			}
		}
		del = nil
	}
	if cnt != nil {
		lt.all = false
		multi := false
		for i, c := range cnt {
			if c > 0 {
				lt.sel = append(lt.sel, uint32(i))
				multi = multi || c > 1
			}
		}
		if multi && r.sorted {
			lt.mult = make([]uint8, len(lt.sel))
			for k, p := range lt.sel {
				lt.mult[k] = cnt[p]
			}
		}
		if len(lt.sel) == 0 {
			return nil, nil
		}
	}
	lt.del = del

	if err := prefetch(r.attrCols(f)...); err != nil {
		return nil, err
	}
	lt.cols = make([]arrowconv.Tile, len(r.fields))
	if pooled {
		lt.owners = make([]*bufpool.Buf, len(r.fields))
	}
	for c, fd := range r.fields {
		if d := r.colDim[c]; d >= 0 {
			lt.cols[c] = asArrowTile(lt.dims[d], n)
			if pooled {
				lt.owners[c] = lt.dims[d].Owner()
			}
			continue
		}
		if !tileio.HasField(f, fd.Name) {
			ft, err := r.fillTile(c, n)
			if err != nil {
				return nil, err
			}
			lt.cols[c] = ft
			continue
		}
		t, err := get(fd.Name)
		if err != nil {
			return nil, err
		}
		lt.cols[c] = asArrowTile(t, n)
		if pooled {
			lt.owners[c] = t.Owner()
		}
	}
	if r.hilbert && (r.dedup || r.plan.Layout != "unordered") {
		lt.hv = make([]uint64, n)
		x := make([]uint64, len(r.dims))
		for k := 0; k < lt.count(); k++ {
			i := lt.pos(k)
			for d, di := range r.dims {
				x[d] = di.hilbertCoord(lt.coord(d, i), r.hbits, r.hmax)
			}
			lt.hv[i] = hilbert.Value(x, r.hbits)
		}
	}
	return lt, nil
}

// attrCols lists the output attributes the fragment stores.
func (r *Reader) attrCols(f *tdbarray.Fragment) []string {
	var out []string
	for c, fd := range r.fields {
		if r.colDim[c] < 0 && tileio.HasField(f, fd.Name) {
			out = append(out, fd.Name)
		}
	}
	return out
}

func ones(n int) []uint8 {
	c := make([]uint8, n)
	for i := range c {
		c[i] = 1
	}
	return c
}

func asArrowTile(t *tileio.Tile, n int) arrowconv.Tile {
	at := arrowconv.Tile{Data: t.Data, Validity: t.Validity, N: n}
	if t.Offsets != nil {
		at.Offsets = t.Offsets[:8*n]
	}
	return at
}

// filterDim multiplies cnt by the number of the dimension's ranges that
// hold each cell's coordinate.
func (r *Reader) filterDim(lt *ltile, d int, di *dimInfo, cnt []uint8) {
	t := lt.dims[d]
	n := lt.n
	if len(di.ranges) == 1 {
		switch {
		case di.kind == kindSigned && di.size == 8:
			lo, hi := di.ilo[0], di.ihi[0]
			for i := 0; i < n; i++ {
				v := int64(binary.LittleEndian.Uint64(t.Data[8*i:]))
				if v < lo || v > hi {
					cnt[i] = 0
				}
			}
			return
		case di.kind == kindFloat && di.size == 8:
			lo, hi := di.flo[0], di.fhi[0]
			for i := 0; i < n; i++ {
				v := di.float(t.Data[8*i:])
				if !(lo <= v && v <= hi) {
					cnt[i] = 0
				}
			}
			return
		}
	}
	for i := 0; i < n; i++ {
		if cnt[i] == 0 {
			continue
		}
		k := di.rangeCount(lt.coord(d, i))
		if k == 0 {
			cnt[i] = 0
			continue
		}
		cnt[i] = uint8(min(int(cnt[i])*k, 255))
	}
}

// fillTile is n cells of the fill value of output column c, for fragments
// written before the attribute existed.
func (r *Reader) fillTile(c, n int) (arrowconv.Tile, error) {
	t, err := FillTile(r.arr.Schema, r.fields[c], n)
	if err != nil {
		return arrowconv.Tile{}, fmt.Errorf("array %s: %w", r.arr.Dir, err)
	}
	return t, nil
}

// FillTile is the tile of n cells a fragment written before a schema
// evolution added attribute fd contributes, as TileDB's readers fill it
// (and so its fragment consolidation writes it): the fill value of the
// attribute in s, the schema the array is open at, each cell valid unless
// the attribute is nullable with an invalid fill (the default: null).
func FillTile(s *schema.ArraySchema, fd arrowconv.Field, n int) (arrowconv.Tile, error) {
	ai := s.AttributeIndex(fd.Name)
	if ai < 0 {
		return arrowconv.Tile{}, fmt.Errorf("no attribute %q", fd.Name)
	}
	at := &s.Attributes[ai]
	return arrowconv.FillTile(fd, at.FillValue, !at.Nullable || at.FillValid, n)
}

// prefetcher loads the tiles of a job list in order, up to depth ahead of
// the consumer, in the background (each tile's fields in parallel). Tiles
// ahead of the consumer wait for room in the budget; the one it waits for
// is needed (its need channel is closed) and is loaded regardless. A
// pooled prefetcher's tiles have their data in recycled buffers (see
// Reader.load).
type prefetcher struct {
	r      *Reader
	pooled bool
	jobs   []*tileJob
	res    []chan loadResult
	need   []chan struct{}
	next   int
	slots  chan struct{}
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

type loadResult struct {
	lt  *ltile
	err error
}

func newPrefetcher(r *Reader, jobs []*tileJob, depth int, pooled bool) *prefetcher {
	ctx, cancel := context.WithCancel(r.bg)
	p := &prefetcher{r: r, pooled: pooled, jobs: jobs, res: make([]chan loadResult, len(jobs)), need: make([]chan struct{}, len(jobs)),
		slots: make(chan struct{}, max(depth, 1)), ctx: ctx, cancel: cancel}
	for i := range p.res {
		p.res[i] = make(chan loadResult, 1)
		p.need[i] = make(chan struct{})
	}
	p.wg.Add(1)
	go p.dispatch()
	return p
}

func (p *prefetcher) dispatch() {
	defer p.wg.Done()
	for i, j := range p.jobs {
		select {
		case p.slots <- struct{}{}:
		case <-p.ctx.Done():
			return
		}
		lt, err := p.r.load(p.ctx, j, p.need[i], p.pooled)
		p.res[i] <- loadResult{lt, err}
	}
}

// get returns the next tile with selected cells, or nil at the end.
func (p *prefetcher) get(ctx context.Context) (*ltile, error) {
	for p.next < len(p.jobs) {
		close(p.need[p.next])
		var res loadResult
		select {
		case res = <-p.res[p.next]:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		p.res[p.next] = nil
		p.next++
		<-p.slots
		if res.err != nil {
			return nil, res.err
		}
		if res.lt != nil {
			return res.lt, nil
		}
	}
	return nil, nil
}

// close stops loading and releases what was loaded and not consumed.
func (p *prefetcher) close() {
	p.cancel()
	p.wg.Wait()
	for i := p.next; i < len(p.res); i++ {
		select {
		case res := <-p.res[i]:
			res.lt.release()
		default:
		}
	}
	p.next = len(p.jobs)
}
