// Package reader owns the read engine: it opens an array at a query's
// timestamp, resolves the query (package plan), and streams the result as
// Arrow record batches under a memory budget. Dense arrays are read here
// (space tile math, newest-fragment-wins per cell, fill values, every
// layout, zero-copy global-order batches); sparse arrays are delegated to
// package reader/sparse. Tiles are fetched and unfiltered by package
// tileio.
package reader

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"runtime"
	"sync/atomic"

	"github.com/apache/arrow-go/v18/arrow"
	arrowarray "github.com/apache/arrow-go/v18/arrow/array"

	"github.com/tileflight/tileflight/arrowconv"
	"github.com/tileflight/tileflight/errkind"
	"github.com/tileflight/tileflight/format/schema"
	"github.com/tileflight/tileflight/query"
	"github.com/tileflight/tileflight/reader/plan"
	"github.com/tileflight/tileflight/reader/tileio"
	"github.com/tileflight/tileflight/storage"
	"github.com/tileflight/tileflight/tdbarray"
)

// Options tune a read.
type Options struct {
	// MemoryBudget bounds the decoded tile bytes the read holds ahead of
	// need (default tileio.DefaultMemoryBudget).
	MemoryBudget int64
	// MaxWorkingSet bounds the decoded tile bytes the read may need at
	// once to progress, beyond the budget (default: see
	// tileio.Options.MaxWorkingSet); a read needing more fails at once
	// with errkind.ResourceExhausted.
	MaxWorkingSet int64
	// Workers is the number of tiles fetched and unfiltered in parallel
	// (default GOMAXPROCS).
	Workers int
	// EncryptionKey opens encrypted arrays.
	EncryptionKey []byte
	// Cache, when set, keeps decoded schemas and fragment metadata across
	// reads (see array.Cache); a daemon shares one between its queries.
	Cache *tdbarray.Cache
	// TileCache, when set, keeps decoded tiles across reads (see
	// tileio.Cache); a daemon shares one between its queries.
	TileCache *tileio.Cache
	// ZstdPassThrough lets a dense read return batches whose columns are
	// still the zstd frames they were stored in (*ZstdBatch), for a
	// consumer that sends them on compressed: whole space tiles of one
	// fragment, of attributes whose Arrow data buffer is the tile's bytes
	// (arrowconv.Field.SameBytes) filtered by zstd alone, in reads without
	// a filter or a limit. Every other batch is as without it.
	ZstdPassThrough bool
}

// source is a read path: dense here, sparse in reader/sparse.
type source interface {
	Next(ctx context.Context) (arrow.Record, error)
	Close()
}

// Reader streams the result of one query. It is not safe for concurrent
// use.
type Reader struct {
	plan   *plan.Plan
	fields []arrowconv.Field
	schema *arrow.Schema
	src    source
}

// Open opens the array q names at q's timestamp (default: now), resolves q
// and starts reading. The read stops when ctx ends or Close is called.
func Open(ctx context.Context, st storage.Store, q *query.Query, opt Options) (*Reader, error) {
	if opt.MemoryBudget <= 0 {
		opt.MemoryBudget = tileio.DefaultMemoryBudget
	}
	if opt.Workers <= 0 {
		opt.Workers = runtime.GOMAXPROCS(0)
	}
	a, err := OpenArrayWith(ctx, st, q, opt)
	if err != nil {
		return nil, err
	}
	p, err := plan.Resolve(a, q)
	if err != nil {
		return nil, err
	}
	return OpenPlan(ctx, p, opt)
}

// OpenArray opens the array of q at q's timestamp range the way TileDB
// does for a read: dense reads see only fragments whose whole timestamp
// range lies inside the query's.
func OpenArray(ctx context.Context, st storage.Store, q *query.Query, key []byte) (*tdbarray.Array, error) {
	return OpenArrayWith(ctx, st, q, Options{EncryptionKey: key})
}

// OpenArrayWith is OpenArray with the key and cache of opt.
func OpenArrayWith(ctx context.Context, st storage.Store, q *query.Query, opt Options) (*tdbarray.Array, error) {
	if IsB2ND(q.Array) {
		if q.Timestamp != nil {
			return nil, errkind.Errorf(errkind.InvalidArgument, "array %s: a .b2nd array has no timestamps (no time travel): remove \"timestamp\"", q.Array)
		}
		return OpenB2ND(ctx, st, q.Array)
	}
	ao := tdbarray.Options{EncryptionKey: opt.EncryptionKey, Cache: opt.Cache}
	if q.Timestamp != nil {
		ao.Start, ao.End, ao.EndSet = q.Timestamp.Start, q.Timestamp.End, true
	}
	a, err := tdbarray.Open(ctx, st, q.Array, ao)
	if err != nil {
		return nil, err
	}
	if !a.Schema.IsDense() {
		return a, nil
	}
	// Full overlap only changes anything when a visible fragment sticks
	// out of the range; only then is the array opened again with it.
	for _, f := range a.Fragments {
		if f.Start < a.Start || f.End > a.End {
			ao.Start, ao.End, ao.EndSet, ao.FullOverlapOnly = a.Start, a.End, true, true
			return tdbarray.Open(ctx, st, q.Array, ao)
		}
	}
	return a, nil
}

// OpenPlan starts reading a resolved plan.
func OpenPlan(ctx context.Context, p *plan.Plan, opt Options) (*Reader, error) {
	if opt.MemoryBudget <= 0 {
		opt.MemoryBudget = tileio.DefaultMemoryBudget
	}
	if opt.Workers <= 0 {
		opt.Workers = runtime.GOMAXPROCS(0)
	}
	s := p.Array.Schema
	if p.Query != nil && p.Query.Aggregates != nil {
		return openAggregate(ctx, p, opt)
	}
	r := &Reader{plan: p}
	if p.Array.B2ND != nil {
		src, err := newB2NDSource(ctx, p, opt, false, nil)
		if err != nil {
			return nil, err
		}
		r.schema, r.src = src.schema, src
		return r, nil
	}
	for _, c := range p.Columns {
		f, err := FieldFor(s, c)
		if err != nil {
			return nil, fmt.Errorf("array %s: %w", p.Array.Dir, err)
		}
		r.fields = append(r.fields, f)
	}
	sch, err := arrowconv.Schema(r.fields, nil)
	if err != nil {
		return nil, errkind.Wrap(errkind.Unimplemented, fmt.Errorf("array %s: %w", p.Array.Dir, err))
	}
	r.schema = sch
	loader := tileio.NewLoader(p.Array, tileio.Options{MemoryBudget: opt.MemoryBudget, MaxWorkingSet: opt.MaxWorkingSet, EncryptionKey: opt.EncryptionKey, Cache: opt.TileCache})
	if s.IsDense() {
		d, err := newDense(ctx, p, r.fields, sch, loader, opt)
		if err != nil {
			return nil, err
		}
		r.src = d
		return r, nil
	}
	sp, err := openSparse(ctx, p, loader, r.fields)
	if err != nil {
		return nil, err
	}
	r.src = sp
	return r, nil
}

// Plan is the resolved query.
func (r *Reader) Plan() *plan.Plan { return r.plan }

// Schema is the Arrow schema of every record Next returns.
func (r *Reader) Schema() *arrow.Schema { return r.schema }

// Next returns the next record batch, or io.EOF after the last one. The
// caller releases each record.
func (r *Reader) Next(ctx context.Context) (arrow.Record, error) {
	if r.src == nil {
		return nil, io.EOF
	}
	return r.src.Next(ctx)
}

// Close stops the read and returns its tiles to the budget. It is
// idempotent.
func (r *Reader) Close() {
	if r.src != nil {
		r.src.Close()
	}
}

// FieldFor describes dimension or attribute name of s for arrowconv. An
// enumerated attribute of a dense array whose fill value is no index of
// its enumeration is a nullable column (see withFillIndex).
func FieldFor(s *schema.ArraySchema, name string) (arrowconv.Field, error) {
	if i := s.DimensionIndex(name); i >= 0 {
		d := &s.Dimensions[i]
		return arrowconv.Field{Name: d.Name, Type: d.Type, CellValNum: d.CellValNum, Role: arrowconv.Dimension}, nil
	}
	i := s.AttributeIndex(name)
	if i < 0 {
		return arrowconv.Field{}, errkind.Errorf(errkind.InvalidArgument, "no column %q", name)
	}
	at := &s.Attributes[i]
	f := arrowconv.Field{Name: at.Name, Type: at.Type, CellValNum: at.CellValNum, Nullable: at.Nullable, Role: arrowconv.Attribute}
	if at.EnumerationName != "" {
		ref := s.EnumerationByName(at.EnumerationName)
		if ref == nil || ref.Enum == nil {
			return arrowconv.Field{}, errkind.Errorf(errkind.DataLoss, "attribute %q: enumeration %q is missing", name, at.EnumerationName)
		}
		e := ref.Enum
		f.Enumeration = &arrowconv.Enumeration{Name: ref.Name, Type: e.Type, CellValNum: e.CellValNum,
			Ordered: e.Ordered, Data: e.Data, Offsets: e.Offsets}
		if s.IsDense() {
			withFillIndex(at, &f)
		}
	}
	return f, nil
}

// withFillIndex lets a dense read of an enumerated attribute return the
// cells that hold the attribute's fill value as nulls when that index has
// no enumeration value (TileDB fills unwritten cells, and cells failing a
// filter, with it: uint8's default 255 with a 3-value enumeration). TileDB
// returns such a cell's raw index and no value; any other index outside
// the enumeration is still DATA_LOSS.
func withFillIndex(at *schema.Attribute, f *arrowconv.Field) {
	e := f.Enumeration
	fill := at.FillValue
	if len(fill) != at.Type.Size() || at.CellValNum != 1 {
		return
	}
	var v int64
	switch len(fill) {
	case 1:
		v = int64(fill[0])
		if at.Type.IsSigned() {
			v = int64(int8(fill[0]))
		}
	case 2:
		u := binary.LittleEndian.Uint16(fill)
		v = int64(u)
		if at.Type.IsSigned() {
			v = int64(int16(u))
		}
	case 4:
		u := binary.LittleEndian.Uint32(fill)
		v = int64(u)
		if at.Type.IsSigned() {
			v = int64(int32(u))
		}
	case 8:
		v = int64(binary.LittleEndian.Uint64(fill))
	default:
		return
	}
	if v >= 0 && v < int64(e.Len()) {
		return // the fill is a value of the enumeration: nothing to hide
	}
	e.HasFill, e.FillIndex = true, v
}

// RecordReader adapts r to Arrow's array.RecordReader (for Flight record
// writers and other Arrow consumers); ctx bounds every Next.
func (r *Reader) RecordReader(ctx context.Context) arrowarray.RecordReader {
	return &recordReader{r: r, ctx: ctx, refs: 1}
}

type recordReader struct {
	r    *Reader
	ctx  context.Context
	cur  arrow.Record
	err  error
	refs int64
}

func (rr *recordReader) Retain() { atomic.AddInt64(&rr.refs, 1) }

func (rr *recordReader) Release() {
	if atomic.AddInt64(&rr.refs, -1) == 0 {
		if rr.cur != nil {
			rr.cur.Release()
			rr.cur = nil
		}
		rr.r.Close()
	}
}

func (rr *recordReader) Schema() *arrow.Schema { return rr.r.Schema() }

func (rr *recordReader) Next() bool {
	if rr.cur != nil {
		rr.cur.Release()
		rr.cur = nil
	}
	if rr.err != nil {
		return false
	}
	rec, err := rr.r.Next(rr.ctx)
	if err != nil {
		if err != io.EOF {
			rr.err = err
		}
		return false
	}
	rr.cur = rec
	return true
}

func (rr *recordReader) RecordBatch() arrow.RecordBatch { return rr.cur }
func (rr *recordReader) Record() arrow.Record           { return rr.cur }
func (rr *recordReader) Err() error                     { return rr.err }

// MemoryInUse returns the decoded bytes that all running queries hold
// under their memory budgets (the daemon exports it as a metric).
func MemoryInUse() int64 { return tileio.BudgetInUse() }
