// Package sparse owns the read path of sparse arrays: it prunes each
// fragment's tiles with its R-tree against the subarray, filters cells by
// the ranges, by per-cell timestamps (consolidated fragments) and by delete
// commits and consolidated delete metadata, merges fragments the way
// TileDB does (the newest cell wins for equal coordinates unless the array
// allows duplicates), orders the result (unordered, the array's global
// order including Hilbert, row-major or col-major) and streams it as Arrow
// record batches. Tiles are loaded lazily, a few ahead of use, through a
// tileio.Loader whose memory budget bounds what a query holds; nothing
// holds the whole result. Package reader hands sparse plans to NewReader.
package sparse

import (
	"context"
	"fmt"
	"io"
	"math"
	"path"
	"runtime"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/tileflight/tileflight/arrowconv"
	"github.com/tileflight/tileflight/errkind"
	"github.com/tileflight/tileflight/filters"
	"github.com/tileflight/tileflight/format/commits"
	"github.com/tileflight/tileflight/format/fragmeta"
	"github.com/tileflight/tileflight/format/gentile"
	"github.com/tileflight/tileflight/format/hilbert"
	"github.com/tileflight/tileflight/format/schema"
	"github.com/tileflight/tileflight/query"
	"github.com/tileflight/tileflight/reader/eval"
	"github.com/tileflight/tileflight/reader/plan"
	"github.com/tileflight/tileflight/reader/tileio"
	"github.com/tileflight/tileflight/tdbarray"
)

// Input is what NewReader needs: the resolved plan, the loader of the
// opened array, and one Arrow-facing field per Plan.Columns entry.
type Input struct {
	Plan   *plan.Plan
	Loader *tileio.Loader
	Fields []arrowconv.Field
	// Stats, when set, may answer a whole tile from its statistics in the
	// fragment metadata (aggregates): it is offered every tile inside the
	// subarray whose cells are all in the result as stored (no filter,
	// no delete, no timestamps, no other fragment meeting it), and returns
	// true when it took the tile, which is then never read.
	Stats func(f *tdbarray.Fragment, tile, cells uint64) (bool, error)
}

// Reader streams the result of one sparse read. It is not safe for
// concurrent use.
type Reader struct {
	plan   *plan.Plan
	arr    *tdbarray.Array
	loader *tileio.Loader
	fields []arrowconv.Field
	schema *arrow.Schema

	dims      []*dimInfo
	colDim    []int // per output column: dimension index, or -1
	cellOrder []int // dimension indices in cell-order priority
	tileOrder []int // dimensions with a tile extent, in tile-order priority
	hilbert   bool
	hbits     int
	hmax      uint64
	dedup     bool
	sorted    bool // row-major / col-major: ranges count with multiplicity
	merging   bool // a k-way merge in global order: compares coordinates

	frags []*fragState
	conds []*deleteCond

	// prog is the query's filter (nil: none); tiles whose statistics
	// prove that no cell passes are skipped (counted in Skipped).
	prog    *eval.Program
	skipped int

	src     source
	out     *batcher
	emitted int64
	limit   int64
	done    bool

	bg     context.Context
	cancel context.CancelFunc
}

// fragState is one fragment as this read uses it.
type fragState struct {
	i           int
	f           *tdbarray.Fragment
	hasTS       bool
	hasDelMeta  bool
	partialTime bool
	start       uint64
	conds       []condUse
	jobs        []*tileJob
}

type condUse struct {
	c           *deleteCond
	timestamped bool
}

// tileJob is one tile of one fragment that meets the subarray.
type tileJob struct {
	frag    *fragState
	tile    uint64
	cells   uint64
	mbr     fragmeta.MBR
	covered []bool // per dimension: exactly one range holds the whole MBR
	all     bool   // every dimension covered
}

// source produces the result cells, in order, into a batcher.
type source interface {
	// fill appends at most max cells to b. It returns io.EOF once it has
	// nothing more, and may return early (with fewer cells) to let the
	// caller flush a batch.
	fill(ctx context.Context, b *batcher, max int) error
	close()
}

// NewReader prepares a sparse read: it resolves the delete commits, prunes
// every fragment's tiles and picks the merge strategy. Tiles are loaded by
// Next.
func NewReader(ctx context.Context, in Input) (*Reader, error) {
	p := in.Plan
	if p == nil || p.Array == nil || in.Loader == nil {
		return nil, fmt.Errorf("sparse reader: incomplete input")
	}
	a := p.Array
	s := a.Schema
	if s.IsDense() {
		return nil, fmt.Errorf("sparse reader: array %s is dense", a.Dir)
	}
	if len(in.Fields) != len(p.Columns) {
		return nil, fmt.Errorf("sparse reader: %d fields for %d columns", len(in.Fields), len(p.Columns))
	}
	if len(p.Subarray) != len(s.Dimensions) {
		return nil, fmt.Errorf("sparse reader: subarray has %d dimensions, array %d", len(p.Subarray), len(s.Dimensions))
	}
	arrSchema, err := arrowconv.Schema(in.Fields, nil)
	if err != nil {
		return nil, errkind.Wrap(errkind.Unimplemented, fmt.Errorf("array %s: %w", a.Dir, err))
	}
	r := &Reader{plan: p, arr: a, loader: in.Loader, fields: in.Fields, schema: arrSchema, limit: p.Limit}
	if p.BatchRows <= 0 {
		return nil, fmt.Errorf("sparse reader: batch rows %d", p.BatchRows)
	}
	for i := range s.Dimensions {
		r.dims = append(r.dims, newDimInfo(i, &s.Dimensions[i], p.Subarray[i]))
	}
	for _, c := range p.Columns {
		r.colDim = append(r.colDim, s.DimensionIndex(c))
	}
	nd := len(r.dims)
	r.hilbert = s.CellOrder == schema.Hilbert
	if r.hilbert {
		r.hbits = hilbert.Bits(nd)
		r.hmax = 1<<r.hbits - 1
	}
	for k := 0; k < nd; k++ {
		d := k
		if s.CellOrder == schema.ColMajor {
			d = nd - 1 - k
		}
		r.cellOrder = append(r.cellOrder, d)
	}
	if !r.hilbert {
		for k := 0; k < nd; k++ {
			d := k
			if s.TileOrder == schema.ColMajor {
				d = nd - 1 - k
			}
			if r.dims[d].hasExtent {
				r.tileOrder = append(r.tileOrder, d)
			}
		}
	}
	r.sorted = p.Layout == query.LayoutRowMajor || p.Layout == query.LayoutColMajor
	if p.Cond != nil {
		r.prog = eval.New(p.Cond)
	}
	if err := r.loadConditions(ctx); err != nil {
		return nil, err
	}
	if err := r.prune(); err != nil {
		return nil, err
	}
	if in.Stats != nil && r.prog == nil {
		if err := r.answerFromStats(in.Stats); err != nil {
			return nil, err
		}
	}
	active := 0
	anyTS := false
	for _, f := range r.frags {
		if len(f.jobs) > 0 {
			active++
			anyTS = anyTS || f.hasTS
		}
	}
	r.dedup = !s.AllowsDups && (active > 1 || anyTS)
	r.bg, r.cancel = context.WithCancel(context.Background())
	r.out = newBatcher(r)
	switch {
	case r.sorted:
		r.src, err = r.newSortSource()
		if err != nil {
			r.cancel()
			return nil, err
		}
	case p.Layout == query.LayoutGlobal && active > 1, r.dedup:
		r.merging = true
		r.src = r.newMergeSource()
	default:
		// One fragment (stored in global order) or an unordered read
		// without deduplication: fragment after fragment, tile after tile.
		// Its batches wrap runs of a tile's cells without copying, so the
		// tiles' data is pooled: it returns to the free lists when the
		// last batch over it has been released (sent), instead of being
		// garbage (a fifth of the daemon's CPU on a 10 M cell scan was
		// the collections that garbage caused).
		var jobs []*tileJob
		for _, f := range r.frags {
			jobs = append(jobs, f.jobs...)
		}
		r.src = &concatSource{p: newPrefetcher(r, jobs, 2*runtime.GOMAXPROCS(0)+2, pooledScans)}
	}
	if err := r.checkWorkingSet(); err != nil {
		r.src.close()
		r.cancel()
		return nil, err
	}
	return r, nil
}

// Schema is the Arrow schema of the records Next returns.
func (r *Reader) Schema() *arrow.Schema { return r.schema }

// Next returns the next record batch (at most Plan.BatchRows rows), or
// io.EOF after the last one. The caller releases each record.
func (r *Reader) Next(ctx context.Context) (arrow.RecordBatch, error) {
	if r.done {
		return nil, io.EOF
	}
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		want := r.plan.BatchRows
		if r.limit >= 0 {
			left := r.limit - r.emitted
			if left <= 0 {
				r.finish()
				return nil, io.EOF
			}
			if int64(want) > left {
				want = int(left)
			}
		}
		var err error
		for r.out.n < want {
			before := r.out.n
			err = r.src.fill(ctx, r.out, want-r.out.n)
			if err != nil || r.out.n == before {
				break
			}
			if r.out.flush {
				break
			}
		}
		r.out.flush = false
		if err != nil && err != io.EOF {
			r.finish()
			return nil, err
		}
		if r.out.n > 0 {
			rec, berr := r.out.build()
			if berr != nil {
				r.finish()
				return nil, berr
			}
			r.emitted += rec.NumRows()
			if err == io.EOF {
				r.finish()
			}
			return rec, nil
		}
		if err == io.EOF {
			r.finish()
			return nil, io.EOF
		}
	}
}

func (r *Reader) finish() {
	if r.done {
		return
	}
	r.done = true
	if r.src != nil {
		r.src.close()
	}
	r.out.reset()
	r.cancel()
}

// Close stops background loads and releases every tile still held.
func (r *Reader) Close() {
	if r == nil {
		return
	}
	r.finish()
}

// loadConditions reads the delete commits of the open range.
func (r *Reader) loadConditions(ctx context.Context) error {
	a := r.arr
	if a.View == nil {
		return nil
	}
	for i := range a.View.Conditions {
		cc := &a.View.Conditions[i]
		n, err := LoadDeleteCommit(ctx, a, cc, r.loader.EncryptionKey())
		if err != nil {
			return err
		}
		r.conds = append(r.conds, &deleteCond{keep: n, ts: cc.Timestamp, marker: cc.Path,
			fields: condFields(n, map[string]bool{}, nil)})
	}
	return nil
}

// LoadDeleteCommit decodes delete commit cc of a (an array encrypted with
// key, if any) to its stored condition. As TileDB 2.30 does, it fails
// when the array's schema (the one in force at the open timestamp) lacks
// a field the condition names, one a later schema evolution dropped:
// TileDB cannot read (or consolidate) the array from there on, and
// neither do we (FailedPrecondition). Update commits are Unimplemented.
func LoadDeleteCommit(ctx context.Context, a *tdbarray.Array, cc *commits.ConditionCommit, key []byte) (*commits.Node, error) {
	if cc.Update {
		return nil, errkind.Errorf(errkind.Unimplemented, "array %s: update commit %s: updates are not supported", a.Dir, cc.Path)
	}
	file := cc.Tile
	if file == nil {
		b, err := a.Store.Get(ctx, path.Join(a.Dir, cc.Container))
		if err != nil {
			return nil, dataLoss(fmt.Errorf("array %s: delete commit %s: %w", a.Dir, cc.Path, err))
		}
		file = b
	}
	n, err := commits.DecodeDeleteWith(file, deleteCodec(key))
	if err != nil {
		return nil, dataLoss(fmt.Errorf("array %s: delete commit %s: %w", a.Dir, cc.Path, err))
	}
	for _, f := range DeleteFields(n) {
		if a.Schema.DimensionIndex(f) < 0 && a.Schema.AttributeIndex(f) < 0 {
			return nil, errkind.Errorf(errkind.FailedPrecondition, "array %s: delete commit %s: its condition names field %q, which schema %s lacks (dropped by a schema evolution); TileDB 2.30 cannot read the array at this timestamp either (\"Field doesn't exist\")", a.Dir, cc.Path, f, a.Schema.Name)
		}
	}
	return n, nil
}

// deleteCodec decodes the delete commits of an array encrypted with key.
func deleteCodec(key []byte) gentile.Unfilterer {
	if len(key) == 0 {
		return nil
	}
	return filters.GenericTileCodec{EncryptionKey: key}
}

func dataLoss(err error) error {
	if errkind.Of(err) != nil {
		return err
	}
	return errkind.Wrap(errkind.DataLoss, err)
}

// prune lists, per fragment, the tiles whose MBR meets the subarray, by a
// walk down the fragment's R-tree.
func (r *Reader) prune() error {
	a := r.arr
	for i, f := range a.Fragments {
		fs := &fragState{i: i, f: f, start: f.Start}
		footer := f.Meta.Footer()
		if footer.Dense {
			return errkind.Errorf(errkind.Unimplemented, "array %s: fragment %s: dense fragment in a sparse array", a.Dir, f.Name)
		}
		fs.hasTS = footer.HasTimestamps
		fs.hasDelMeta = footer.HasDeleteMeta
		fs.partialTime = fs.hasTS && !(a.Start <= f.Start && f.End <= a.End)
		r.frags = append(r.frags, fs)
		if ned := footer.NonEmptyDomain; len(ned) == len(r.dims) {
			meets := true
			for d, di := range r.dims {
				if m, _ := di.overlaps(ned[d].Start, ned[d].End); !m {
					meets = false
					break
				}
			}
			if !meets {
				continue
			}
		}
		rt, err := f.Meta.RTree()
		if err != nil {
			return dataLoss(fmt.Errorf("array %s: fragment %s: %w", a.Dir, f.Name, err))
		}
		tiles, err := f.Meta.TileNum()
		if err != nil {
			return dataLoss(fmt.Errorf("array %s: fragment %s: %w", a.Dir, f.Name, err))
		}
		leaves := rt.Leaves()
		if uint64(len(leaves)) != tiles {
			return errkind.Errorf(errkind.DataLoss, "array %s: fragment %s: R-tree has %d leaves for %d tiles", a.Dir, f.Name, len(leaves), tiles)
		}
		if err := r.walk(fs, rt, 0, 0); err != nil {
			return err
		}
		if len(fs.jobs) > 0 {
			if err := r.fragConds(fs); err != nil {
				return err
			}
		}
	}
	return nil
}

func (r *Reader) walk(fs *fragState, rt *fragmeta.RTree, level int, node uint64) error {
	mbr := rt.Levels[level][node]
	if len(mbr) != len(r.dims) {
		return errkind.Errorf(errkind.DataLoss, "array %s: fragment %s: R-tree MBR with %d ranges for %d dimensions", r.arr.Dir, fs.f.Name, len(mbr), len(r.dims))
	}
	covered := make([]bool, len(r.dims))
	all := true
	for d, di := range r.dims {
		m, c := di.overlaps(mbr[d].Start, mbr[d].End)
		if !m {
			return nil
		}
		covered[d] = c
		all = all && c
	}
	if level == len(rt.Levels)-1 {
		cells, err := fs.f.Meta.TileCellNum(node)
		if err != nil {
			return dataLoss(fmt.Errorf("array %s: fragment %s: %w", r.arr.Dir, fs.f.Name, err))
		}
		if r.prog != nil && r.mayPrune(fs, mbr) {
			m, err := r.prog.MayMatch(TileStats(fs.f, node, cells))
			if err != nil {
				return dataLoss(fmt.Errorf("array %s: fragment %s: tile %d: %w", r.arr.Dir, fs.f.Name, node, err))
			}
			if !m {
				r.skipped++
				return nil
			}
		}
		fs.jobs = append(fs.jobs, &tileJob{frag: fs, tile: node, cells: cells, mbr: mbr, covered: covered, all: all})
		return nil
	}
	fan := uint64(rt.Fanout)
	if fan == 0 {
		return errkind.Errorf(errkind.DataLoss, "array %s: fragment %s: R-tree fanout 0", r.arr.Dir, fs.f.Name)
	}
	next := rt.Levels[level+1]
	for c := node * fan; c < (node+1)*fan && c < uint64(len(next)); c++ {
		if err := r.walk(fs, rt, level+1, c); err != nil {
			return err
		}
	}
	return nil
}

// fragConds picks the delete commits that apply to a fragment: those not
// already applied to it (consolidated delete metadata) and not older than
// the fragment.
func (r *Reader) fragConds(fs *fragState) error {
	var processed map[string]bool
	if fs.hasDelMeta && len(r.conds) > 0 {
		names, err := fs.f.Meta.ProcessedConditions()
		if err != nil {
			return dataLoss(fmt.Errorf("array %s: fragment %s: %w", r.arr.Dir, fs.f.Name, err))
		}
		processed = map[string]bool{}
		for _, n := range names {
			processed[n] = true
		}
	}
	for _, c := range r.conds {
		if processed[c.marker] || c.ts < fs.f.Start {
			continue
		}
		fs.conds = append(fs.conds, condUse{c: c, timestamped: fs.hasTS && c.ts <= fs.f.End})
	}
	return nil
}

// pooledScans lets concat sources load their tiles pooled (see
// NewReader); benchmarks turn it off to compare.
var pooledScans = true

// openEnd is the end of the open range as delete metadata compares it.
func (r *Reader) deletedAt(dts uint64) bool {
	end := r.arr.End
	if end == math.MaxUint64 {
		return dts < end
	}
	return dts <= end
}
