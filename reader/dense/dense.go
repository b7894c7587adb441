// Package dense owns the read path of dense arrays: space tile math, the
// chunks a subarray is cut into and built in parallel ahead of the
// consumer, newest-fragment-wins painting with fill values, every layout,
// zero-copy batches of whole tiles (and, with base.Options.ZstdPassThrough,
// batches still in their tiles' zstd frames), and the dense semantics of
// a filter (failing cells come back as fill values, or are dropped) with
// tiles pruned by their statistics. Package reader hands dense plans to
// NewReader; package reader/agg feeds aggregates from NewAggReader's
// chunks. It imports reader/base, reader/plan, reader/eval, reader/tileio
// and reader/sparse (tile statistics), never package reader or
// reader/agg.
package dense

import (
	"context"
	"fmt"
	"io"
	"math/bits"
	"slices"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/apache/arrow-go/v18/arrow"
	arrowarray "github.com/apache/arrow-go/v18/arrow/array"

	"github.com/tileflight/tileflight/arrowconv"
	"github.com/tileflight/tileflight/errkind"
	"github.com/tileflight/tileflight/filters"
	"github.com/tileflight/tileflight/format/datatype"
	"github.com/tileflight/tileflight/format/schema"
	"github.com/tileflight/tileflight/query"
	"github.com/tileflight/tileflight/reader/base"
	"github.com/tileflight/tileflight/reader/eval"
	"github.com/tileflight/tileflight/reader/plan"
	"github.com/tileflight/tileflight/reader/tileio"
	"github.com/tileflight/tileflight/tdbarray"
)

// Dense reads work in chunks: a chunk is a run of consecutive result cells
// that is itself a cross product of per-dimension coordinate pieces, so
// that its cells can be painted from tiles with strided copies. In
// row-major (col-major) layout a chunk is a run of coordinates of the
// first (last) dimension, crossed with every other dimension's ranges; in
// global layout a chunk is the part of one space tile inside the subarray.
// Chunks are built in parallel by a worker pool, ahead of the consumer,
// and emitted in order as record batches.

// piece is a run of n consecutive coordinates of one dimension, starting
// at offset off from the domain's low bound.
type piece struct{ off, n uint64 }

// geom is the space tiling of a dense array.
type geom struct {
	nd       int
	typ      datatype.Datatype
	lo       []uint64 // domain low bound, sign-extended
	ext      []uint64 // tile extents
	tileRow  bool
	cellRow  bool
	cellStr  []uint64 // stride of each dimension's in-tile offset in a tile
	tileSize uint64   // cells per tile
}

func newGeom(s *schema.ArraySchema) (*geom, error) {
	g := &geom{nd: len(s.Dimensions), tileRow: s.TileOrder != schema.ColMajor, cellRow: s.CellOrder != schema.ColMajor}
	for i := range s.Dimensions {
		d := &s.Dimensions[i]
		if !d.Type.IsInteger() && !d.Type.IsDatetime() && !d.Type.IsTime() {
			return nil, errkind.Errorf(errkind.Unimplemented, "dense dimension %q of type %s", d.Name, d.Type)
		}
		g.typ = d.Type
		e, ok := d.TileExtentUint64()
		lo := d.Lo()
		if !ok || e == 0 || lo == nil {
			return nil, errkind.Errorf(errkind.DataLoss, "dense dimension %q has no tile extent or domain", d.Name)
		}
		g.lo = append(g.lo, schema.AsUint64(d.Type, lo))
		g.ext = append(g.ext, e)
	}
	g.cellStr = make([]uint64, g.nd)
	g.tileSize = 1
	for k := 0; k < g.nd; k++ {
		d := k
		if g.cellRow {
			d = g.nd - 1 - k
		}
		g.cellStr[d] = g.tileSize
		if g.ext[d] != 0 && g.tileSize > (1<<40)/g.ext[d] {
			return nil, errkind.Errorf(errkind.Unimplemented, "space tiles of more than 2^40 cells")
		}
		g.tileSize *= g.ext[d]
	}
	return g, nil
}

// offset converts a dimension value to its offset from the domain's low
// bound.
func (g *geom) offset(d int, b []byte) uint64 { return schema.AsUint64(g.typ, b) - g.lo[d] }

// frag is a fragment as the dense path uses it.
type frag struct {
	f        *tdbarray.Fragment
	nlo, nhi []uint64 // non-empty domain, as offsets
	tlo      []uint64 // first tile index per dimension
	tcount   []uint64 // tiles per dimension
	tileRow  bool
	tiles    uint64 // tiles of the fragment
	has      map[string]bool
}

func newFrag(g *geom, cur *schema.ArraySchema, f *tdbarray.Fragment) (*frag, bool, error) {
	ned := f.NonEmptyDomain()
	if len(ned) != g.nd {
		return nil, false, nil
	}
	fr := &frag{f: f, tileRow: f.Schema.TileOrder != schema.ColMajor, has: map[string]bool{}}
	total := uint64(1)
	for d, r := range ned {
		size := g.typ.Size()
		if len(r.Start) != size || len(r.End) != size {
			return nil, false, errkind.Errorf(errkind.DataLoss, "fragment %s: non-empty domain of dimension %d has the wrong size", f.Name, d)
		}
		lo, hi := g.offset(d, r.Start), g.offset(d, r.End)
		if lo > hi {
			return nil, false, errkind.Errorf(errkind.DataLoss, "fragment %s: non-empty domain of dimension %d is inverted", f.Name, d)
		}
		fr.nlo, fr.nhi = append(fr.nlo, lo), append(fr.nhi, hi)
		t0, t1 := lo/g.ext[d], hi/g.ext[d]
		fr.tlo, fr.tcount = append(fr.tlo, t0), append(fr.tcount, t1-t0+1)
		total *= t1 - t0 + 1
	}
	fr.tiles = total
	n, err := f.Meta.TileNum()
	if err != nil {
		return nil, false, errkind.Wrap(errkind.DataLoss, fmt.Errorf("fragment %s: %w", f.Name, err))
	}
	if n != total {
		return nil, false, errkind.Errorf(errkind.DataLoss, "fragment %s: %d tiles, its non-empty domain covers %d", f.Name, n, total)
	}
	for _, at := range cur.Attributes {
		i := f.Schema.AttributeIndex(at.Name)
		if i < 0 {
			continue
		}
		fa := &f.Schema.Attributes[i]
		fr.has[at.Name] = fa.Type == at.Type && fa.CellValNum == at.CellValNum && fa.Nullable == at.Nullable
	}
	return fr, true, nil
}

// tileIndex is the fragment tile holding space tile t (t inside the
// fragment's tile range).
func (fr *frag) tileIndex(t []uint64) uint64 {
	idx := uint64(0)
	n := len(t)
	for k := 0; k < n; k++ {
		d := k
		if !fr.tileRow {
			d = n - 1 - k
		}
		idx = idx*fr.tcount[d] + (t[d] - fr.tlo[d])
	}
	return idx
}

// Chunk is one unit of work. An aggregate read (NewAggReader) sees the
// built chunks through NextChunk and the accessors below.
type Chunk struct {
	dims   [][]piece
	rowMaj bool // result order of the chunk's cross product
	// full is set when the chunk is exactly one whole space tile in the
	// tile's own cell order (the zero-copy candidate).
	full bool
	// wrapped is set once build made the tile buffers the columns.
	wrapped bool
	// cuts (a wrapped chunk with compressed columns) are the cells at
	// which every compressed column has a chunk boundary, ascending, the
	// last being n: the ends a batch of it may have.
	cuts []int
	// from names the fragment and tile of a wrapped chunk, for errors.
	from string

	n    int
	cols []colData
	// pass (aggregates with a filter) marks the cells that pass; written
	// (aggregates) the cells some fragment wrote; nil: all.
	pass    []bool
	written []bool
	// fail (filtered reads) marks the cells whose newest writer is a tile
	// pruneTiles skipped: they fail the filter without being evaluated.
	fail []bool
	// answered: the aggregates took the chunk from tile statistics; it
	// has no columns.
	answered bool
	// charge is what the chunk's columns hold of the budget (Reader.hold).
	charge int64
	err    error
	done   chan struct{}
	// need is closed when the consumer waits for the chunk: its tiles are
	// then loaded without waiting for room in the budget, so the chunk
	// everything else waits for always completes.
	need chan struct{}
}

// colData is one column of a built chunk in NewColumn's conventions, or
// (zstd set, data nil) the tile's chunks still compressed.
type colData struct {
	data, offsets, validity []byte
	zstd                    []filters.ZstdChunk
	zstdEnds                []int // the cell after each of zstd's chunks (cutZstd)
}

// N is the number of cells of a built chunk.
func (c *Chunk) N() int { return c.n }

// Column is column i (in the order of the fields the read was started
// with) of a built chunk in arrowconv.NewColumn's conventions: fixed-size
// cells back to back, or var-sized cells by their start offsets (uint64,
// the last cell ending at len(data)); validity is nil when the field is
// not nullable.
func (c *Chunk) Column(i int) (data, offsets, validity []byte) {
	col := &c.cols[i]
	return col.data, col.offsets, col.validity
}

// Pass marks the cells that pass the filter (nil: all).
func (c *Chunk) Pass() []bool { return c.pass }

// Written marks the cells some fragment wrote (nil: all).
func (c *Chunk) Written() []bool { return c.written }

// Answered tells that the aggregates took the chunk from tile statistics
// (NewAggReader's stats): it has no columns.
func (c *Chunk) Answered() bool { return c.answered }

// Reader streams the result of one dense read. It is not safe for
// concurrent use.
type Reader struct {
	p      *plan.Plan
	g      *geom
	frags  []*frag // oldest first
	fields []arrowconv.Field
	schema *arrow.Schema
	loader *tileio.Loader
	attrs  map[string]*schema.Attribute
	opt    base.Options

	chunkCells uint64
	rowBytes   uint64 // what a chunk's cell is charged (all its columns)
	dimBytes   uint64 // the same, of its dimension columns alone
	window     int    // tiles one chunk loads at once
	// held is what the chunks built and not yet passed hold of the
	// budget (Loader.Hold); last is the chunk NextChunk returned last.
	held atomic.Int64
	last *Chunk

	bg      context.Context
	cancel  context.CancelFunc
	ordered chan *Chunk
	wg      sync.WaitGroup

	cur      *Chunk
	pos      int
	emitted  int64
	builders []*arrowconv.ColumnBuilder
	done     bool

	// noGlobal: the subarray crosses too many space tiles to be planned
	// in global order (see tileParts).
	noGlobal bool
	// nout is the number of output columns: fields beyond them are the
	// attributes only the filter reads.
	nout int
	// prog is the query's filter (nil: none).
	prog *eval.Program
	// agg: the chunks feed aggregates: failing cells are marked in
	// chunk.pass instead of being overwritten, and unwritten cells in
	// chunk.written.
	agg bool
	// passZstd: wrapped tiles of SameBytes attributes are loaded
	// compressed when they can be (Options.ZstdPassThrough).
	passZstd bool
	// stats, when set (aggregates without a filter), may answer a whole
	// space tile that one fragment wrote from its tile statistics (see
	// sparse.Input.Stats); the chunk is then marked answered.
	stats func(f *tdbarray.Fragment, tile, cells uint64) (bool, error)
}

// NewReader starts reading the dense plan p: fields are the Arrow-facing
// fields of p.Columns, sch their schema, loader the opened array's.
func NewReader(ctx context.Context, p *plan.Plan, fields []arrowconv.Field, sch *arrow.Schema, loader *tileio.Loader, opt base.Options) (*Reader, error) {
	return newReader(ctx, p, fields, sch, loader, opt, false, nil)
}

// NewAggReader starts a dense read whose chunks feed aggregates (read
// them with NextChunk): cells failing the filter are marked in
// Chunk.Pass instead of being overwritten, unwritten cells in
// Chunk.Written, and stats, when set, may answer a whole space tile that
// one fragment wrote from its tile statistics (see sparse.Input.Stats).
func NewAggReader(ctx context.Context, p *plan.Plan, fields []arrowconv.Field, sch *arrow.Schema, loader *tileio.Loader, opt base.Options,
	stats func(*tdbarray.Fragment, uint64, uint64) (bool, error)) (*Reader, error) {
	return newReader(ctx, p, fields, sch, loader, opt, true, stats)
}

func newReader(ctx context.Context, p *plan.Plan, fields []arrowconv.Field, sch *arrow.Schema, loader *tileio.Loader, opt base.Options, agg bool,
	stats func(*tdbarray.Fragment, uint64, uint64) (bool, error)) (*Reader, error) {
	s := p.Array.Schema
	g, err := newGeom(s)
	if err != nil {
		return nil, fmt.Errorf("array %s: %w", p.Array.Dir, err)
	}
	if n, ok := plan.EstimateRows(&plan.Plan{Array: p.Array, Subarray: p.Subarray, Limit: -1, Empty: p.Empty}); !ok || n < 0 {
		return nil, errkind.Errorf(errkind.InvalidArgument, "array %s: the subarray has more than 2^63 cells", p.Array.Dir)
	}
	d := &Reader{p: p, g: g, fields: fields, schema: sch, loader: loader, opt: opt, attrs: map[string]*schema.Attribute{}, nout: len(fields), agg: agg, stats: stats}
	for i := range s.Attributes {
		d.attrs[s.Attributes[i].Name] = &s.Attributes[i]
	}
	d.passZstd = opt.ZstdPassThrough && !agg && p.Cond == nil && p.Limit < 0
	if p.Cond != nil {
		d.prog = eval.New(p.Cond)
		d.fields = append([]arrowconv.Field(nil), fields...)
		for _, cf := range p.Cond.Fields {
			if slices.ContainsFunc(d.fields, func(f arrowconv.Field) bool { return f.Name == cf.Name }) {
				continue
			}
			f, err := base.FieldFor(s, cf.Name)
			if err != nil {
				return nil, fmt.Errorf("array %s: filter: %w", p.Array.Dir, err)
			}
			d.fields = append(d.fields, f)
		}
		fields = d.fields
	}
	for _, f := range p.Array.Fragments {
		fr, ok, err := newFrag(g, s, f)
		if err != nil {
			return nil, fmt.Errorf("array %s: %w", p.Array.Dir, err)
		}
		if ok {
			d.frags = append(d.frags, fr)
		}
	}
	rowBytes := uint64(1)
	dimBytes := uint64(0)
	for _, f := range fields {
		if f.Role == arrowconv.Dimension && !f.IsVar() {
			dimBytes += uint64(f.CellSize())
		}
		if f.IsVar() {
			rowBytes += 16
		} else {
			rowBytes += uint64(f.CellSize())
		}
		if f.Nullable {
			rowBytes++
		}
	}
	target := uint64(opt.MemoryBudget) / uint64(2*(opt.Workers+2))
	target = max(256<<10, min(target, 64<<20))
	d.chunkCells = max(1, target/rowBytes)
	d.rowBytes, d.dimBytes = rowBytes, dimBytes
	for _, f := range fields[:d.nout] {
		d.builders = append(d.builders, arrowconv.NewColumnBuilder(f))
	}
	// A chunk loads up to window tiles at once, and the chunk the consumer
	// waits for loads them even beyond the budget: window tiles are its
	// working set, which must stay within the loader's limit.
	tileBytes := int64(0)
	for _, f := range fields {
		if f.Role == arrowconv.Dimension || f.IsVar() {
			continue
		}
		b := int64(g.tileSize) * int64(f.CellSize())
		if f.Nullable {
			b += int64(g.tileSize)
		}
		tileBytes = max(tileBytes, b)
	}
	if err := loader.CheckWorkingSet(tileBytes, "one space tile"); err != nil {
		return nil, err
	}
	d.window = max(1, opt.Workers)
	if tileBytes > 0 {
		d.window = int(max(1, min(int64(d.window), loader.MaxWorkingSet()/tileBytes)))
	}
	// The global order is planned per dimension by space tile (tileSplit):
	// a part per range and tile it crosses. When they are too many for the
	// budget, a row-major read (or aggregates, whose order is free) takes
	// the ordered path, which plans as it goes; a global read is refused.
	if n, most := tileParts(d.slices(), g.ext), max(1<<16, opt.MemoryBudget/128); n > uint64(most) {
		d.noGlobal = true
		if p.Layout != query.LayoutRowMajor && p.Layout != query.LayoutColMajor && !agg {
			return nil, errkind.Errorf(errkind.ResourceExhausted,
				"array %s: the subarray's ranges cross %d space tiles, more than the %d a read in global layout may plan with a memory budget of %d: merge the ranges, raise -memory-budget, or read in row-major layout",
				p.Array.Dir, n, most, opt.MemoryBudget)
		}
	}
	d.bg, d.cancel = context.WithCancel(ctx)
	ahead := opt.Workers + 2
	d.ordered = make(chan *Chunk, ahead)
	work := make(chan *Chunk, ahead)
	d.wg.Add(1)
	go func() {
		defer d.wg.Done()
		defer close(d.ordered)
		defer close(work)
		if p.Empty {
			return
		}
		d.generate(func(c *Chunk) bool {
			c.done = make(chan struct{})
			c.need = make(chan struct{})
			select {
			case d.ordered <- c:
			case <-d.bg.Done():
				return false
			}
			select {
			case work <- c:
				return true
			case <-d.bg.Done():
				return false
			}
		})
	}()
	for w := 0; w < opt.Workers; w++ {
		d.wg.Add(1)
		go func() {
			defer d.wg.Done()
			for c := range work {
				if d.bg.Err() != nil {
					c.err = d.bg.Err()
				} else {
					c.err = d.build(d.bg, c)
				}
				close(c.done)
			}
		}()
	}
	return d, nil
}

// slices converts the plan's subarray to pieces per dimension.
func (d *Reader) slices() [][]piece {
	out := make([][]piece, d.g.nd)
	for i, rs := range d.p.Subarray {
		for _, r := range rs {
			lo, hi := d.g.offset(i, r.Lo), d.g.offset(i, r.Hi)
			out[i] = append(out[i], piece{off: lo, n: hi - lo + 1})
		}
	}
	return out
}

// generate calls emit with every chunk in result order until it returns
// false.
func (d *Reader) generate(emit0 func(*Chunk) bool) {
	all := d.slices()
	// Every chunk the paths below cut is bounded by d.chunkCells: one row
	// of the subarray, or one space tile's part, can be far more than the
	// budget (many overlapping ranges), and is then cut further.
	emit := func(c *Chunk) bool { return d.splitChunk(c, emit0) }
	switch {
	case d.noGlobal && d.agg:
		d.generateOrdered(all, true, emit)
	case d.p.Layout == query.LayoutRowMajor, d.p.Layout == query.LayoutColMajor:
		rowMaj := d.p.Layout == query.LayoutRowMajor
		if !d.noGlobal && d.orderIsGlobal(all, rowMaj) {
			// Same cells in the same order: global chunks are whole
			// tiles, which are handed to Arrow without a copy.
			d.generateGlobal(all, emit)
			return
		}
		d.generateOrdered(all, rowMaj, emit)
	default:
		d.generateGlobal(all, emit)
	}
}

// cells is the number of cells of the cross product of dims (saturating
// at 2^63).
func cells(dims [][]piece) uint64 {
	n := uint64(1)
	for _, ps := range dims {
		hi, lo := bits.Mul64(n, count(ps))
		if hi != 0 || lo > 1<<63 {
			return 1 << 63
		}
		n = lo
	}
	return n
}

// splitChunk emits c, or when it has more than d.chunkCells cells (and
// is not a whole space tile), the consecutive parts of its result (in
// its own order) that have at most that many: the slowest dimension is
// cut into runs of coordinates, and when one coordinate of it is still
// too many cells, each coordinate is cut along the next dimension, and
// so on. It returns false when emit does.
func (d *Reader) splitChunk(c *Chunk, emit func(*Chunk) bool) bool {
	// A whole space tile is left whole, whatever its size: it is handed
	// on without a copy when one fragment wrote it, and its size is
	// bounded already (loader.CheckWorkingSet in newReader).
	if c.full || cells(c.dims) <= d.chunkCells {
		return emit(c)
	}
	nd := len(c.dims)
	ord := make([]int, nd) // slowest first
	for k := range ord {
		ord[k] = k
		if !c.rowMaj {
			ord[k] = nd - 1 - k
		}
	}
	return d.splitLevel(c, slices.Clone(c.dims), ord, 0, emit)
}

func (d *Reader) splitLevel(c *Chunk, dims [][]piece, ord []int, level int, emit func(*Chunk) bool) bool {
	dim := ord[level]
	inner := uint64(1)
	for _, o := range ord[level+1:] {
		inner = cells([][]piece{{{n: inner}}, dims[o]})
	}
	out := func(ps []piece) bool {
		part := slices.Clone(dims)
		part[dim] = ps
		return emit(&Chunk{dims: part, rowMaj: c.rowMaj})
	}
	if inner > d.chunkCells {
		// One coordinate of dim is too many cells: each is a chunk of its
		// own, cut further along the next dimension.
		for _, p := range dims[dim] {
			for k := uint64(0); k < p.n; k++ {
				if d.bg.Err() != nil {
					return false
				}
				dims[dim] = []piece{{off: p.off + k, n: 1}}
				if !d.splitLevel(c, slices.Clone(dims), ord, level+1, emit) {
					return false
				}
			}
		}
		return true
	}
	rows := max(1, d.chunkCells/inner)
	var cur []piece
	have := uint64(0)
	for _, p := range dims[dim] {
		off, left := p.off, p.n
		for left > 0 {
			n := min(left, rows-have)
			cur = append(cur, piece{off: off, n: n})
			have += n
			off += n
			left -= n
			if have == rows {
				if !out(cur) {
					return false
				}
				cur, have = nil, 0
			}
		}
	}
	if have > 0 {
		return out(cur)
	}
	return true
}

// tileParts is the number of (range, space tile) parts the global order
// plans the subarray with (see tileSplit), saturating at 2^63.
func tileParts(all [][]piece, ext []uint64) uint64 {
	n := uint64(0)
	for i, ps := range all {
		for _, p := range ps {
			if p.n == 0 {
				continue
			}
			t := (p.off+p.n-1)/ext[i] - p.off/ext[i] + 1
			if t >= 1<<63-n {
				return 1 << 63
			}
			n += t
		}
	}
	return n
}

func count(ps []piece) uint64 {
	n := uint64(0)
	for _, p := range ps {
		n += p.n
	}
	return n
}

// orderIsGlobal reports whether the row-major (col-major) order of the
// subarray is also its global order, so that the global path's whole-tile
// chunks (zero-copy when a tile is covered) produce the same result: tile
// and cell orders agree with the layout, every dimension but the slowest
// is one range inside one space tile, the slowest dimension's ranges are
// increasing and disjoint, and a tile's part is big enough to be a chunk.
func (d *Reader) orderIsGlobal(all [][]piece, rowMaj bool) bool {
	g := d.g
	if g.tileRow != rowMaj || g.cellRow != rowMaj {
		return false
	}
	slow := 0
	if !rowMaj {
		slow = g.nd - 1
	}
	per := uint64(1)
	for i, ps := range all {
		if i == slow {
			for k := 1; k < len(ps); k++ {
				if ps[k].off < ps[k-1].off+ps[k-1].n {
					return false
				}
			}
			continue
		}
		if len(ps) != 1 || ps[0].n == 0 || ps[0].off/g.ext[i] != (ps[0].off+ps[0].n-1)/g.ext[i] {
			return false
		}
		per *= ps[0].n
	}
	return per*g.ext[slow] >= minGlobalChunkCells
}

// minGlobalChunkCells is the smallest tile part worth a chunk of its own
// when a row-major read takes the global path.
const minGlobalChunkCells = 1 << 16

func (d *Reader) generateOrdered(all [][]piece, rowMaj bool, emit func(*Chunk) bool) {
	g := d.g
	slow := 0
	if !rowMaj {
		slow = g.nd - 1
	}
	per := uint64(1) // cells per coordinate of the slow dimension
	for i, ps := range all {
		if i != slow {
			per *= count(ps)
		}
	}
	if per == 0 {
		return
	}
	rows := max(1, d.chunkCells/per)
	ext := g.ext[slow]
	// Consecutive coordinates in one space tile row (a group) share their
	// tiles: a chunk takes whole groups, so that no tile is loaded by two
	// chunks, unless a group is well beyond the chunk target; then it is
	// cut, and its tiles are loaded once per part. Groups are formed as
	// the pieces are walked, never all at once: a range may cross more
	// tiles than memory holds.
	var grp []piece
	var cur []piece
	curRows := uint64(0)
	flush := func() bool {
		if len(cur) == 0 {
			return true
		}
		dims := make([][]piece, g.nd)
		copy(dims, all)
		dims[slow] = cur
		cur, curRows = nil, 0
		return emit(&Chunk{dims: dims, rowMaj: rowMaj})
	}
	take := func() bool {
		gr := count(grp)
		if curRows > 0 && curRows+gr > rows {
			if !flush() {
				return false
			}
		}
		if gr <= 2*rows {
			cur = append(cur, grp...)
			curRows += gr
			return true
		}
		for _, p := range grp {
			off, left := p.off, p.n
			for left > 0 {
				n := min(left, rows-curRows)
				cur = append(cur, piece{off: off, n: n})
				curRows += n
				off += n
				left -= n
				if curRows >= rows && !flush() {
					return false
				}
			}
		}
		return true
	}
	for _, p := range all[slow] {
		off, left := p.off, p.n
		for left > 0 {
			n := min(left, ext-off%ext)
			if k := len(grp) - 1; k >= 0 && grp[k].off/ext == off/ext && grp[k].off+grp[k].n <= off {
				grp = append(grp, piece{off: off, n: n})
			} else {
				if len(grp) > 0 && !take() {
					return
				}
				grp = []piece{{off: off, n: n}}
			}
			off += n
			left -= n
		}
	}
	if len(grp) > 0 && !take() {
		return
	}
	flush()
}

// tileSplit groups the pieces of one dimension by space tile, in
// increasing tile order, each tile's pieces in coordinate order.
func tileSplit(ps []piece, ext uint64) (tiles []uint64, parts map[uint64][]piece) {
	sorted := append([]piece(nil), ps...)
	sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].off < sorted[j].off })
	parts = map[uint64][]piece{}
	for _, p := range sorted {
		off, left := p.off, p.n
		for left > 0 {
			t := off / ext
			n := min(left, (t+1)*ext-off)
			if _, ok := parts[t]; !ok {
				tiles = append(tiles, t)
			}
			parts[t] = append(parts[t], piece{off: off, n: n})
			off += n
			left -= n
		}
	}
	sort.Slice(tiles, func(i, j int) bool { return tiles[i] < tiles[j] })
	return tiles, parts
}

func (d *Reader) generateGlobal(all [][]piece, emit func(*Chunk) bool) {
	g := d.g
	tiles := make([][]uint64, g.nd)
	parts := make([]map[uint64][]piece, g.nd)
	for i := range all {
		tiles[i], parts[i] = tileSplit(all[i], g.ext[i])
		if len(tiles[i]) == 0 {
			return
		}
	}
	idx := make([]int, g.nd)
	for {
		dims := make([][]piece, g.nd)
		full := true
		for i := range dims {
			t := tiles[i][idx[i]]
			dims[i] = parts[i][t]
			if len(dims[i]) != 1 || dims[i][0].off != t*g.ext[i] || dims[i][0].n != g.ext[i] {
				full = false
			}
		}
		if !emit(&Chunk{dims: dims, rowMaj: g.cellRow, full: full}) {
			return
		}
		// Advance in tile order.
		k := 0
		for ; k < g.nd; k++ {
			i := k
			if g.tileRow {
				i = g.nd - 1 - k
			}
			idx[i]++
			if idx[i] < len(tiles[i]) {
				break
			}
			idx[i] = 0
		}
		if k == g.nd {
			return
		}
	}
}

// Next assembles the next record batch from built chunks.
func (d *Reader) Next(ctx context.Context) (arrow.RecordBatch, error) {
	if d.done {
		return nil, io.EOF
	}
	want := d.p.BatchRows
	if d.p.Limit >= 0 {
		left := d.p.Limit - d.emitted
		if left <= 0 {
			d.finish()
			return nil, io.EOF
		}
		if int64(want) > left {
			want = int(left)
		}
	}
	have := 0
	for have < want {
		if d.cur == nil || d.pos >= d.cur.n {
			c, err := d.NextChunk(ctx)
			if err == io.EOF {
				break
			}
			if err != nil {
				d.finish()
				return nil, err
			}
			d.cur, d.pos = c, 0
			// A wrapped tile starts a batch of its own, so that it is
			// handed to Arrow without a copy.
			if c.wrapped && have > 0 {
				break
			}
			continue
		}
		if d.cur.cuts != nil && have == 0 {
			rec, err := d.zstdBatch(want)
			if err != nil {
				d.finish()
				return nil, err
			}
			if rec != nil {
				return rec, nil
			}
			// No cut fits the batch: the chunk's columns were decoded.
		}
		k := min(want-have, d.cur.n-d.pos)
		for i, f := range d.fields[:d.nout] {
			data, offs, valid := sliceCol(f, &d.cur.cols[i], d.pos, d.pos+k, d.cur.n)
			d.builders[i].Append(data, offs, valid, k)
		}
		d.pos += k
		have += k
	}
	if have == 0 {
		d.finish()
		return nil, io.EOF
	}
	cols := make([]arrow.Array, d.nout)
	defer func() {
		for _, c := range cols {
			if c != nil {
				c.Release()
			}
		}
	}()
	for i := range d.fields[:d.nout] {
		col, err := d.builders[i].Finish()
		if err != nil {
			d.finish()
			return nil, errkind.Wrap(errkind.DataLoss, fmt.Errorf("array %s: column %q: %w", d.p.Array.Dir, d.fields[i].Name, err))
		}
		cols[i] = col
	}
	d.emitted += int64(have)
	return arrowarray.NewRecordBatch(d.schema, cols, int64(have)), nil
}

// NextChunk waits for the next built chunk in result order, or returns
// io.EOF after the last one.
func (d *Reader) NextChunk(ctx context.Context) (*Chunk, error) {
	var c *Chunk
	var ok bool
	select {
	case c, ok = <-d.ordered:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if !ok {
		if err := d.bg.Err(); err != nil {
			return nil, err
		}
		return nil, io.EOF
	}
	close(c.need)
	select {
	case <-c.done:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if c.err != nil {
		return nil, c.err
	}
	d.passLast()
	d.last = c
	return c, nil
}

// hold charges n bytes of chunk c's columns to the read's budget,
// waiting for room until the consumer waits for c.
func (d *Reader) hold(ctx context.Context, c *Chunk, n int64) error {
	if err := d.loader.Hold(ctx, n, c.need); err != nil {
		return err
	}
	c.charge += n
	d.held.Add(n)
	return nil
}

// unhold gives back n bytes hold charged.
func (d *Reader) unhold(n int64) {
	d.held.Add(-n)
	d.loader.Unhold(n)
}

// passLast gives back the charge of the chunk NextChunk returned last: its
// consumer is done with it.
func (d *Reader) passLast() {
	if d.last != nil {
		d.unhold(d.last.charge)
		d.last = nil
	}
}

// sliceCol returns cells [i, j) of a built column of n cells.
func sliceCol(f arrowconv.Field, c *colData, i, j, n int) (data, offs, valid []byte) {
	if c.validity != nil {
		valid = c.validity[i:j]
	}
	if f.IsVar() {
		offs = c.offsets[8*i : 8*j]
		data = c.data
		if j < n {
			data = c.data[:le64(c.offsets[8*j:])]
		}
		return data, offs, valid
	}
	cs := f.CellSize()
	return c.data[i*cs : j*cs], nil, valid
}

func (d *Reader) finish() {
	if d.done {
		return
	}
	d.done = true
	d.cancel()
	// Drain so that the generator and workers see the cancellation.
	go func() {
		for range d.ordered {
		}
	}()
	d.cur = nil
}

// Close stops the read; workers stop at their next tile.
func (d *Reader) Close() {
	d.finish()
	d.wg.Wait()
	// Nothing is built any more: what is still charged (chunks built
	// ahead and never passed) is given back.
	d.last = nil
	d.unhold(d.held.Load())
}
