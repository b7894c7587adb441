package lifecycle

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"sort"

	"github.com/apache/arrow-go/v18/arrow"
	arrowarray "github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/tileflight/tileflight/arrowconv"
	"github.com/tileflight/tileflight/errkind"
	"github.com/tileflight/tileflight/format/commits"
	"github.com/tileflight/tileflight/format/fragmeta"
	"github.com/tileflight/tileflight/reader/base"
	"github.com/tileflight/tileflight/reader/sparse"
	"github.com/tileflight/tileflight/reader/tileio"
	"github.com/tileflight/tileflight/storage"
	"github.com/tileflight/tileflight/tdbarray"
	"github.com/tileflight/tileflight/writer"
)

// This file consolidates sparse fragments the general way TileDB 2.30's
// FragmentConsolidator does (with timestamps, without purging deleted
// cells, its defaults), for the cases the read-at-each-timestamp path of
// sparse.go cannot serve: input fragments that are themselves
// consolidations (per-cell timestamps, maybe delete metadata), and arrays
// with delete commits. Every stored cell version of every input fragment
// is copied as stored, deleted or not, with its timestamp; when TileDB
// would (a delete commit not older than the first input fragment, or an
// input fragment with delete metadata) each cell also gets
//
//   - __delete_timestamps: the timestamp of the first delete commit (in
//     timestamp order) that removes it, or the one its fragment's delete
//     metadata already holds, whichever is earlier; MaxUint64 if none;
//   - __delete_condition_index: that commit's index in the new fragment's
//     processed conditions, which list every delete commit of the array.
//
// A delete commit removes a cell when its condition matches the cell, the
// commit is not older than the cell's fragment, the fragment has not
// processed it already, and (for fragments with per-cell timestamps whose
// range holds the commit) the cell is not newer than the commit: exactly
// the rule of TileDB's reader, so readers at every timestamp see what
// they saw before.
//
// The new fragment is written in the latest schema, as TileDB's (its
// consolidator opens the array for reads and writes at the latest
// schema): an attribute a fragment lacks (added by a schema evolution
// after it was written) gets the latest schema's fill value in every cell
// of that fragment, null where the attribute is nullable with an invalid
// fill, as TileDB's reader fills it; an attribute a schema evolution
// dropped is not copied, so reads at timestamps before the evolution see
// its fill value afterwards, in TileDB as here.

// delCond is one delete commit as a consolidation applies it.
type delCond struct {
	keep   *commits.Node
	ts     uint64
	marker string // "__commits/NAME.del", TileDB's condition marker
}

// loadDeleteConds decodes the array's delete commits, ordered by
// timestamp as TileDB's ArrayDirectory orders them.
func loadDeleteConds(ctx context.Context, a *tdbarray.Array, key []byte) ([]delCond, error) {
	if a.View == nil {
		return nil, nil
	}
	var out []delCond
	for i := range a.View.Conditions {
		cc := &a.View.Conditions[i]
		n, err := sparse.LoadDeleteCommit(ctx, a, cc, key)
		if err != nil {
			return nil, err
		}
		out = append(out, delCond{keep: n, ts: cc.Timestamp, marker: cc.Path})
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].ts < out[j].ts })
	return out, nil
}

// needsGeneral says whether the fragments picked for a sparse
// consolidation need the general path: a delete commit in the array, an
// input that is itself a consolidation, or one written before a schema
// evolution added an attribute (a read at its timestamp would not have
// the attribute at all).
func needsGeneral(all *tdbarray.Array, picked []*tdbarray.Fragment) bool {
	if all.View != nil && len(all.View.Conditions) > 0 {
		return true
	}
	for _, f := range picked {
		ft := f.Meta.Footer()
		if f.Start != f.End || ft.HasTimestamps || ft.HasDeleteMeta {
			return true
		}
		for _, a := range all.Schema.Attributes {
			if !tileio.HasField(f, a.Name) {
				return true
			}
		}
	}
	return false
}

// consolidateSparseGeneral writes the picked fragments as one, every cell
// version kept with its timestamp and, when TileDB would write it, its
// delete metadata (see the file comment).
func consolidateSparseGeneral(ctx context.Context, st storage.Store, dir string, all *tdbarray.Array, opt Options, picked []*tdbarray.Fragment) (*Result, error) {
	s := all.Schema
	conds, err := loadDeleteConds(ctx, all, opt.EncryptionKey)
	if err != nil {
		return nil, err
	}
	withDel := false
	for _, c := range conds {
		if c.ts >= picked[0].Start {
			withDel = true
		}
	}
	for _, f := range picked {
		withDel = withDel || f.Meta.Footer().HasDeleteMeta
		if f.Meta.Footer().Dense {
			return nil, errkind.Errorf(errkind.DataLoss, "array %s: fragment %s: dense fragment in a sparse array", dir, f.Name)
		}
	}
	processed := make([]string, len(conds))
	index := map[string]uint64{}
	for i, c := range conds {
		processed[i] = c.marker
		index[c.marker] = uint64(i)
	}

	var fields []arrowconv.Field
	var afields []arrow.Field
	for _, d := range s.Dimensions {
		f, err := base.FieldFor(s, d.Name)
		if err != nil {
			return nil, err
		}
		fields = append(fields, f)
	}
	for _, a := range s.Attributes {
		f, err := base.FieldFor(s, a.Name)
		if err != nil {
			return nil, err
		}
		fields = append(fields, f)
	}
	for _, f := range fields {
		typ, err := arrowconv.ArrowType(f)
		if err != nil {
			return nil, err
		}
		afields = append(afields, arrow.Field{Name: f.Name, Type: typ, Nullable: f.Nullable})
	}
	special := []string{fragmeta.TimestampsName}
	if withDel {
		special = append(special, fragmeta.DeleteTimestampsName, fragmeta.DeleteConditionIdxName)
	}
	for _, n := range special {
		afields = append(afields, arrow.Field{Name: n, Type: arrow.PrimitiveTypes.Uint64})
	}
	asch := arrow.NewSchema(afields, nil)

	t1, t2 := picked[0].Start, picked[len(picked)-1].End
	sw, err := writer.NewSparseWriter(ctx, st, dir, s, writer.Options{
		Timestamp: t2, TimestampStart: t1, CellTimestamps: true, DeleteMeta: withDel, ProcessedConditions: processed,
		MaxFragmentBytes: opt.MaxFragmentBytes, EncryptionKey: opt.EncryptionKey})
	if err != nil {
		return nil, err
	}
	defer sw.Abort()
	l := tileio.NewLoader(all, tileio.Options{EncryptionKey: opt.EncryptionKey})
	for _, f := range picked {
		if err := copyFragment(ctx, l, all, f, fields, asch, conds, index, withDel, sw); err != nil {
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

// copyFragment appends every stored cell of f, tile by tile, with its
// timestamp and (withDel) its delete metadata.
func copyFragment(ctx context.Context, l *tileio.Loader, all *tdbarray.Array, f *tdbarray.Fragment, fields []arrowconv.Field,
	asch *arrow.Schema, conds []delCond, index map[string]uint64, withDel bool, sw *writer.SparseWriter) error {
	ft := f.Meta.Footer()
	var processed map[string]bool
	var oldMarkers []string
	if ft.HasDeleteMeta {
		names, err := f.Meta.ProcessedConditions()
		if err != nil {
			return errkind.Wrap(errkind.DataLoss, fmt.Errorf("array %s: fragment %s: %w", all.Dir, f.Name, err))
		}
		oldMarkers = names
		processed = map[string]bool{}
		for _, n := range names {
			processed[n] = true
		}
	}
	// The delete commits that apply to this fragment.
	var apply []int
	for i, c := range conds {
		if !processed[c.marker] && c.ts >= f.Start {
			apply = append(apply, i)
		}
	}
	condFields := map[string]bool{}
	for _, i := range apply {
		for _, n := range sparse.DeleteFields(conds[i].keep) {
			condFields[n] = true
		}
	}
	ntiles, err := f.Meta.TileNum()
	if err != nil {
		return errkind.Wrap(errkind.DataLoss, fmt.Errorf("array %s: fragment %s: %w", all.Dir, f.Name, err))
	}
	for t := uint64(0); t < ntiles; t++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		cells, err := f.Meta.TileCellNum(t)
		if err != nil {
			return errkind.Wrap(errkind.DataLoss, fmt.Errorf("array %s: fragment %s: %w", all.Dir, f.Name, err))
		}
		n := int(cells)
		tiles := map[string]*tileio.Tile{}
		load := func(name string) (*tileio.Tile, error) {
			if tl, ok := tiles[name]; ok {
				return tl, nil
			}
			tl, err := l.Load(ctx, f, name, t)
			if err != nil {
				return nil, fmt.Errorf("array %s: fragment %s: field %q: tile %d: %w", all.Dir, f.Name, name, t, err)
			}
			tiles[name] = tl
			return tl, nil
		}
		err = func() error {
			defer func() {
				for _, tl := range tiles {
					tl.Release()
				}
			}()
			cols := make([]arrow.Array, 0, len(asch.Fields()))
			defer func() {
				for _, c := range cols {
					c.Release()
				}
			}()
			for _, fd := range fields {
				var data, offs, validity []byte
				if tileio.HasField(f, fd.Name) {
					tl, err := load(fd.Name)
					if err != nil {
						return err
					}
					data, validity = tl.Data, tl.Validity
					if fd.IsVar() {
						if len(tl.Offsets) < 8*n {
							return errkind.Errorf(errkind.DataLoss, "array %s: fragment %s: field %q: tile %d: %d offsets for %d cells", all.Dir, f.Name, fd.Name, t, len(tl.Offsets)/8, n)
						}
						offs = tl.Offsets[:8*n]
					}
				} else {
					// Written before a schema evolution added the
					// attribute: TileDB's consolidation reads (and so
					// writes) the latest schema's fill value.
					ft, err := sparse.FillTile(all.Schema, fd, n)
					if err != nil {
						return errkind.Wrap(errkind.DataLoss, fmt.Errorf("array %s: fragment %s: tile %d: %w", all.Dir, f.Name, t, err))
					}
					data, offs, validity = ft.Data, ft.Offsets, ft.Validity
				}
				c, err := arrowconv.NewColumn(fd, data, offs, validity, n)
				if err != nil {
					return errkind.Wrap(errkind.DataLoss, fmt.Errorf("array %s: fragment %s: field %q: tile %d: %w", all.Dir, f.Name, fd.Name, t, err))
				}
				cols = append(cols, c)
			}
			// Per-cell timestamps: stored, or the fragment's.
			ts := make([]uint64, n)
			if ft.HasTimestamps {
				tl, err := load(tileio.FieldTimestamps)
				if err != nil {
					return err
				}
				if len(tl.Data) != 8*n {
					return errkind.Errorf(errkind.DataLoss, "array %s: fragment %s: tile %d: %d timestamp bytes for %d cells", all.Dir, f.Name, t, len(tl.Data), n)
				}
				for i := range ts {
					ts[i] = binary.LittleEndian.Uint64(tl.Data[8*i:])
				}
			} else {
				for i := range ts {
					ts[i] = f.Start
				}
			}
			cols = append(cols, u64Column(ts))
			if withDel {
				dts, dci, err := deleteMeta(ctx, all, f, t, n, ts, conds, apply, condFields, oldMarkers, index, load)
				if err != nil {
					return err
				}
				cols = append(cols, u64Column(dts), u64Column(dci))
			}
			rec := arrowarray.NewRecordBatch(asch, cols, int64(n))
			defer rec.Release()
			return sw.Append(rec)
		}()
		if err != nil {
			if errkind.Of(err) == nil {
				err = errkind.Wrap(errkind.DataLoss, err)
			}
			return err
		}
	}
	return nil
}

// deleteMeta computes the delete timestamps and condition indices of the
// n cells of tile t of f (see the file comment).
func deleteMeta(ctx context.Context, all *tdbarray.Array, f *tdbarray.Fragment, t uint64, n int, ts []uint64, conds []delCond, apply []int,
	condFields map[string]bool, oldMarkers []string, index map[string]uint64, load func(string) (*tileio.Tile, error)) ([]uint64, []uint64, error) {
	ft := f.Meta.Footer()
	dts := make([]uint64, n)
	dci := make([]uint64, n)
	for i := range dts {
		dts[i], dci[i] = math.MaxUint64, math.MaxUint64
	}
	if len(apply) > 0 {
		tiles := map[string]*tileio.Tile{}
		for name := range condFields {
			if !tileio.HasField(f, name) {
				continue // a field the fragment lacks: comparisons are false
			}
			tl, err := load(name)
			if err != nil {
				return nil, nil, err
			}
			tiles[name] = tl
		}
		keep := make([]bool, n)
		for _, ci := range apply {
			c := &conds[ci]
			sparse.KeepCells(c.keep, f.Schema, tiles, keep)
			timestamped := ft.HasTimestamps && c.ts <= f.End
			for i := 0; i < n; i++ {
				if dts[i] != math.MaxUint64 || keep[i] || timestamped && ts[i] > c.ts {
					continue
				}
				dts[i], dci[i] = c.ts, uint64(ci)
			}
		}
	}
	if ft.HasDeleteMeta {
		// What the fragment's delete metadata already holds wins when it
		// is not later (TileDB's rule), its index renumbered into the
		// new processed conditions.
		dt, err := load(tileio.FieldDeleteTimestamp)
		if err != nil {
			return nil, nil, err
		}
		di, err := load(tileio.FieldDeleteCondition)
		if err != nil {
			return nil, nil, err
		}
		if len(dt.Data) != 8*n || len(di.Data) != 8*n {
			return nil, nil, errkind.Errorf(errkind.DataLoss, "array %s: fragment %s: tile %d: delete metadata of %d/%d bytes for %d cells", all.Dir, f.Name, t, len(dt.Data), len(di.Data), n)
		}
		for i := 0; i < n; i++ {
			old := binary.LittleEndian.Uint64(dt.Data[8*i:])
			if dts[i] < old {
				continue
			}
			dts[i] = old
			oi := binary.LittleEndian.Uint64(di.Data[8*i:])
			if oi == math.MaxUint64 {
				dci[i] = math.MaxUint64
				continue
			}
			if oi >= uint64(len(oldMarkers)) {
				return nil, nil, errkind.Errorf(errkind.DataLoss, "array %s: fragment %s: tile %d: delete condition index %d of cell %d; the fragment processed %d conditions", all.Dir, f.Name, t, oi, i, len(oldMarkers))
			}
			// A marker no longer among the array's commits maps to 0, as
			// in TileDB (its map's default).
			dci[i] = index[oldMarkers[oi]]
		}
	}
	return dts, dci, nil
}

func u64Column(v []uint64) arrow.Array {
	b := arrowarray.NewUint64Builder(memory.DefaultAllocator)
	defer b.Release()
	b.AppendValues(v, nil)
	return b.NewArray()
}
