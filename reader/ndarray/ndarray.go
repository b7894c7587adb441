// Package ndarray owns the read path of Blosc2 NDArrays (.b2nd): it opens
// a .b2nd as a tdbarray.Array with a synthesized dense schema
// (OpenB2ND), gives its Arrow schema (B2NDSchema), and reads the chunks
// and blocks a query touches into record batches (NewReader), by the
// direct path into the batches' own buffers where it can (direct.go);
// NewAggReader feeds aggregates (package reader/agg). Named ndarray, not
// b2nd, so that it never shadows the .b2nd format package it reads
// through. It imports reader/base, reader/plan, reader/eval and the b2nd
// format packages, never package reader or the other readers.
package ndarray

// The read path of Blosc2 NDArrays (.b2nd): the array is opened as an
// array.Array with a synthesized dense schema so that package plan
// resolves columns, subarrays, layouts, limits and partitions exactly as
// for TileDB arrays; the cells are then produced here from the array's
// chunks. Only the chunks a query touches are read, and inside them only
// the blocks it touches are decompressed (special chunks never are). Row-
// and col-major results are produced one block-row of the outermost output
// dimension at a time; the global layout goes chunk by chunk, block by
// block.

import (
	"cmp"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"math/bits"
	"runtime/debug"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/apache/arrow-go/v18/arrow"
	arrowarray "github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"golang.org/x/sync/errgroup"

	"github.com/tileflight/tileflight/arrowconv"
	"github.com/tileflight/tileflight/b2nd"
	b2chunk "github.com/tileflight/tileflight/b2nd/chunk"
	"github.com/tileflight/tileflight/errkind"
	"github.com/tileflight/tileflight/format/datatype"
	"github.com/tileflight/tileflight/format/schema"
	"github.com/tileflight/tileflight/query"
	"github.com/tileflight/tileflight/reader/base"
	"github.com/tileflight/tileflight/reader/eval"
	"github.com/tileflight/tileflight/reader/plan"
	"github.com/tileflight/tileflight/storage"
	"github.com/tileflight/tileflight/tdbarray"
)

// IsB2ND tells whether an array name is a Blosc2 NDArray.
func IsB2ND(name string) bool { return strings.HasSuffix(name, ".b2nd") }

// OpenB2ND opens the .b2nd array name as an array.Array (see
// array.Array.B2ND).
func OpenB2ND(ctx context.Context, st storage.Store, name string) (*tdbarray.Array, error) {
	b, err := b2nd.Open(ctx, st, name)
	if err != nil {
		return nil, err
	}
	s := &schema.ArraySchema{Version: 22, Type: schema.Dense, TileOrder: schema.RowMajor, CellOrder: schema.RowMajor}
	empty := false
	for _, n := range b.Shape {
		if n == 0 {
			empty = true
		}
	}
	for i, n := range b.Shape {
		d := schema.Dimension{Name: fmt.Sprintf("dim%d", i), Type: datatype.Int64, CellValNum: 1}
		if !empty {
			d.Domain = binary.LittleEndian.AppendUint64(binary.LittleEndian.AppendUint64(nil, 0), uint64(n-1))
			d.TileExtent = binary.LittleEndian.AppendUint64(nil, uint64(b.ChunkShape[i]))
		}
		s.Dimensions = append(s.Dimensions, d)
	}
	for _, f := range b.Dtype.Fields {
		if s.DimensionIndex(f.Name) >= 0 || s.AttributeIndex(f.Name) >= 0 {
			return nil, errkind.Errorf(errkind.Unimplemented, "array %s: field %q clashes with a dimension name", name, f.Name)
		}
		s.Attributes = append(s.Attributes, schema.Attribute{Name: f.Name, Type: datatype.Uint8, CellValNum: uint32(f.Size)})
	}
	return &tdbarray.Array{Store: st, Dir: name, Schema: s, B2ND: b}, nil
}

// B2NDSchema is the Arrow schema of columns of a .b2nd array (all when nil).
func B2NDSchema(a *tdbarray.Array, columns []string) (*arrow.Schema, error) {
	if columns == nil {
		columns = allColumns(a)
	}
	fs := make([]arrow.Field, 0, len(columns))
	for _, c := range columns {
		f, err := b2ndField(a, c)
		if err != nil {
			return nil, err
		}
		fs = append(fs, f)
	}
	md := arrow.NewMetadata([]string{"b2nd.dtype"}, []string{a.B2ND.Dtype.Str})
	return arrow.NewSchema(fs, &md), nil
}

func allColumns(a *tdbarray.Array) []string {
	var out []string
	for _, d := range a.Schema.Dimensions {
		out = append(out, d.Name)
	}
	for _, at := range a.Schema.Attributes {
		out = append(out, at.Name)
	}
	return out
}

func b2ndField(a *tdbarray.Array, c string) (arrow.Field, error) {
	if a.Schema.DimensionIndex(c) >= 0 {
		return arrowconv.B2NDDimField(c), nil
	}
	for _, f := range a.B2ND.Dtype.Fields {
		if f.Name == c {
			af, err := arrowconv.B2NDField(f)
			if err != nil {
				return arrow.Field{}, fmt.Errorf("array %s: field %q: %w", a.Dir, c, err)
			}
			return af, nil
		}
	}
	return arrow.Field{}, errkind.Errorf(errkind.InvalidArgument, "array %s has no column %q (columns: %s)", a.Dir, c, strings.Join(allColumns(a), ", "))
}

// b2ndGroupBytes caps the decoded bytes of one group of block-rows (a
// variable for the benchmark that compares group sizes).
var b2ndGroupBytes int64 = 64 << 20

// interval is an inclusive range of coordinates of one dimension.
type interval struct{ lo, hi int64 }

type b2ndCol struct {
	dim   int // >= 0: a dimension column
	field b2nd.Field
	vals  []byte
	coord []int64
}

func (c *b2ndCol) name(p *plan.Plan) string {
	if c.dim >= 0 {
		return p.Array.Schema.Dimensions[c.dim].Name
	}
	return c.field.Name
}

// b2ndPassColumn names the column of pass flags an aggregate's inner read
// gets (see newReader).
const b2ndPassColumn = "__pass"

// Reader streams the result of one .b2nd read. It is not safe for
// concurrent use.
type Reader struct {
	p      *plan.Plan
	a      *b2nd.Array
	schema *arrow.Schema
	opt    base.Options
	// cols are the returned columns (the first nout) and then those only
	// the filter reads.
	cols    []*b2ndCol
	nout    int
	prog    *eval.Program
	passCol bool
	// special, when set (aggregates without a filter, global layout),
	// takes the cells of the subarray in a special chunk: cells copies
	// of item (in the dtype's byte order); such chunks are not emitted.
	special func(item []byte, cells uint64) error
	ranges  [][]interval
	// mranges are ranges sorted and merged per dimension.
	mranges [][]interval
	// mapped is the contiguous frame's file mapped in memory, if it is.
	mapped []byte
	rows   int // rows in the current batch
	left   int64
	out    chan arrow.RecordBatch
	errc   chan error
	cancel context.CancelFunc
	done   sync.WaitGroup
	// blocks decoded for the current group, by chunk and block number.
	blocks map[blockKey][]byte
	chunks map[int64]*openChunk
	nd     int
}

type blockKey struct {
	chunk int64
	block int
}

type openChunk struct {
	c      *b2chunk.Chunk
	block0 []byte // decoded block 0 when the chunk uses the delta filter
}

// NewReader starts reading p, a plan over a .b2nd array (p.Array.B2ND).
func NewReader(ctx context.Context, p *plan.Plan, opt base.Options) (*Reader, error) {
	return newReader(ctx, p, opt, false, nil)
}

// NewAggReader starts the inner read of aggregates over a .b2nd: with a
// filter, the cells that fail it are returned as they are and a last
// boolean column tells which cells pass; special, when not nil (global
// layout only), takes the special chunks (see trySpecial).
func NewAggReader(ctx context.Context, p *plan.Plan, opt base.Options, special func([]byte, uint64) error) (*Reader, error) {
	return newReader(ctx, p, opt, true, special)
}

// Schema is the Arrow schema of every record Next returns.
func (s *Reader) Schema() *arrow.Schema { return s.schema }

// newReader starts reading p. With a filter, cells failing it are
// returned with every field zero (the fill value of a .b2nd), as TileDB
// returns the fill value in the failing cells of a dense read; with
// passCol (aggregates) they are returned as they are and a last boolean
// column, b2ndPassColumn, tells which cells pass. special, when not nil
// (global layout only), takes the special chunks (see trySpecial).
func newReader(ctx context.Context, p *plan.Plan, opt base.Options, passCol bool, special func([]byte, uint64) error) (*Reader, error) {
	a := p.Array.B2ND
	if p.Query != nil && p.Query.Timestamp != nil {
		return nil, errkind.Errorf(errkind.InvalidArgument, "array %s: a .b2nd array has no timestamps (no time travel): remove \"timestamp\"", p.Array.Dir)
	}
	sch, err := B2NDSchema(p.Array, p.Columns)
	if err != nil {
		return nil, err
	}
	s := &Reader{p: p, a: a, schema: sch, opt: opt, nd: len(a.Shape), left: p.Limit, nout: len(p.Columns), passCol: passCol}
	if p.Layout == query.LayoutGlobal {
		s.special = special
	}
	newCol := func(c string) *b2ndCol {
		col := &b2ndCol{dim: p.Array.Schema.DimensionIndex(c)}
		if col.dim < 0 {
			for _, f := range a.Dtype.Fields {
				if f.Name == c {
					col.field = f
				}
			}
		}
		return col
	}
	for _, c := range p.Columns {
		s.cols = append(s.cols, newCol(c))
	}
	if p.Cond != nil {
		// The fields the condition reads that the query does not return
		// are gathered too, after the returned ones.
		s.prog = eval.New(p.Cond)
		for _, cf := range p.Cond.Fields {
			if !slices.Contains(p.Columns, cf.Name) && !slices.ContainsFunc(s.cols[s.nout:], func(c *b2ndCol) bool { return c.name(p) == cf.Name }) {
				s.cols = append(s.cols, newCol(cf.Name))
			}
		}
		if passCol {
			fs := append(sch.Fields(), arrow.Field{Name: b2ndPassColumn, Type: arrow.FixedWidthTypes.Boolean})
			s.schema = arrow.NewSchema(fs, nil)
		}
	}
	if !p.Empty {
		for d := range a.Shape {
			var rs []interval
			for _, r := range p.Subarray[d] {
				lo := int64(binary.LittleEndian.Uint64(r.Lo))
				hi := int64(binary.LittleEndian.Uint64(r.Hi))
				if lo < 0 || hi >= a.Shape[d] || lo > hi {
					return nil, errkind.Errorf(errkind.InvalidArgument, "array %s: dim%d: range [%d, %d] is outside [0, %d]", p.Array.Dir, d, lo, hi, a.Shape[d]-1)
				}
				rs = append(rs, interval{lo, hi})
			}
			s.ranges = append(s.ranges, rs)
			s.mranges = append(s.mranges, merged(rs))
		}
	}
	ctx, s.cancel = context.WithCancel(ctx)
	s.out = make(chan arrow.RecordBatch, 1)
	s.errc = make(chan error, 1)
	s.done.Add(1)
	go func() {
		defer s.done.Done()
		defer close(s.out)
		err := s.run(ctx)
		if err != nil && err != errStop {
			s.errc <- err
		}
	}()
	return s, nil
}

var errStop = fmt.Errorf("limit reached")

var memPool = memory.DefaultAllocator

func (s *Reader) Next(ctx context.Context) (arrow.RecordBatch, error) {
	select {
	case rec, ok := <-s.out:
		if !ok {
			select {
			case err := <-s.errc:
				return nil, err
			default:
				return nil, io.EOF
			}
		}
		return rec, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (s *Reader) Close() {
	s.cancel()
	for rec := range s.out {
		rec.Release()
	}
	s.done.Wait()
}

func (s *Reader) run(ctx context.Context) error {
	if s.p.Empty || len(s.ranges) == 0 || s.left == 0 {
		return nil
	}
	// A contiguous frame on local storage is read through a mapping of
	// its file: the blocks' bytes are decoded where they lie, without a
	// copy, and the parts of raw byte planes a box skips are never read.
	// The mapping is released when the read ends (every decoding
	// goroutine has returned by then).
	if data, release, ok := s.a.MapFrame(ctx); ok {
		s.mapped = data
		defer func() {
			s.mapped = nil
			release()
		}()
	}
	if s.direct() {
		return s.runDirect(ctx)
	}
	s.newBatch()
	var err error
	if s.p.Layout == query.LayoutGlobal {
		err = s.runGlobal(ctx)
	} else {
		err = s.runOrdered(ctx)
	}
	if err == errStop {
		return nil
	}
	if err != nil {
		return err
	}
	return s.flush(ctx)
}

func (s *Reader) newBatch() {
	n := s.p.BatchRows
	if s.left >= 0 && s.left < int64(n) {
		n = int(s.left)
	}
	for _, c := range s.cols {
		if c.dim >= 0 {
			c.coord = make([]int64, 0, n)
		} else {
			c.vals = make([]byte, 0, n*c.field.Size)
		}
	}
	s.rows = 0
}

func (s *Reader) flush(ctx context.Context) error {
	if s.rows == 0 {
		return nil
	}
	arrs := make([]arrow.Array, s.schema.NumFields())
	defer func() {
		for _, a := range arrs {
			if a != nil {
				a.Release()
			}
		}
	}()
	if s.prog != nil {
		pass, err := s.filter()
		if err != nil {
			return err
		}
		if s.passCol {
			b := arrowarray.NewBooleanBuilder(memPool)
			b.AppendValues(pass, nil)
			arrs[len(arrs)-1] = b.NewArray()
			b.Release()
		} else {
			for _, c := range s.cols[:s.nout] {
				if c.dim >= 0 {
					continue
				}
				sz := c.field.Size
				for k, ok := range pass {
					if !ok {
						clear(c.vals[k*sz : (k+1)*sz])
					}
				}
			}
		}
	}
	for i, c := range s.cols[:s.nout] {
		if c.dim >= 0 {
			arrs[i] = arrowconv.Int64Column(c.coord)
			continue
		}
		a, err := arrowconv.B2NDColumn(c.field, c.vals, s.rows)
		if err != nil {
			return fmt.Errorf("array %s: field %q: %w", s.a.Name, c.field.Name, err)
		}
		arrs[i] = a
	}
	rec := arrowarray.NewRecordBatch(s.schema, arrs, int64(s.rows))
	if s.left >= 0 {
		s.left -= int64(s.rows)
	}
	select {
	case s.out <- rec:
	case <-ctx.Done():
		rec.Release()
		return ctx.Err()
	}
	if s.left == 0 {
		return errStop
	}
	s.newBatch()
	return nil
}

// filter evaluates the condition over the cells of the current batch.
func (s *Reader) filter() ([]bool, error) {
	pass := make([]bool, s.rows)
	err := s.prog.Eval(func(name string) (eval.Column, error) {
		for _, c := range s.cols {
			if c.name(s.p) != name {
				continue
			}
			if c.dim >= 0 {
				return eval.Column{Data: arrow.Int64Traits.CastToBytes(c.coord)}, nil
			}
			if !c.field.Big || c.field.Size == 1 {
				return eval.Column{Data: c.vals}, nil
			}
			le := make([]byte, len(c.vals))
			for k := 0; k < len(le); k += c.field.Size {
				for j := 0; j < c.field.Size; j++ {
					le[k+j] = c.vals[k+c.field.Size-1-j]
				}
			}
			return eval.Column{Data: le}, nil
		}
		return eval.Column{}, fmt.Errorf("no column %q", name)
	}, pass)
	if err != nil {
		return nil, errkind.Wrap(errkind.InvalidArgument, fmt.Errorf("array %s: filter: %w", s.p.Array.Dir, err))
	}
	return pass, nil
}

// emitRun appends n consecutive items (along the last dimension when
// contiguous) starting at item offset off of block buf, at coordinates c
// (c[last] is the first item's; step is the dimension that advances).
func (s *Reader) emitRun(ctx context.Context, buf []byte, off int64, stride int64, n int64, c []int64, stepDim int) error {
	is := int64(s.a.ItemSize)
	for n > 0 {
		room := int64(s.p.BatchRows - s.rows)
		if s.left >= 0 {
			room = min(room, s.left-int64(s.rows))
		}
		k := min(n, room)
		for _, col := range s.cols {
			if col.dim >= 0 {
				v := c[col.dim]
				for j := int64(0); j < k; j++ {
					if col.dim == stepDim {
						col.coord = append(col.coord, v+j)
					} else {
						col.coord = append(col.coord, v)
					}
				}
				continue
			}
			f := col.field
			if stride == 1 && f.Size == s.a.ItemSize {
				col.vals = append(col.vals, buf[off*is:(off+k)*is]...)
				continue
			}
			for j := int64(0); j < k; j++ {
				p := (off+j*stride)*is + int64(f.Offset)
				col.vals = append(col.vals, buf[p:p+int64(f.Size)]...)
			}
		}
		s.rows += int(k)
		n -= k
		off += k * stride
		c[stepDim] += k
		if s.rows == s.p.BatchRows || (s.left >= 0 && int64(s.rows) == s.left) {
			if err := s.flush(ctx); err != nil {
				return err
			}
		}
	}
	return nil
}

// split cuts an interval of dimension d at block boundaries.
func (s *Reader) split(d int, iv interval, f func(lo, hi int64) error) error {
	cs, bs := s.a.ChunkShape[d], s.a.BlockShape[d]
	for x := iv.lo; x <= iv.hi; {
		ch := x / cs
		l := x % cs
		end := ch*cs + min((l/bs+1)*bs, cs) - 1
		end = min(end, iv.hi)
		if err := f(x, end); err != nil {
			return err
		}
		x = end + 1
	}
	return nil
}

// touched lists, for dimension d, the (chunk, block) pairs the intervals
// touch, sorted and unique.
func (s *Reader) touched(d int, ivs []interval) [][2]int64 {
	set := map[[2]int64]bool{}
	cs, bs := s.a.ChunkShape[d], s.a.BlockShape[d]
	for _, iv := range ivs {
		s.split(d, iv, func(lo, _ int64) error {
			set[[2]int64{lo / cs, (lo % cs) / bs}] = true
			return nil
		})
	}
	out := make([][2]int64, 0, len(set))
	for k := range set {
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i][0] != out[j][0] {
			return out[i][0] < out[j][0]
		}
		return out[i][1] < out[j][1]
	})
	return out
}

// load decodes the blocks of the cross product of per-dimension (chunk,
// block) pairs into blocks, reading chunks not open yet. Chunks of a
// contiguous frame are opened by their head only; the blocks are then
// read and decoded in pieces of consecutive blocks, in parallel, so that
// both the reads and the decompression use every worker, and a block the
// subarray covers less than half of is unshuffled only where it is read
// (see blockSpans).
func (s *Reader) load(ctx context.Context, per [][][2]int64, blocks map[blockKey][]byte) error {
	type job struct {
		key   blockKey
		spans []b2chunk.Span
		buf   []byte // the decoded block
	}
	locals := make([][][]interval, s.nd)
	for d := range per {
		locals[d] = make([][]interval, len(per[d]))
		for k, p := range per[d] {
			locals[d][k] = s.blockLocal(d, p)
		}
	}
	var jobs []job
	idx := make([]int, s.nd)
	loc := make([][]interval, s.nd)
	for {
		var chunkN int64
		block := 0
		for d := 0; d < s.nd; d++ {
			chunkN = chunkN*s.a.ChunksPer[d] + per[d][idx[d]][0]
			block = block*int(s.a.BlocksPer[d]) + int(per[d][idx[d]][1])
			loc[d] = locals[d][idx[d]]
		}
		k := blockKey{chunkN, block}
		if _, ok := blocks[k]; !ok {
			sp := s.blockSpans(loc)
			if sp != nil {
				b2ndSpanBlocks.Add(1)
			}
			jobs = append(jobs, job{key: k, spans: sp})
			blocks[k] = nil
		}
		d := s.nd - 1
		for ; d >= 0; d-- {
			idx[d]++
			if idx[d] < len(per[d]) {
				break
			}
			idx[d] = 0
		}
		if d < 0 {
			break
		}
	}
	if len(jobs) == 0 {
		return nil
	}
	if ws := s.opt.MaxWorkingSet; ws > 0 && int64(len(jobs))*int64(s.a.BlockNBytes()) > ws {
		return errkind.Errorf(errkind.ResourceExhausted, "array %s: the query needs %d blocks of %d bytes at once, more than the working set of %d bytes", s.a.Name, len(jobs), s.a.BlockNBytes(), ws)
	}
	err := decodePieces(ctx, s, jobs, func(j *job) blockKey { return j.key }, 2,
		func(n int64, oc *openChunk, piece []job, raw []byte, lo int) error {
			c := oc.c
			tmp := getB2NDBuf(2 * s.a.BlockNBytes())
			defer putB2NDBuf(tmp)
			for k := range piece {
				j := &piece[k]
				buf := getB2NDBuf(s.a.BlockNBytes())
				if j.key.block == 0 && oc.block0 != nil {
					copy(buf, oc.block0)
				} else {
					var err error
					if c.Head() {
						off, end := c.BlockRange(j.key.block)
						if end > off {
							err = c.DecodeBlockAt(j.key.block, raw[off-lo:end-lo], buf, oc.block0, tmp, j.spans)
						} else {
							err = c.DecodeBlockAt(j.key.block, nil, buf, oc.block0, tmp, j.spans)
						}
					} else {
						err = c.DecodeBlock(j.key.block, buf, oc.block0, tmp)
					}
					if err != nil {
						putB2NDBuf(buf)
						return s.a.ChunkErr(n, err)
					}
				}
				j.buf = buf
			}
			return nil
		})
	// Decoded blocks go to blocks even on an error, whose caller hands
	// them back to the free lists.
	for _, j := range jobs {
		blocks[j.key] = j.buf
	}
	return err
}

// decodePieces decodes jobs, blocks of s's chunks, on s.opt.Workers
// goroutines: it opens the chunks not open
// yet (serially: a head is a small read; with block 0 for chunks using
// delta), sorts the jobs by chunk and block and cuts them into pieces of
// consecutive blocks of one chunk, about perWorker pieces a worker, and
// hands decode each piece with its chunk and, when the chunk was opened
// by its head only, the piece's stored bytes: raw, starting at byte lo of
// the chunk, read at once or a view of the mapped file (nil otherwise).
// Reading a mapped file that another program truncated faults: an error
// naming the chunk, not a crash. Pieces are disjoint parts of jobs, so
// decode may write to its own jobs.
func decodePieces[J any](ctx context.Context, s *Reader, jobs []J, key func(*J) blockKey, perWorker int,
	decode func(n int64, oc *openChunk, piece []J, raw []byte, lo int) error) error {
	for i := range jobs {
		n := key(&jobs[i]).chunk
		if _, ok := s.chunks[n]; ok {
			continue
		}
		if _, err := s.openChunk(ctx, n); err != nil {
			return err
		}
	}
	slices.SortFunc(jobs, func(a, b J) int {
		ka, kb := key(&a), key(&b)
		if c := cmp.Compare(ka.chunk, kb.chunk); c != 0 {
			return c
		}
		return cmp.Compare(ka.block, kb.block)
	})
	w := max(s.opt.Workers, 1)
	most := max(1, (len(jobs)+perWorker*w-1)/(perWorker*w))
	var pieces [][2]int
	for i := 0; i < len(jobs); {
		first := key(&jobs[i])
		e := i + 1
		for e < len(jobs) && e-i < most {
			k := key(&jobs[e])
			if k.chunk != first.chunk || k.block != key(&jobs[e-1]).block+1 {
				break
			}
			e++
		}
		pieces = append(pieces, [2]int{i, e})
		i = e
	}
	if s.mapped != nil && b2ndBeforeDecode != nil {
		b2ndBeforeDecode()
	}
	g, gctx := errgroup.WithContext(ctx)
	one := func(pc [2]int) (err error) {
		piece := jobs[pc[0]:pc[1]]
		n := key(&piece[0]).chunk
		if s.mapped != nil {
			defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
			defer func() {
				if r := recover(); r != nil {
					if _, fault := r.(interface{ Addr() uintptr }); !fault {
						panic(r)
					}
					err = s.a.ChunkErr(n, errkind.Errorf(errkind.DataLoss, "the file changed while it was read (%v)", r))
				}
			}()
		}
		oc := s.chunks[n]
		c := oc.c
		lo, hi := -1, -1
		for i := range piece {
			b := key(&piece[i]).block
			if b >= c.NBlocks() {
				return s.a.ChunkErr(n, errkind.Errorf(errkind.DataLoss, "block %d of %d", b, c.NBlocks()))
			}
			if off, end := c.BlockRange(b); end > off {
				if lo < 0 || off < lo {
					lo = off
				}
				hi = max(hi, end)
			}
		}
		var raw []byte
		if c.Head() && lo >= 0 && s.mapped != nil {
			pos, _ := s.a.ChunkPos(n)
			raw = s.mapped[pos+int64(lo) : pos+int64(hi)]
		} else if c.Head() && lo >= 0 {
			raw = getB2NDBuf(hi - lo)
			defer putB2NDBuf(raw)
			if err := s.a.ReadChunkBytes(gctx, n, lo, hi, raw); err != nil {
				return err
			}
		}
		return decode(n, oc, piece, raw, lo)
	}
	// Each of the w workers takes the next piece until none is left (in
	// order, as pieces are listed): a goroutine per worker, not per piece,
	// since every new goroutine grows its stack again through the zstd
	// decoder (stack copies were 2 % of a whole read's CPU with a
	// goroutine per piece).
	var next atomic.Int64
	for range min(w, len(pieces)) {
		g.Go(func() error {
			for {
				k := next.Add(1) - 1
				if k >= int64(len(pieces)) {
					return nil
				}
				if gctx.Err() != nil {
					return gctx.Err()
				}
				if err := one(pieces[k]); err != nil {
					return err
				}
			}
		})
	}
	return g.Wait()
}

// blockLocal is the part of the subarray's (merged) ranges of dimension d
// inside block p (chunk, block), in coordinates relative to the block.
func (s *Reader) blockLocal(d int, p [2]int64) []interval {
	blo := p[0]*s.a.ChunkShape[d] + p[1]*s.a.BlockShape[d]
	bhi := min(blo+s.a.BlockShape[d], (p[0]+1)*s.a.ChunkShape[d], s.a.Shape[d]) - 1
	var out []interval
	for _, r := range s.mranges[d] {
		if lo, hi := max(r.lo, blo), min(r.hi, bhi); lo <= hi {
			out = append(out, interval{lo - blo, hi - blo})
		}
	}
	return out
}

// maxBlockSpans bounds the spans of a partly decoded block; a subarray
// cutting a block into more pieces decodes it whole.
const maxBlockSpans = 4096

// blockSpans lists the byte ranges of a block that the subarray covers,
// given its block-local intervals per dimension, or nil (decode the whole
// block) when they cover half the block or more.
func (s *Reader) blockSpans(loc [][]interval) []b2chunk.Span {
	covered, rows := int64(1), int64(1)
	for d, ivs := range loc {
		k := int64(0)
		for _, iv := range ivs {
			k += iv.hi - iv.lo + 1
		}
		covered *= k
		if d < s.nd-1 {
			rows *= k
		}
	}
	if covered*2 >= s.a.BlockItems || rows*int64(len(loc[s.nd-1])) > maxBlockSpans {
		return nil
	}
	is := int64(s.a.ItemSize)
	var spans []b2chunk.Span
	var walk func(d int, base int64)
	walk = func(d int, base int64) {
		stride := int64(1)
		for k := d + 1; k < s.nd; k++ {
			stride *= s.a.BlockShape[k]
		}
		for _, iv := range loc[d] {
			if d == s.nd-1 {
				off, n := int((base+iv.lo)*is), int((iv.hi-iv.lo+1)*is)
				if k := len(spans) - 1; k >= 0 && spans[k].Off+spans[k].Len == off {
					spans[k].Len += n
				} else {
					spans = append(spans, b2chunk.Span{Off: off, Len: n})
				}
				continue
			}
			for x := iv.lo; x <= iv.hi; x++ {
				walk(d+1, base+x*stride)
			}
		}
	}
	walk(0, 0)
	return spans
}

// openChunk reads and checks chunk n (its head only in a contiguous frame;
// with its block 0 decoded when the chunk uses delta) into s.chunks.
func (s *Reader) openChunk(ctx context.Context, n int64) (*openChunk, error) {
	var c *b2chunk.Chunk
	var err error
	if s.mapped != nil {
		if b2ndBeforeHead != nil {
			b2ndBeforeHead()
		}
		c, err = s.a.ChunkHeadMapped(ctx, n, s.mapped)
	} else {
		c, err = s.a.ReadChunkHead(ctx, n)
	}
	if err != nil {
		return nil, err
	}
	if c.NBytes != s.a.ChunkNBytes() || c.BlockSize != s.a.BlockNBytes() && c.Special() == b2chunk.SpecialNone {
		c.Close()
		return nil, s.a.ChunkErr(n, errkind.Errorf(errkind.DataLoss, "block size %d, want %d", c.BlockSize, s.a.BlockNBytes()))
	}
	oc := &openChunk{c: c}
	if c.UsesDelta() {
		oc.block0 = make([]byte, c.BlockLen(0))
		if c.Head() {
			off, end := c.BlockRange(0)
			raw := make([]byte, end-off)
			err := s.a.ReadChunkBytes(ctx, n, off, end, raw)
			if err == nil {
				err = c.DecodeBlockAt(0, raw, oc.block0, nil, nil, nil)
			}
			if err != nil {
				c.Close()
				return nil, s.a.ChunkErr(n, err)
			}
		} else if err := c.DecodeBlock(0, oc.block0, nil, nil); err != nil {
			c.Close()
			return nil, s.a.ChunkErr(n, err)
		}
	}
	s.chunks[n] = oc
	return oc, nil
}

// trySpecial hands the chunk of grp (one chunk per dimension) to
// s.special when it is a special chunk (zeros, NaN, uninitialized, one
// repeated value): its cells inside the merged ranges m all hold one item,
// so aggregates take them at once, without filling any block. The chunk
// is opened either way (load then reads it no more).
func (s *Reader) trySpecial(ctx context.Context, grp [][][2]int64, m [][]interval) (bool, error) {
	if s.special == nil || s.a.ItemSize > 255 {
		return false, nil
	}
	var n int64
	cells := uint64(1)
	for d := 0; d < s.nd; d++ {
		ch := grp[d][0][0]
		n = n*s.a.ChunksPer[d] + ch
		lo := ch * s.a.ChunkShape[d]
		hi := min(lo+s.a.ChunkShape[d], s.a.Shape[d]) - 1
		k := uint64(0)
		for _, r := range m[d] {
			if l, h := max(r.lo, lo), min(r.hi, hi); l <= h {
				k += uint64(h - l + 1)
			}
		}
		cells *= k
	}
	oc, err := s.openChunk(ctx, n)
	if err != nil {
		return false, err
	}
	if oc.c.Special() == b2chunk.SpecialNone {
		return false, nil
	}
	item := make([]byte, s.a.ItemSize)
	oc.c.FillSpecial(item, 0)
	if err := s.special(item, cells); err != nil {
		return false, err
	}
	b2ndSpecialChunks.Add(1)
	return true, nil
}

// b2ndBeforeDecode, when set (tests), runs when a read of a mapped file
// has opened its chunks and is about to decode their blocks.
var b2ndBeforeDecode func()

// b2ndBeforeHead, when set (tests), runs before the head of a chunk of a
// mapped file is read from the mapping.
var b2ndBeforeHead func()

// b2ndSpanBlocks counts the blocks decoded only where the subarray
// covers them (tests).
var b2ndSpanBlocks atomic.Int64

// b2ndSpecialChunks counts the special chunks aggregated whole (tests).
var b2ndSpecialChunks atomic.Int64

// b2ndFree recycles the buffers of .b2nd reads across queries (blocks,
// decoding scratch, stored bytes): one bounded free list per power-of-two
// capacity, holding at most b2ndFreeBytes each. A read decodes many blocks
// of one size, and a fresh buffer would be zeroed and collected each time;
// unlike a sync.Pool, a free list survives garbage collections, which the
// read's own allocations trigger every few queries.
var b2ndFree sync.Map // capacity -> chan []byte

const b2ndFreeBytes = 16 << 20

func b2ndFreeList(c int) chan []byte {
	if l, ok := b2ndFree.Load(c); ok {
		return l.(chan []byte)
	}
	l, _ := b2ndFree.LoadOrStore(c, make(chan []byte, max(2, b2ndFreeBytes/c)))
	return l.(chan []byte)
}

// getB2NDBuf returns a buffer of n bytes (not zeroed).
func getB2NDBuf(n int) []byte {
	c := 4096
	if n > c {
		c = 1 << bits.Len(uint(n-1))
	}
	select {
	case b := <-b2ndFreeList(c):
		return b[:n]
	default:
		return make([]byte, n, c)
	}
}

// putB2NDBuf hands back a buffer getB2NDBuf returned.
func putB2NDBuf(b []byte) {
	select {
	case b2ndFreeList(cap(b)) <- b:
	default:
	}
}

// releaseBlocks returns decoded blocks to the free lists.
func releaseBlocks(m map[blockKey][]byte) {
	for _, b := range m {
		if b != nil {
			putB2NDBuf(b)
		}
	}
	clear(m)
}

// keepChunks closes the open chunks whose coordinate along dimension d is
// not ch (a group goes on in that chunk).
func (s *Reader) keepChunks(d int, ch int64) {
	inner := int64(1)
	for k := d + 1; k < s.nd; k++ {
		inner *= s.a.ChunksPer[k]
	}
	for n, oc := range s.chunks {
		if (n/inner)%s.a.ChunksPer[d] != ch {
			oc.c.Close()
			delete(s.chunks, n)
		}
	}
}

func (s *Reader) dropChunks() {
	for _, oc := range s.chunks {
		oc.c.Close()
	}
	s.chunks = map[int64]*openChunk{}
}

// locate returns the block buffer and in-block item offset of coordinates c.
func (s *Reader) locate(c []int64) ([]byte, int64) {
	var chunkN, in int64
	block := 0
	for d := 0; d < s.nd; d++ {
		cs, bs := s.a.ChunkShape[d], s.a.BlockShape[d]
		l := c[d] % cs
		chunkN = chunkN*s.a.ChunksPer[d] + c[d]/cs
		block = block*int(s.a.BlocksPer[d]) + int(l/bs)
		in = in*bs + l%bs
	}
	return s.blocks[blockKey{chunkN, block}], in
}

// runOrdered produces row-major (C order) or col-major results: one group
// of outer coordinates inside one block at a time.
func (s *Reader) runOrdered(ctx context.Context) error {
	order := make([]int, s.nd)
	for i := range order {
		order[i] = i
		if s.p.Layout == query.LayoutColMajor {
			order[i] = s.nd - 1 - i
		}
	}
	outer, inner := order[0], order[s.nd-1]
	per := make([][][2]int64, s.nd)
	for d := range per {
		per[d] = s.touched(d, s.ranges[d])
	}
	s.dropChunks()
	// A group is up to k consecutive block-rows of the outer dimension
	// inside one chunk: its blocks are decoded in parallel, then emitted.
	// k keeps a group's decoded blocks within a quarter of the memory
	// budget (at most 64 MiB), so that several blocks decode at once even
	// when a block-row is a single block.
	rowBlocks := int64(1)
	for d := range per {
		if d != outer {
			rowBlocks *= int64(len(per[d]))
		}
	}
	budget := min(s.opt.MemoryBudget/4, b2ndGroupBytes)
	k := max(int64(1), budget/max(rowBlocks*int64(s.a.BlockNBytes()), 1))
	cs, bs := s.a.ChunkShape[outer], s.a.BlockShape[outer]
	type group struct {
		lo, hi int64
		rows   [][2]int64
		blocks map[blockKey][]byte
	}
	var groups []group
	for _, iv := range s.ranges[outer] {
		for lo := iv.lo; lo <= iv.hi; {
			ch := lo / cs
			b0 := (lo % cs) / bs
			hi := min(iv.hi, ch*cs+min((b0+k)*bs, cs)-1)
			g := group{lo: lo, hi: hi}
			for b := b0; b <= (hi%cs)/bs; b++ {
				g.rows = append(g.rows, [2]int64{ch, b})
			}
			groups = append(groups, g)
			lo = hi + 1
		}
	}
	// The groups are decoded one ahead of their emission, by a goroutine
	// of their own, so that decoding the next group overlaps emitting
	// (and sending) this one; at most two groups are held at once.
	lctx, lcancel := context.WithCancel(ctx)
	loaded := make(chan group)
	var lerr error
	var lwg sync.WaitGroup
	lwg.Add(1)
	go func() {
		defer lwg.Done()
		defer close(loaded)
		for _, g := range groups {
			s.keepChunks(outer, g.rows[0][0])
			grp := append([][][2]int64(nil), per...)
			grp[outer] = g.rows
			g.blocks = map[blockKey][]byte{}
			if err := s.load(lctx, grp, g.blocks); err != nil {
				releaseBlocks(g.blocks)
				lerr = err
				return
			}
			select {
			case loaded <- g:
			case <-lctx.Done():
				releaseBlocks(g.blocks)
				return
			}
		}
	}()
	defer func() {
		lcancel()
		for g := range loaded {
			releaseBlocks(g.blocks)
		}
		lwg.Wait()
		s.dropChunks()
	}()
	c := make([]int64, s.nd)
	for g := range loaded {
		s.blocks = g.blocks
		err := s.emitGroup(ctx, g.lo, g.hi, order, outer, inner, c)
		releaseBlocks(g.blocks)
		s.blocks = nil
		if err != nil {
			return err
		}
	}
	return lerr
}

// emitGroup emits the cells of the outer coordinates [lo, hi] from the
// decoded blocks in s.blocks.
func (s *Reader) emitGroup(ctx context.Context, lo, hi int64, order []int, outer, inner int, c []int64) error {
	if s.nd == 1 {
		return s.split(0, interval{lo, hi}, func(a, b int64) error {
			c[0] = a
			buf, off := s.locate(c)
			return s.emitRun(ctx, buf, off, 1, b-a+1, c, 0)
		})
	}
	for x := lo; x <= hi; x++ {
		c[outer] = x
		if err := s.emitInner(ctx, order[1:], inner, c); err != nil {
			return err
		}
	}
	return nil
}

// emitInner walks dims (in output order, the last varying fastest) over
// their ranges for the fixed coordinates already in c.
func (s *Reader) emitInner(ctx context.Context, dims []int, inner int, c []int64) error {
	d := dims[0]
	if len(dims) == 1 {
		contiguous := d == s.nd-1
		for _, iv := range s.ranges[d] {
			err := s.split(d, iv, func(lo, hi int64) error {
				c[d] = lo
				buf, off := s.locate(c)
				if contiguous {
					return s.emitRun(ctx, buf, off, 1, hi-lo+1, c, d)
				}
				// Along a dimension other than the last, items of a block
				// are a block-stride apart.
				stride := int64(1)
				for k := d + 1; k < s.nd; k++ {
					stride *= s.a.BlockShape[k]
				}
				return s.emitRun(ctx, buf, off, stride, hi-lo+1, c, d)
			})
			if err != nil {
				return err
			}
		}
		return nil
	}
	for _, iv := range s.ranges[d] {
		for x := iv.lo; x <= iv.hi; x++ {
			c[d] = x
			if err := s.emitInner(ctx, dims[1:], inner, c); err != nil {
				return err
			}
		}
	}
	return nil
}

// merged returns the ranges of dimension d sorted and merged.
func merged(rs []interval) []interval {
	out := append([]interval(nil), rs...)
	sort.Slice(out, func(i, j int) bool { return out[i].lo < out[j].lo })
	var m []interval
	for _, r := range out {
		if len(m) > 0 && r.lo <= m[len(m)-1].hi+1 {
			m[len(m)-1].hi = max(m[len(m)-1].hi, r.hi)
			continue
		}
		m = append(m, r)
	}
	return m
}

// runGlobal produces the global order: chunks in C order, blocks in C order
// inside each chunk, items in C order inside each block, restricted to the
// subarray.
func (s *Reader) runGlobal(ctx context.Context) error {
	m := make([][]interval, s.nd)
	per := make([][][2]int64, s.nd)
	for d := range m {
		m[d] = merged(s.ranges[d])
		per[d] = s.touched(d, m[d])
	}
	// Chunks touched per dimension, in order.
	chunksOf := make([][]int64, s.nd)
	for d := range per {
		for _, p := range per[d] {
			if n := len(chunksOf[d]); n == 0 || chunksOf[d][n-1] != p[0] {
				chunksOf[d] = append(chunksOf[d], p[0])
			}
		}
	}
	idx := make([]int, s.nd)
	c := make([]int64, s.nd)
	s.blocks = map[blockKey][]byte{}
	defer func() {
		releaseBlocks(s.blocks)
		s.dropChunks()
	}()
	for {
		s.dropChunks()
		releaseBlocks(s.blocks)
		grp := make([][][2]int64, s.nd)
		for d := range grp {
			ch := chunksOf[d][idx[d]]
			for _, p := range per[d] {
				if p[0] == ch {
					grp[d] = append(grp[d], p)
				}
			}
		}
		var bidx []int
		done, err := s.trySpecial(ctx, grp, m)
		if err != nil {
			return err
		}
		if done {
			goto next
		}
		if err := s.load(ctx, grp, s.blocks); err != nil {
			return err
		}
		// Blocks of this chunk in C order.
		bidx = make([]int, s.nd)
		for {
			// The in-subarray intervals of this block per dimension.
			ivs := make([][]interval, s.nd)
			for d := 0; d < s.nd; d++ {
				ch, bl := grp[d][bidx[d]][0], grp[d][bidx[d]][1]
				blo := ch*s.a.ChunkShape[d] + bl*s.a.BlockShape[d]
				bhi := min(blo+s.a.BlockShape[d], (ch+1)*s.a.ChunkShape[d], s.a.Shape[d]) - 1
				for _, r := range m[d] {
					lo, hi := max(r.lo, blo), min(r.hi, bhi)
					if lo <= hi {
						ivs[d] = append(ivs[d], interval{lo, hi})
					}
				}
			}
			saved := s.ranges
			s.ranges = ivs
			err := s.emitBlock(ctx, c)
			s.ranges = saved
			if err != nil {
				return err
			}
			d := s.nd - 1
			for ; d >= 0; d-- {
				bidx[d]++
				if bidx[d] < len(grp[d]) {
					break
				}
				bidx[d] = 0
			}
			if d < 0 {
				break
			}
		}
	next:
		d := s.nd - 1
		for ; d >= 0; d-- {
			idx[d]++
			if idx[d] < len(chunksOf[d]) {
				break
			}
			idx[d] = 0
		}
		if d < 0 {
			return nil
		}
	}
}

// emitBlock emits the cells of s.ranges (all inside one block) in C order.
func (s *Reader) emitBlock(ctx context.Context, c []int64) error {
	dims := make([]int, s.nd)
	for i := range dims {
		dims[i] = i
	}
	if s.nd == 1 {
		for _, iv := range s.ranges[0] {
			c[0] = iv.lo
			buf, off := s.locate(c)
			if err := s.emitRun(ctx, buf, off, 1, iv.hi-iv.lo+1, c, 0); err != nil {
				return err
			}
		}
		return nil
	}
	for _, iv := range s.ranges[0] {
		for x := iv.lo; x <= iv.hi; x++ {
			c[0] = x
			if err := s.emitInner(ctx, dims[1:], s.nd-1, c); err != nil {
				return err
			}
		}
	}
	return nil
}
