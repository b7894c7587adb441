package writer

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/tileflight/tileflight/errkind"
	"github.com/tileflight/tileflight/format/names"
	"github.com/tileflight/tileflight/format/schema"
	"github.com/tileflight/tileflight/storage"
	"github.com/tileflight/tileflight/storage/errorfs"
)

// batchCols is batch k of a streamed sparse write: n cells on the
// band x = 10k + i/10 (+ shift), y = i: distinct across batches when
// shift is 0, batchCols(k, n, -10j) repeats batch j's coordinates.
func batchCols(k, n int, shift int) map[string]Column {
	var xs, ys, vs []int64
	var ss []string
	for i := 0; i < n; i++ {
		xs = append(xs, int64((10*k+i/10+shift)%1000))
		ys = append(ys, int64(i%1000))
		vs = append(vs, int64(k*1000+i))
		ss = append(ss, fmt.Sprint("k", k, "i", i))
	}
	return map[string]Column{
		"x": {Data: i64s(xs...)}, "y": {Data: i64s(ys...)},
		"v": {Data: i64s(vs...), Validity: ones(n)}, "s": strs(ss...),
	}
}

func fragmentsOf(t *testing.T, st storage.Store, dir string) []string {
	t.Helper()
	ents, err := st.List(context.Background(), storage.Join(dir, names.FragmentsDir))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		out = append(out, e.Name)
	}
	return out
}

func TestSparseWriterFragments(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		name     string
		maxBytes int64
		batches  int
		wantFrag int
	}{
		{"one fragment", 0, 4, 1},
		{"fragment per batch", 1, 4, 4},
		{"two batches per fragment", 2500, 6, 3},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			st := storage.NewMem()
			s := mustCreate(t, st, "a", sparseJSON)
			w, err := NewSparseWriter(ctx, st, "a", s, Options{Timestamp: 7, MaxFragmentBytes: c.maxBytes})
			if err != nil {
				t.Fatal(err)
			}
			defer w.Abort()
			for k := 0; k < c.batches; k++ {
				if err := w.AppendColumns(batchCols(k, 40, 0)); err != nil {
					t.Fatal(err)
				}
			}
			if got := commitsOf(t, st, "a"); len(got) != 0 {
				t.Fatalf("visible before Commit: %v", got)
			}
			res, err := w.Commit()
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Fragments) != c.wantFrag || res.Rows != int64(40*c.batches) {
				t.Fatalf("result %+v, want %d fragments", res, c.wantFrag)
			}
			wantExt := names.ExtWrite
			if c.wantFrag > 1 {
				wantExt = names.ExtCon
			}
			if cm := commitsOf(t, st, "a"); len(cm) != 1 || !strings.HasSuffix(cm[0], wantExt) {
				t.Fatalf("commits %v", cm)
			}
			if f := fragmentsOf(t, st, "a"); len(f) != c.wantFrag {
				t.Fatalf("fragments %v", f)
			}
			if err := w.Abort(); err != nil || len(fragmentsOf(t, st, "a")) != c.wantFrag {
				t.Fatalf("Abort after Commit: %v", err)
			}
			if err := w.AppendColumns(batchCols(9, 1, 0)); !errors.Is(err, errkind.InvalidArgument) {
				t.Fatalf("Append after Commit: %v", err)
			}
		})
	}
}

// Duplicates are refused wherever they sit: within a batch, across
// batches of one fragment, across fragments (found at Commit), and
// nothing is left behind.
func TestSparseWriterDuplicates(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		name     string
		maxBytes int64
		second   map[string]Column
		dupsOK   bool
		failAt   string // "append" or "commit"; "" = no failure
	}{
		{"same fragment", 0, batchCols(0, 5, 0), false, "commit"},
		{"across fragments", 1, batchCols(3, 40, -20), false, "commit"},
		{"across fragments, far tiles", 1, batchCols(0, 1, 0), false, "commit"},
		{"disjoint fragments", 1, batchCols(5, 40, 0), false, ""},
		{"duplicates allowed", 1, batchCols(3, 40, -20), true, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			st := storage.NewMem()
			js := sparseJSON
			if c.dupsOK {
				js = strings.Replace(js, `"capacity": 4,`, `"capacity": 4, "allows_duplicates": true,`, 1)
			}
			s := mustCreate(t, st, "a", js)
			w, err := NewSparseWriter(ctx, st, "a", s, Options{MaxFragmentBytes: c.maxBytes})
			if err != nil {
				t.Fatal(err)
			}
			for _, b := range []map[string]Column{batchCols(0, 40, 0), batchCols(1, 40, 0), c.second} {
				if err := w.AppendColumns(b); err != nil {
					t.Fatal(err)
				}
			}
			_, err = w.Commit()
			if c.failAt == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if !errors.Is(err, errkind.InvalidArgument) || !strings.Contains(err.Error(), "duplicate coordinates") {
				t.Fatalf("got %v", err)
			}
			if c.maxBytes == 1 && !strings.Contains(err.Error(), "in fragments") {
				t.Fatalf("not found across fragments: %v", err)
			}
			if f, cm := fragmentsOf(t, st, "a"), commitsOf(t, st, "a"); len(f)+len(cm) != 0 {
				t.Fatalf("left %v %v", f, cm)
			}
		})
	}
}

func TestDenseWriter(t *testing.T) {
	ctx := context.Background()
	sub := [][2]int64{{2, 19}, {1, 12}} // 18 x 12, tiles of 4 rows
	cols := denseCols(18 * 12)
	for _, c := range []struct {
		name     string
		layout   schema.Layout
		batch    int
		maxBytes int64
		want     int
	}{
		{"one fragment", schema.RowMajor, 50, 0, 1},
		{"band per fragment", schema.RowMajor, 7, 1, 5},
		{"col-major bands", schema.ColMajor, 13, 1, 3},
		{"bands grouped", schema.RowMajor, 24, 700, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			st := storage.NewMem()
			s := mustCreate(t, st, "a", denseJSON)
			w, err := NewDenseWriter(ctx, st, "a", s, sub, c.layout, Options{MaxFragmentBytes: c.maxBytes})
			if err != nil {
				t.Fatal(err)
			}
			for lo := 0; lo < 18*12; lo += c.batch {
				hi := min(lo+c.batch, 18*12)
				if err := w.AppendColumns(sliceCols(s, cols, lo, hi)); err != nil {
					t.Fatal(err)
				}
			}
			res, err := w.Commit()
			if err != nil {
				t.Fatal(err)
			}
			if (c.want > 0 && len(res.Fragments) != c.want) || (c.want == 0 && len(res.Fragments) < 2) || res.Rows != 18*12 {
				t.Fatalf("result %+v, want %d fragments", res, c.want)
			}
		})
	}
	// Row counts are checked: too many at Append, too few at Commit.
	st := storage.NewMem()
	s := mustCreate(t, st, "a", denseJSON)
	w, _ := NewDenseWriter(ctx, st, "a", s, sub, schema.RowMajor, Options{MaxFragmentBytes: 1})
	if err := w.AppendColumns(sliceCols(s, cols, 0, 100)); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Commit(); !errors.Is(err, errkind.InvalidArgument) {
		t.Fatalf("short write: %v", err)
	}
	if f := fragmentsOf(t, st, "a"); len(f) != 0 {
		t.Fatalf("short write left %v", f)
	}
	w, _ = NewDenseWriter(ctx, st, "a", s, sub, schema.RowMajor, Options{})
	if err := w.AppendColumns(denseCols(18*12 + 1)); !errors.Is(err, errkind.InvalidArgument) {
		t.Fatalf("long write: %v", err)
	}
}

// sliceCols cuts rows [a, b) out of whole columns.
func sliceCols(s *schema.ArraySchema, cols map[string]Column, a, b int) map[string]Column {
	out := map[string]Column{}
	for name, c := range cols {
		f, _ := s.FieldByName(name)
		var r Column
		if f.CellValNum == schema.VarNum {
			h, _ := splitConcat([]map[string]Column{{name: c}}, name, true, 0, b)
			_, r = splitConcat([]map[string]Column{{name: h}}, name, true, 0, a)
		} else {
			cz := int(f.CellSize())
			r.Data = c.Data[a*cz : b*cz]
		}
		if c.Validity != nil {
			r.Validity = c.Validity[a:b]
		}
		out[name] = r
	}
	return out
}

// TestStreamFailEveryStep fails each mutating store operation of a
// multi-fragment streaming write in turn: the write reports the error,
// no new commit appears, the earlier write is untouched, and the new
// fragments are deleted. A commit Put that lands but reports failure
// keeps the whole write.
func TestStreamFailEveryStep(t *testing.T) {
	ctx := context.Background()
	sub := [][2]int64{{1, 20}, {1, 12}}
	writes := []struct {
		name string
		js   string
		do   func(st storage.Store, s *schema.ArraySchema, ts uint64) error
	}{
		{"sparse", sparseJSON, func(st storage.Store, s *schema.ArraySchema, ts uint64) error {
			w, err := NewSparseWriter(ctx, st, "a", s, Options{Timestamp: ts, MaxFragmentBytes: 1500})
			if err != nil {
				return err
			}
			defer w.Abort()
			for k := 0; k < 4; k++ {
				if err := w.AppendColumns(batchCols(k+int(ts)*5, 30, 0)); err != nil {
					return err
				}
			}
			_, err = w.Commit()
			return err
		}},
		{"dense", denseJSON, func(st storage.Store, s *schema.ArraySchema, ts uint64) error {
			w, err := NewDenseWriter(ctx, st, "a", s, sub, schema.RowMajor, Options{Timestamp: ts, MaxFragmentBytes: 600})
			if err != nil {
				return err
			}
			defer w.Abort()
			cols := denseCols(240)
			for lo := 0; lo < 240; lo += 50 {
				if err := w.AppendColumns(sliceCols(s, cols, lo, min(lo+50, 240))); err != nil {
					return err
				}
			}
			_, err = w.Commit()
			return err
		}},
		{"dense-pipeline", denseFixedJSON, func(st storage.Store, s *schema.ArraySchema, ts uint64) error {
			w, err := NewDenseWriter(ctx, st, "a", s, sub, schema.RowMajor, Options{Timestamp: ts, MaxFragmentBytes: 600})
			if err != nil {
				return err
			}
			defer w.Abort()
			cols := fixedCols(240)
			for lo := 0; lo < 240; lo += 50 {
				if err := w.AppendColumns(sliceCols(s, cols, lo, min(lo+50, 240))); err != nil {
					return err
				}
			}
			_, err = w.Commit()
			return err
		}},
	}
	for _, w := range writes {
		t.Run(w.name, func(t *testing.T) {
			mem := storage.NewMem()
			s := mustCreate(t, mem, "a", w.js)
			if err := w.do(mem, s, 1); err != nil {
				t.Fatal(err)
			}
			probe := errorfs.Wrap(mem, nil)
			if err := w.do(probe, s, 2); err != nil {
				t.Fatal(err)
			}
			steps := probe.MutatingOps()
			if cm := commitsOf(t, mem, "a"); len(cm) != 2 || !strings.HasSuffix(cm[1], names.ExtCon) {
				t.Fatalf("the probe write is not multi-fragment: %v", cm)
			}
			for _, late := range []bool{false, true} {
				for i := int64(0); i < steps; i++ {
					mem := storage.NewMem()
					s := mustCreate(t, mem, "a", w.js)
					if err := w.do(mem, s, 1); err != nil {
						t.Fatal(err)
					}
					before := listAll(t, mem, "a")
					snap := snapshot(t, mem, "a")
					goodCommits := commitsOf(t, mem, "a")
					var inj errorfs.Injector = errorfs.FailNth(i, errorfs.Mutating)
					if late {
						inj = errorfs.Late(inj)
					}
					err := w.do(errorfs.Wrap(mem, inj), s, 2)
					if !errors.Is(err, errorfs.ErrInjected) {
						t.Fatalf("step %d (late %v): got %v", i, late, err)
					}
					cm := commitsOf(t, mem, "a")
					if late && i == steps-1 {
						// The commit landed though its Put failed: the
						// write is whole, every fragment it names kept.
						if len(cm) != 2 {
							t.Fatalf("late commit failure: commits %v", cm)
						}
						continue
					}
					if fmt.Sprint(cm) != fmt.Sprint(goodCommits) {
						t.Fatalf("step %d (late %v): commits %v, want %v", i, late, cm, goodCommits)
					}
					requireKept(t, mem, snap, fmt.Sprintf("step %d", i))
					// The failed write's fragments are deleted, unless the
					// commit itself failed: it might have landed.
					if after := listAll(t, mem, "a"); len(after) != len(before) && i != steps-1 {
						t.Fatalf("step %d (late %v): leftovers: %v", i, late, after)
					}
				}
			}
		})
	}
}
