// Package reader owns the opening of a read: it opens the array a query
// names at the query's timestamp (a .b2nd through reader/ndarray),
// resolves the query (reader/plan), chooses the reader that runs it
// (aggregates: reader/agg; .b2nd: reader/ndarray; dense: reader/dense;
// sparse: reader/sparse) and streams its Arrow record batches under a
// memory budget (Reader, and RecordReader for Arrow consumers). What the
// readers share (Options, FieldFor, ZstdBatch) lives below them in
// reader/base; Options, ZstdBatch and ZstdColumn are named here too, as
// the types of this package's own API. It may import every reader/...
// package; none of them imports it.
package reader

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"sync/atomic"

	"github.com/apache/arrow-go/v18/arrow"
	arrowarray "github.com/apache/arrow-go/v18/arrow/array"

	"github.com/tileflight/tileflight/arrowconv"
	"github.com/tileflight/tileflight/errkind"
	"github.com/tileflight/tileflight/query"
	"github.com/tileflight/tileflight/reader/agg"
	"github.com/tileflight/tileflight/reader/base"
	"github.com/tileflight/tileflight/reader/dense"
	"github.com/tileflight/tileflight/reader/ndarray"
	"github.com/tileflight/tileflight/reader/plan"
	"github.com/tileflight/tileflight/reader/tileio"
	"github.com/tileflight/tileflight/storage"
	"github.com/tileflight/tileflight/tdbarray"
)

// Options tune a read (see base.Options).
type Options = base.Options

// ZstdBatch is a record batch some of whose columns are still zstd frames
// (Options.ZstdPassThrough; see base.ZstdBatch).
type ZstdBatch = base.ZstdBatch

// ZstdColumn is a compressed column of a ZstdBatch (see base.ZstdColumn).
type ZstdColumn = base.ZstdColumn

// source is a read path: one of the readers below.
type source interface {
	Next(ctx context.Context) (arrow.RecordBatch, error)
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
	if ndarray.IsB2ND(q.Array) {
		if q.Timestamp != nil {
			return nil, errkind.Errorf(errkind.InvalidArgument, "array %s: a .b2nd array has no timestamps (no time travel): remove \"timestamp\"", q.Array)
		}
		return ndarray.OpenB2ND(ctx, st, q.Array)
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
		src, err := agg.NewReader(ctx, p, opt)
		if err != nil {
			return nil, err
		}
		return &Reader{plan: p, schema: src.Schema(), src: src}, nil
	}
	r := &Reader{plan: p}
	if p.Array.B2ND != nil {
		src, err := ndarray.NewReader(ctx, p, opt)
		if err != nil {
			return nil, err
		}
		r.schema, r.src = src.Schema(), src
		return r, nil
	}
	for _, c := range p.Columns {
		f, err := base.FieldFor(s, c)
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
	loader := tileio.NewLoader(p.Array, tileio.Options{MemoryBudget: opt.MemoryBudget, MaxWorkingSet: opt.MaxWorkingSet, EncryptionKey: opt.EncryptionKey, Cache: opt.TileCache, Meter: opt.Meter})
	if s.IsDense() {
		d, err := dense.NewReader(ctx, p, r.fields, sch, loader, opt)
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
func (r *Reader) Next(ctx context.Context) (arrow.RecordBatch, error) {
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

// RecordReader adapts r to Arrow's array.RecordReader (for Flight record
// writers and other Arrow consumers); ctx bounds every Next.
func (r *Reader) RecordReader(ctx context.Context) arrowarray.RecordReader {
	return &recordReader{r: r, ctx: ctx, refs: 1}
}

type recordReader struct {
	r    *Reader
	ctx  context.Context
	cur  arrow.RecordBatch
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
func (rr *recordReader) Record() arrow.RecordBatch      { return rr.cur }
func (rr *recordReader) Err() error                     { return rr.err }

// MemoryInUse returns the decoded bytes that all running queries hold
// under their memory budgets (the daemon exports it as a metric).
func MemoryInUse() int64 { return tileio.BudgetInUse() }
