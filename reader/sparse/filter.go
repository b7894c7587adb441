package sparse

import (
	"fmt"

	"github.com/tileflight/tileflight/format/fragmeta"
	"github.com/tileflight/tileflight/reader/eval"
	"github.com/tileflight/tileflight/reader/tileio"
	"github.com/tileflight/tileflight/tdbarray"
)

// applyFilter marks the cells of lt that fail the query's filter as
// removed after deduplication (del), like deleted cells: the filter
// applies to the newest version of a cell, and a newest version that fails
// it still hides the older ones, as TileDB's post-deduplication conditions.
func (r *Reader) applyFilter(lt *ltile, cnt []uint8, del []bool, get func(string) (*tileio.Tile, error)) ([]bool, error) {
	f := lt.frag.f
	n := lt.n
	pass := make([]bool, n)
	prog := r.prog.Clone()
	err := prog.Eval(func(name string) (eval.Column, error) {
		if d := f.Schema.DimensionIndex(name); d >= 0 {
			t := lt.dims[d]
			return eval.Column{Data: t.Data, Offsets: t.Offsets}, nil
		}
		if !tileio.HasField(f, name) {
			// Written before the attribute was added: its fill value.
			at := &r.arr.Schema.Attributes[r.arr.Schema.AttributeIndex(name)]
			return eval.FillColumn(at.FillValue, !at.Nullable || at.FillValid, at.IsVar(), n), nil
		}
		t, err := get(name)
		if err != nil {
			return eval.Column{}, err
		}
		return eval.Column{Data: t.Data, Offsets: t.Offsets, Validity: t.Validity}, nil
	}, pass)
	if err != nil {
		return nil, dataLoss(fmt.Errorf("array %s: fragment %s: tile %d: filter: %w", r.arr.Dir, f.Name, lt.job.tile, err))
	}
	for i, ok := range pass {
		if !ok && (cnt == nil || cnt[i] > 0) {
			if del == nil {
				del = make([]bool, n)
			}
			del[i] = true
		}
	}
	return del, nil
}

// mayPrune reports whether a tile of fs may be skipped when no cell of it
// passes the filter: its failing cells must not be needed to hide older
// versions of themselves, so no older fragment may meet the tile's MBR,
// and fs may not hold several versions of a cell (timestamped cells).
func (r *Reader) mayPrune(fs *fragState, mbr fragmeta.MBR) bool {
	if fs.hasTS {
		return false
	}
	if r.arr.Schema.AllowsDups {
		return true
	}
	for _, older := range r.frags[:len(r.frags)-1] {
		if r.mayMeet(older, mbr) {
			return false
		}
	}
	return true
}

// TileStats reads the statistics of tile t of fragment f, in the form
// eval.Program.MayMatch takes.
func TileStats(f *tdbarray.Fragment, t, cells uint64) func(string) (eval.Stats, bool, error) {
	return func(name string) (eval.Stats, bool, error) {
		var mi int
		if d := f.Schema.DimensionIndex(name); d >= 0 {
			mi = f.Layout.DimIndex(d)
		} else if a := f.Schema.AttributeIndex(name); a >= 0 {
			mi = f.Layout.AttrIndex(a)
		} else {
			return eval.Stats{}, false, nil
		}
		st := eval.Stats{Cells: cells}
		lo, ok1, err := f.Meta.TileMin(mi, t)
		if err != nil {
			return st, false, err
		}
		hi, ok2, err := f.Meta.TileMax(mi, t)
		if err != nil {
			return st, false, err
		}
		if !ok1 || !ok2 {
			// TileDB keeps no statistics for this field (e.g. UTF-8
			// strings): its null counts are zeros, not counts.
			return st, false, nil
		}
		st.Min, st.Max = lo, hi
		if nc, ok, err := f.Meta.TileNullCount(mi, t); err != nil {
			return st, false, err
		} else if ok {
			st.NullCount, st.HasNullCount = nc, true
		}
		return st, true, nil
	}
}

// answerFromStats offers the tiles that need no reading to stats (see
// Input.Stats) and drops those it takes.
func (r *Reader) answerFromStats(stats func(*tdbarray.Fragment, uint64, uint64) (bool, error)) error {
	for _, fs := range r.frags {
		if len(fs.conds) > 0 || fs.hasTS || fs.hasDelMeta {
			continue
		}
		kept := fs.jobs[:0]
		for _, j := range fs.jobs {
			if j.all && r.alone(fs, j.mbr) {
				took, err := stats(fs.f, j.tile, j.cells)
				if err != nil {
					return dataLoss(fmt.Errorf("array %s: fragment %s: tile %d: %w", r.arr.Dir, fs.f.Name, j.tile, err))
				}
				if took {
					continue
				}
			}
			kept = append(kept, j)
		}
		fs.jobs = kept
	}
	return nil
}

// alone reports whether no other fragment meets the MBR, so that the
// tile's cells neither hide nor are hidden by other versions (or the
// array allows duplicates and nothing is hidden).
func (r *Reader) alone(fs *fragState, mbr fragmeta.MBR) bool {
	if r.arr.Schema.AllowsDups {
		return true
	}
	for _, o := range r.frags {
		if o != fs && r.mayMeet(o, mbr) {
			return false
		}
	}
	return true
}

// mayMeet reports whether fragment o may hold cells inside mbr: its
// non-empty domain meets mbr on every dimension, or is not known.
func (r *Reader) mayMeet(o *fragState, mbr fragmeta.MBR) bool {
	ned := o.f.Meta.Footer().NonEmptyDomain
	if len(ned) != len(r.dims) {
		return true
	}
	for d, di := range r.dims {
		if !di.rangesMeet(mbr[d], ned[d]) {
			return false
		}
	}
	return true
}
