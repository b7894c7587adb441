package lifecycle

import (
	"context"
	"errors"
	"io"
	"sort"

	"github.com/apache/arrow-go/v18/arrow"
	arrowarray "github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/tileflight/tileflight/format/fragmeta"
	"github.com/tileflight/tileflight/query"
	"github.com/tileflight/tileflight/reader"
	"github.com/tileflight/tileflight/storage"
	"github.com/tileflight/tileflight/tdbarray"
	"github.com/tileflight/tileflight/writer"
)

// consolidateSparse does what TileDB's sparse fragment consolidation (with
// timestamps, its default) does: every cell of every fragment of the
// window, all versions kept, each stamped with the timestamp it was
// written at, in one fragment __<first start>_<last end>_<uuid>_<v> whose
// fragment metadata says it holds per-cell timestamps; reads at any
// timestamp in the window see what they saw before.
//
// The cells written at time t are read as a read of [t, t] sees them when
// every fragment the window touches was written at one timestamp (not
// itself a consolidation) with every attribute of the latest schema, and
// the array holds no delete commits; otherwise consolidateSparseGeneral
// copies the stored cells with their timestamps and delete metadata
// (sparsedel.go).
func consolidateSparse(ctx context.Context, st storage.Store, dir string, all *tdbarray.Array, opt Options, end uint64) (*Result, error) {
	s := all.Schema
	var picked, touched []*tdbarray.Fragment
	times := map[uint64]bool{}
	for _, f := range all.Fragments {
		if f.End < opt.Start || f.Start > end {
			continue
		}
		touched = append(touched, f)
		if f.Start >= opt.Start && f.End <= end {
			picked = append(picked, f)
			times[f.Start] = true
		}
	}
	if len(picked) < 2 {
		return &Result{}, nil // as TileDB: nothing to consolidate
	}
	if needsGeneral(all, touched) {
		return consolidateSparseGeneral(ctx, st, dir, all, opt, picked)
	}
	ts := make([]uint64, 0, len(times))
	for t := range times {
		ts = append(ts, t)
	}
	// Newest first: the writer keeps equal coordinates in input order, and
	// TileDB stores (and its reader expects) the newest version of a cell
	// first.
	sort.Slice(ts, func(i, j int) bool { return ts[i] > ts[j] })

	var cols []string
	for _, d := range s.Dimensions {
		cols = append(cols, d.Name)
	}
	for _, a := range s.Attributes {
		cols = append(cols, a.Name)
	}
	t1, t2 := picked[0].Start, picked[len(picked)-1].End
	sw, err := writer.NewSparseWriter(ctx, st, dir, s, writer.Options{
		Timestamp: t2, TimestampStart: t1, CellTimestamps: true,
		MaxFragmentBytes: opt.MaxFragmentBytes, EncryptionKey: opt.EncryptionKey})
	if err != nil {
		return nil, err
	}
	defer sw.Abort()
	for _, t := range ts {
		if err := appendAt(ctx, st, dir, cols, t, reader.Options{EncryptionKey: opt.EncryptionKey, Workers: opt.Workers}, sw); err != nil {
			return nil, err
		}
	}
	staged, err := sw.Stage()
	if err != nil {
		return nil, err
	}
	if len(staged.Fragments) == 0 {
		return &Result{}, nil
	}
	return commitConsolidated(ctx, st, dir, picked, staged.Fragments, writeVersion(s), all.Dir)
}

// appendAt streams the cells written at t (a read of [t, t]) into sw,
// each stamped t.
func appendAt(ctx context.Context, st storage.Store, dir string, cols []string, t uint64, ropt reader.Options, sw *writer.SparseWriter) error {
	q := &query.Query{Array: dir, Columns: cols, Layout: query.LayoutGlobal, Limit: -1,
		Timestamp: &query.Timestamp{Start: t, End: t}}
	rd, err := reader.Open(ctx, st, q, ropt)
	if err != nil {
		return err
	}
	defer rd.Close()
	for {
		rec, err := rd.Next(ctx)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		stamped := withTimestampColumn(rec, t)
		err = sw.Append(stamped) // the writer retains what it keeps
		stamped.Release()
		rec.Release()
		if err != nil {
			return err
		}
	}
}

// withTimestampColumn returns rec with a "__timestamps" column of t (a new
// record sharing rec's columns; the caller releases both).
func withTimestampColumn(rec arrow.RecordBatch, t uint64) arrow.RecordBatch {
	n := int(rec.NumRows())
	b := arrowarray.NewUint64Builder(memory.DefaultAllocator)
	defer b.Release()
	b.Reserve(n)
	for i := 0; i < n; i++ {
		b.UnsafeAppend(t)
	}
	tcol := b.NewArray()
	defer tcol.Release()
	fields := append(append([]arrow.Field(nil), rec.Schema().Fields()...), arrow.Field{Name: fragmeta.TimestampsName, Type: arrow.PrimitiveTypes.Uint64})
	cols := append(append([]arrow.Array(nil), rec.Columns()...), tcol)
	md := rec.Schema().Metadata()
	return arrowarray.NewRecordBatch(arrow.NewSchema(fields, &md), cols, int64(n))
}
