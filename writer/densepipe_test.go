package writer

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/tileflight/tileflight/errkind"
	"github.com/tileflight/tileflight/format/names"
	"github.com/tileflight/tileflight/format/schema"
	"github.com/tileflight/tileflight/storage"
	"github.com/tileflight/tileflight/storage/errorfs"
)

// denseFixedJSON has only fixed-size attributes, so its streaming writes
// take the tile pipeline (densepipe.go): a filtered one, a nullable one
// and one of three values per cell.
const denseFixedJSON = `{"type": "dense",
 "dimensions": [{"name": "r", "type": "int32", "domain": [1, 20], "tile": 4},
                {"name": "c", "type": "int32", "domain": [1, 12], "tile": 5}],
 "attributes": [{"name": "a", "type": "int32", "filters": [{"name": "zstd", "level": 1}]},
                {"name": "f", "type": "float64", "nullable": true},
                {"name": "t", "type": "uint8", "cell_val_num": 3}]}`

func fixedCols(n int) map[string]Column {
	a := make([]byte, 4*n)
	f := make([]byte, 8*n)
	tt := make([]byte, 3*n)
	valid := make([]byte, n)
	for i := 0; i < n; i++ {
		binary.LittleEndian.PutUint32(a[4*i:], uint32(int32(i*3-7)))
		binary.LittleEndian.PutUint64(f[8*i:], math.Float64bits(float64(i)*0.5-3))
		tt[3*i], tt[3*i+1], tt[3*i+2] = byte(i), byte(i>>8), byte(i*7)
		if i%4 != 0 {
			valid[i] = 1
		}
	}
	return map[string]Column{"a": {Data: a}, "f": {Data: f, Validity: valid}, "t": {Data: tt}}
}

// pipeWrite writes cols through a DenseWriter, cut into batches at cuts
// (cell indexes, increasing).
func pipeWrite(t testing.TB, st storage.Store, s *schema.ArraySchema, sub [][2]int64, layout schema.Layout, cols map[string]Column, n int, cuts []int, opt Options) (*Result, error) {
	t.Helper()
	w, err := NewDenseWriter(context.Background(), st, "a", s, sub, layout, opt)
	if err != nil {
		return nil, err
	}
	defer w.Abort()
	if w.w.pipe == nil {
		t.Fatal("the fixed-size dense write did not take the tile pipeline")
	}
	lo := 0
	for _, hi := range append(cuts, n) {
		if hi <= lo || hi > n {
			continue
		}
		if err := w.AppendColumns(sliceCols(s, cols, lo, hi)); err != nil {
			return nil, err
		}
		lo = hi
	}
	return w.Commit()
}

// emptyCopy is a new store holding what st holds under "a" (the schema):
// a write into either then names the same schema file.
func emptyCopy(t testing.TB, st storage.Store) storage.Store {
	t.Helper()
	out := storage.NewMem()
	for _, k := range listAll(t.(*testing.T), st, "a") {
		b, err := st.Get(context.Background(), k)
		if err != nil {
			t.Fatal(err)
		}
		if err := out.Put(context.Background(), k, b); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// fragmentFiles maps each file of the array's only fragment (by its name
// inside the fragment directory) to its bytes.
func fragmentFiles(t testing.TB, st storage.Store) map[string][]byte {
	t.Helper()
	frags := fragmentsOf(t.(*testing.T), st, "a")
	if len(frags) != 1 {
		t.Fatalf("%d fragments, want 1", len(frags))
	}
	out := map[string][]byte{}
	dir := storage.Join("a", names.FragmentsDir, frags[0])
	for _, k := range listAll(t.(*testing.T), st, dir) {
		b, err := st.Get(context.Background(), k)
		if err != nil {
			t.Fatal(err)
		}
		out[strings.TrimPrefix(k, dir+"/")] = b
	}
	return out
}

// TestDensePipelineMatchesOneShot: whatever the batches, the pipeline's
// fragment is byte for byte the one-shot writer's (WriteDense builds the
// tiles from the whole input at once), in both input layouts and for
// subarrays that cut tiles on every side.
func TestDensePipelineMatchesOneShot(t *testing.T) {
	subs := [][][2]int64{
		{{1, 20}, {1, 12}},
		{{2, 19}, {1, 12}},
		{{3, 17}, {2, 11}},
		{{5, 5}, {7, 7}},
		{{1, 20}, {1, 5}}, // one run per tile: batches holding whole tiles are filtered in place
		{{3, 20}, {6, 10}},
	}
	for _, sub := range subs {
		n := int((sub[0][1] - sub[0][0] + 1) * (sub[1][1] - sub[1][0] + 1))
		cols := fixedCols(n)
		for _, layout := range []schema.Layout{schema.RowMajor, schema.ColMajor} {
			oneShot := storage.NewMem()
			s := mustCreate(t, oneShot, "a", denseFixedJSON)
			empty := emptyCopy(t, oneShot)
			if _, err := WriteDense(context.Background(), oneShot, "a", s, sub, layout, cols, Options{Timestamp: 5}); err != nil {
				t.Fatal(err)
			}
			want := fragmentFiles(t, oneShot)
			for _, batch := range []int{1, 7, 37, n} {
				t.Run(fmt.Sprintf("%v/%s/batch%d", sub, layout, batch), func(t *testing.T) {
					var cuts []int
					for c := batch; c < n; c += batch {
						cuts = append(cuts, c)
					}
					st := emptyCopy(t, empty)
					res, err := pipeWrite(t, st, s, sub, layout, cols, n, cuts, Options{Timestamp: 5, Concurrency: 3})
					if err != nil {
						t.Fatal(err)
					}
					if len(res.Fragments) != 1 || res.Rows != int64(n) {
						t.Fatalf("result %+v", res)
					}
					got := fragmentFiles(t, st)
					if len(got) != len(want) {
						t.Fatalf("files %v, want %v", keys(got), keys(want))
					}
					for k, b := range want {
						if !bytes.Equal(got[k], b) {
							t.Fatalf("file %s differs from the one-shot write's", k)
						}
					}
				})
			}
		}
	}
}

func keys(m map[string][]byte) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// TestDensePipelineFragments: a small fragment budget cuts one fragment
// per band of tiles along the slowest input dimension; every cell reads
// back as the one-shot write's.
func TestDensePipelineFragments(t *testing.T) {
	sub := [][2]int64{{2, 19}, {1, 12}} // 18 x 12: row bands 2-4, 5-8, ..., 17-19
	n := 18 * 12
	cols := fixedCols(n)
	for _, c := range []struct {
		name     string
		layout   schema.Layout
		maxBytes int64
		frags    int
	}{
		{"band per fragment", schema.RowMajor, 1, 5},
		{"two bands per fragment", schema.RowMajor, 2 * 4 * 12 * 20, 3},
		{"col-major bands", schema.ColMajor, 1, 3},
	} {
		t.Run(c.name, func(t *testing.T) {
			oneShot := storage.NewMem()
			s := mustCreate(t, oneShot, "a", denseFixedJSON)
			st := emptyCopy(t, oneShot)
			if _, err := WriteDense(context.Background(), oneShot, "a", s, sub, c.layout, cols, Options{Timestamp: 5}); err != nil {
				t.Fatal(err)
			}
			res, err := pipeWrite(t, st, s, sub, c.layout, cols, n, []int{1, 2, 30, 31, 100, 101, 102}, Options{Timestamp: 5, MaxFragmentBytes: c.maxBytes})
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Fragments) != c.frags {
				t.Fatalf("%d fragments, want %d", len(res.Fragments), c.frags)
			}
			if cm := commitsOf(t, st, "a"); len(cm) != 1 || !strings.HasSuffix(cm[0], names.ExtCon) {
				t.Fatalf("commits %v: want one .con naming every fragment", cm)
			}
			if got, want := readRows(t, st, "a", nil), readRows(t, oneShot, "a", nil); !slices.Equal(got, want) {
				t.Fatalf("read back %d cells differing from the one-shot write's %d", len(got), len(want))
			}
		})
	}
}

// TestDensePipelineErrors: bad row counts are refused as on the buffered
// path, and a failing store fails the write, leaves nothing, and stops
// the pipeline's goroutines.
func TestDensePipelineErrors(t *testing.T) {
	ctx := context.Background()
	sub := [][2]int64{{1, 20}, {1, 12}}
	n := 240
	cols := fixedCols(n)
	st := storage.NewMem()
	s := mustCreate(t, st, "a", denseFixedJSON)
	base := runtime.NumGoroutine()

	w, _ := NewDenseWriter(ctx, st, "a", s, sub, schema.RowMajor, Options{MaxFragmentBytes: 1})
	if err := w.AppendColumns(sliceCols(s, cols, 0, 100)); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Commit(); !errors.Is(err, errkind.InvalidArgument) {
		t.Fatalf("short write: %v", err)
	}
	w, _ = NewDenseWriter(ctx, st, "a", s, sub, schema.RowMajor, Options{})
	if err := w.AppendColumns(fixedCols(n + 1)); !errors.Is(err, errkind.InvalidArgument) {
		t.Fatalf("long write: %v", err)
	}
	// Aborted half way, with fragments already stored.
	w, _ = NewDenseWriter(ctx, st, "a", s, sub, schema.RowMajor, Options{MaxFragmentBytes: 1})
	for lo := 0; lo < 200; lo += 24 {
		if err := w.AppendColumns(sliceCols(s, cols, lo, lo+24)); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Abort(); err != nil {
		t.Fatal(err)
	}
	if f := fragmentsOf(t, st, "a"); len(f) != 0 {
		t.Fatalf("left %v", f)
	}
	// A store failing every Put.
	bad := errorfs.Wrap(st, errorfs.FailNth(0, errorfs.Mutating))
	_, err := pipeWrite(t, bad, s, sub, schema.RowMajor, cols, n, []int{10, 20, 100}, Options{MaxFragmentBytes: 1})
	if !errors.Is(err, errorfs.ErrInjected) {
		t.Fatalf("failing store: %v", err)
	}
	if f, cm := fragmentsOf(t, st, "a"), commitsOf(t, st, "a"); len(f)+len(cm) != 0 {
		t.Fatalf("left %v %v", f, cm)
	}
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > base && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if g := runtime.NumGoroutine(); g > base {
		t.Fatalf("%d goroutines left running (%d before)", g, base)
	}
}

// TestGatherTileInPlace: a tile that is one contiguous run inside one
// batch is filtered from the batch's own memory; one straddling two
// batches is gathered into scratch.
func TestGatherTileInPlace(t *testing.T) {
	in := make([]byte, 8*100)
	for i := range in {
		in[i] = byte(i)
	}
	segs := []inSeg{
		{lo: 0, hi: 60, data: [][]byte{in[:8*60]}},
		{lo: 60, hi: 100, data: [][]byte{in[8*60:]}},
	}
	var buf []byte
	inside := spaceTile{runs: []run{{tpos: 0, ipos: 10, n: 20}}, step: 1, full: true}
	got := gatherTile(&buf, segs, 0, false, 8, &inside, 0, 20)
	if unsafe.SliceData(got) != &in[80] || len(got) != 160 {
		t.Fatal("a tile inside one batch was copied")
	}
	across := spaceTile{runs: []run{{tpos: 0, ipos: 50, n: 20}}, step: 1, full: true}
	got = gatherTile(&buf, segs, 0, false, 8, &across, 0, 20)
	if !bytes.Equal(got, in[8*50:8*70]) || unsafe.SliceData(got) == &in[400] {
		t.Fatal("a tile across two batches is not gathered")
	}
	// Whole rows of a row-major input: one run per row, contiguous.
	rows := spaceTile{runs: []run{{tpos: 0, ipos: 20, n: 5}, {tpos: 5, ipos: 25, n: 5}, {tpos: 10, ipos: 30, n: 5}}, step: 1, full: true}
	got = gatherTile(&buf, segs, 0, false, 8, &rows, 0, 15)
	if unsafe.SliceData(got) != &in[160] || len(got) != 120 {
		t.Fatal("a tile of whole rows inside one batch was copied")
	}
	// Strided (col-major input into row-major tiles), across the cut,
	// with a gap the subarray does not cover.
	strided := spaceTile{runs: []run{{tpos: 1, ipos: 55, n: 3}}, step: 4}
	got = gatherTile(&buf, segs, 0, false, 8, &strided, 0, 5)
	want := slices.Concat(make([]byte, 8), in[8*55:8*56], in[8*59:8*60], in[8*63:8*64], make([]byte, 8))
	if !bytes.Equal(got, want) {
		t.Fatalf("strided gather %v, want %v", got, want)
	}
}

// FuzzDensePipeline cuts the input into batches anywhere and checks the
// pipeline's fragment against the one-shot writer's, byte for byte.
func FuzzDensePipeline(f *testing.F) {
	f.Add(uint8(0), uint8(19), uint8(0), uint8(11), false, []byte{5, 17, 1})
	f.Add(uint8(2), uint8(9), uint8(3), uint8(4), true, []byte{1, 1, 1, 200})
	f.Fuzz(func(t *testing.T, r0, r1, c0, c1 uint8, colMajor bool, cutBytes []byte) {
		rl, rh := int64(r0%20)+1, int64(r1%20)+1
		cl, ch := int64(c0%12)+1, int64(c1%12)+1
		if rl > rh || cl > ch || len(cutBytes) > 64 {
			return
		}
		sub := [][2]int64{{rl, rh}, {cl, ch}}
		layout := schema.RowMajor
		if colMajor {
			layout = schema.ColMajor
		}
		n := int((rh - rl + 1) * (ch - cl + 1))
		var cuts []int
		c := 0
		for _, b := range cutBytes {
			c += int(b)
			cuts = append(cuts, c)
		}
		cols := fixedCols(n)
		oneShot := storage.NewMem()
		s := mustCreate(t, oneShot, "a", denseFixedJSON)
		st := emptyCopy(t, oneShot)
		if _, err := WriteDense(context.Background(), oneShot, "a", s, sub, layout, cols, Options{Timestamp: 5}); err != nil {
			t.Fatal(err)
		}
		if _, err := pipeWrite(t, st, s, sub, layout, cols, n, cuts, Options{Timestamp: 5}); err != nil {
			t.Fatal(err)
		}
		want, got := fragmentFiles(t, oneShot), fragmentFiles(t, st)
		for k, b := range want {
			if !bytes.Equal(got[k], b) {
				t.Fatalf("file %s differs from the one-shot write's", k)
			}
		}
	})
}

// denseBigJSON has tiles of whole rows spanning several 64 KiB chunks,
// so that input batches cut tiles and chunks alike; "s" holds values
// whose sum saturates (its stats cannot be taken piece by piece).
const denseBigJSON = `{"type": "dense",
 "dimensions": [{"name": "r", "type": "int64", "domain": [1, 40], "tile": 20},
                {"name": "c", "type": "int64", "domain": [1, 1000], "tile": 1000}],
 "attributes": [{"name": "i", "type": "int64", "filters": [{"name": "zstd", "level": 1}]},
                {"name": "s", "type": "int64", "filters": [{"name": "lz4"}]},
                {"name": "f", "type": "float64"},
                {"name": "u", "type": "uint16", "filters": [{"name": "zstd", "level": 1}]},
                {"name": "g", "type": "float32", "cell_val_num": 2}]}`

func bigCols(n int) map[string]Column {
	i, s, f := make([]byte, 8*n), make([]byte, 8*n), make([]byte, 8*n)
	u, g := make([]byte, 2*n), make([]byte, 8*n)
	for k := 0; k < n; k++ {
		binary.LittleEndian.PutUint64(i[8*k:], uint64(int64(k*k%1000-300)))
		binary.LittleEndian.PutUint64(s[8*k:], uint64(math.MaxInt64-int64(k%5)))
		binary.LittleEndian.PutUint64(f[8*k:], math.Float64bits(float64(k)*0.1-7))
		binary.LittleEndian.PutUint16(u[2*k:], uint16(k*31))
		binary.LittleEndian.PutUint32(g[8*k:], math.Float32bits(float32(k)))
		binary.LittleEndian.PutUint32(g[8*k+4:], math.Float32bits(-float32(k)))
	}
	return map[string]Column{"i": {Data: i}, "s": {Data: s}, "f": {Data: f}, "u": {Data: u}, "g": {Data: g}}
}

// TestDensePipelineTilesAcrossBatches: tiles of several chunks whose
// cells arrive in several batches (filtered from the batches' pieces,
// chunks straddling a cut copied) give the one-shot writer's fragment
// byte for byte, statistics included, for cuts on and off chunk
// boundaries.
func TestDensePipelineTilesAcrossBatches(t *testing.T) {
	sub := [][2]int64{{1, 40}, {1, 1000}}
	n := 40 * 1000
	cols := bigCols(n)
	oneShot := storage.NewMem()
	s := mustCreate(t, oneShot, "a", denseBigJSON)
	empty := emptyCopy(t, oneShot)
	if _, err := WriteDense(context.Background(), oneShot, "a", s, sub, schema.RowMajor, cols, Options{Timestamp: 5}); err != nil {
		t.Fatal(err)
	}
	want := fragmentFiles(t, oneShot)
	for _, batch := range []int{7919, 8192, 10000, 19999, 20001} {
		t.Run(fmt.Sprintf("batch%d", batch), func(t *testing.T) {
			var cuts []int
			for c := batch; c < n; c += batch {
				cuts = append(cuts, c)
			}
			st := emptyCopy(t, empty)
			if _, err := pipeWrite(t, st, s, sub, schema.RowMajor, cols, n, cuts, Options{Timestamp: 5}); err != nil {
				t.Fatal(err)
			}
			got := fragmentFiles(t, st)
			if len(got) != len(want) {
				t.Fatalf("files %v, want %v", keys(got), keys(want))
			}
			for k, b := range want {
				if !bytes.Equal(got[k], b) {
					t.Fatalf("file %s differs from the one-shot write's", k)
				}
			}
		})
	}
}

// TestSpanParts: a tile of consecutive cells across batches is handed
// over as the batches' own pieces; inside one batch, strided, nullable
// or var-sized it is not split.
func TestSpanParts(t *testing.T) {
	in := make([]byte, 8*100)
	segs := []inSeg{
		{lo: 0, hi: 60, data: [][]byte{in[:8*60]}},
		{lo: 60, hi: 70, data: [][]byte{in[8*60 : 8*70]}},
		{lo: 70, hi: 100, data: [][]byte{in[8*70:]}},
	}
	fixed := &field{cellSize: 8}
	across := spaceTile{runs: []run{{tpos: 0, ipos: 50, n: 30}}, step: 1, full: true}
	parts := spanParts(segs, 0, fixed, &across, 0, 30)
	if len(parts) != 3 || unsafe.SliceData(parts[0]) != &in[400] || len(parts[0]) != 80 ||
		unsafe.SliceData(parts[1]) != &in[480] || len(parts[1]) != 80 || unsafe.SliceData(parts[2]) != &in[560] || len(parts[2]) != 80 {
		t.Fatalf("parts of a tile across three batches: %d", len(parts))
	}
	inside := spaceTile{runs: []run{{tpos: 0, ipos: 10, n: 20}}, step: 1, full: true}
	strided := spaceTile{runs: []run{{tpos: 0, ipos: 55, n: 10}}, step: 2, full: true}
	for name, c := range map[string]struct {
		f  *field
		st *spaceTile
		n  int
	}{
		"inside":   {fixed, &inside, 20},
		"strided":  {fixed, &strided, 10},
		"nullable": {&field{cellSize: 8, nullable: true}, &across, 30},
		"var":      {&field{cellSize: 8, isVar: true}, &across, 30},
	} {
		if spanParts(segs, 0, c.f, c.st, 0, c.n) != nil {
			t.Errorf("%s: split into parts", name)
		}
	}
}

func TestCellOrder(t *testing.T) {
	for _, c := range []struct {
		slabs [][2]int
		n     int
		want  bool
	}{
		{nil, 10, true},
		{[][2]int{{0, 5}, {5, 10}}, 10, true},
		{[][2]int{{0, 5}, {6, 10}}, 10, false},
		{[][2]int{{5, 10}, {0, 5}}, 10, false},
		{[][2]int{{0, 5}, {5, 9}}, 10, false},
		{[][2]int{{0, 1}, {4, 5}, {1, 2}}, 6, false},
	} {
		if got := cellOrder(c.slabs, c.n); got != c.want {
			t.Errorf("cellOrder(%v, %d) = %v", c.slabs, c.n, got)
		}
	}
}
