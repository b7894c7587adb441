package ndarray_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand"
	"os"
	"path/filepath"
	"sort"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	arrowarray "github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/tileflight/tileflight/arrowconv"
	"github.com/tileflight/tileflight/errkind"
	"github.com/tileflight/tileflight/query"
	"github.com/tileflight/tileflight/reader"
	"github.com/tileflight/tileflight/reader/ndarray"
	"github.com/tileflight/tileflight/storage"
)

// b2ndFixtureDirs: the committed golden subset, plus the full matrix of
// python_tests/gen_b2nd.py with TILEFLIGHT_FIXTURES (make test).
func b2ndFixtureDirs(t *testing.T) []string {
	dirs := []string{filepath.Join("..", "..", "testdata", "b2nd")}
	if env := os.Getenv("TILEFLIGHT_FIXTURES"); env != "" {
		d := filepath.Join(env, "b2nd")
		if _, err := os.Stat(filepath.Join(d, "index.json")); err != nil {
			t.Fatalf("TILEFLIGHT_FIXTURES=%s but %s/index.json is missing (make fixtures)", env, d)
		}
		dirs = append(dirs, d)
	}
	return dirs
}

type b2ndCase struct {
	Case          string  `json:"case"`
	Shape         []int64 `json:"shape"`
	Chunks        []int64 `json:"chunks"`
	Blocks        []int64 `json:"blocks"`
	SkipUnwritten bool    `json:"skip_unwritten"`
}

func readAllRecords(t *testing.T, r *reader.Reader) []arrow.Array {
	t.Helper()
	ctx := context.Background()
	var parts [][]arrow.Array
	for {
		rec, err := r.Next(ctx)
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if int(rec.NumRows()) > r.Plan().BatchRows {
			t.Fatalf("batch of %d rows, batch_rows %d", rec.NumRows(), r.Plan().BatchRows)
		}
		cols := make([]arrow.Array, rec.NumCols())
		for i := range cols {
			cols[i] = rec.Column(i)
			cols[i].Retain()
		}
		parts = append(parts, cols)
		rec.Release()
	}
	out := make([]arrow.Array, len(r.Schema().Fields()))
	for i := range out {
		var cs []arrow.Array
		for _, p := range parts {
			cs = append(cs, p[i])
		}
		if len(cs) == 0 {
			out[i] = arrowarray.MakeArrayOfNull(memory.DefaultAllocator, r.Schema().Field(i).Type, 0)
			continue
		}
		c, err := arrowarray.Concatenate(cs, memory.DefaultAllocator)
		if err != nil {
			t.Fatal(err)
		}
		out[i] = c
	}
	return out
}

// expectedCoords lists the coordinates a query must return, in order.
func expectedCoords(shape, chunks, blocks []int64, rs [][][2]int64, layout query.Layout, limit int) [][]int64 {
	nd := len(shape)
	var out [][]int64
	var rec func(order []int, k int, c []int64)
	rec = func(order []int, k int, c []int64) {
		if k == nd {
			out = append(out, append([]int64(nil), c...))
			return
		}
		d := order[k]
		for _, r := range rs[d] {
			for x := r[0]; x <= r[1]; x++ {
				c[d] = x
				rec(order, k+1, c)
			}
		}
	}
	order := make([]int, nd)
	for i := range order {
		order[i] = i
		if layout == query.LayoutColMajor {
			order[i] = nd - 1 - i
		}
	}
	rec(order, 0, make([]int64, nd))
	if layout == query.LayoutGlobal {
		// Unique cells ordered by chunk, block, then C order in the block.
		seen := map[string]bool{}
		var u [][]int64
		for _, c := range out {
			k := fmt.Sprint(c)
			if !seen[k] {
				seen[k] = true
				u = append(u, c)
			}
		}
		key := func(c []int64) [3][]int64 {
			var ch, bl, in []int64
			for d := range c {
				ch = append(ch, c[d]/chunks[d])
				bl = append(bl, (c[d]%chunks[d])/blocks[d])
				in = append(in, (c[d]%chunks[d])%blocks[d])
			}
			return [3][]int64{ch, bl, in}
		}
		less := func(a, b []int64) int {
			for i := range a {
				if a[i] != b[i] {
					if a[i] < b[i] {
						return -1
					}
					return 1
				}
			}
			return 0
		}
		sort.SliceStable(u, func(i, j int) bool {
			ki, kj := key(u[i]), key(u[j])
			for k := 0; k < 3; k++ {
				if c := less(ki[k], kj[k]); c != 0 {
					return c < 0
				}
			}
			return false
		})
		out = u
	}
	if limit >= 0 && len(out) > limit {
		out = out[:limit]
	}
	return out
}

func TestB2NDFixtureQueries(t *testing.T) {
	ctx := context.Background()
	spans0, direct0 := ndarray.SpanBlocks.Load(), ndarray.DirectReads.Load()
	defer func() {
		// The random boxes must have taken the partial-block path too,
		// and the whole reads the direct one.
		if !t.Failed() && ndarray.SpanBlocks.Load() == spans0 {
			t.Error("no block was decoded by spans")
		}
		t.Logf("direct reads: %d", ndarray.DirectReads.Load()-direct0)
		if !t.Failed() && ndarray.DirectReads.Load() == direct0 {
			t.Error("no read took the direct path")
		}
	}()
	for _, dir := range b2ndFixtureDirs(t) {
		st, err := storage.NewLocal(filepath.Join(dir, "arrays"))
		if err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(filepath.Join(dir, "index.json"))
		if err != nil {
			t.Fatal(err)
		}
		var idx struct{ Cases []b2ndCase }
		if err := json.Unmarshal(b, &idx); err != nil {
			t.Fatal(err)
		}
		for ci, c := range idx.Cases {
			if c.SkipUnwritten {
				continue
			}
			t.Run(c.Case, func(t *testing.T) {
				raw, err := os.ReadFile(filepath.Join(dir, "expect", c.Case+".raw"))
				if err != nil {
					t.Fatal(err)
				}
				name := c.Case + ".b2nd"
				rng := rand.New(rand.NewSource(int64(ci)))
				type qcase struct {
					layout query.Layout
					rs     [][][2]int64
					batch  int
					limit  int
				}
				var qs []qcase
				whole := make([][][2]int64, len(c.Shape))
				for d, n := range c.Shape {
					whole[d] = [][2]int64{{0, n - 1}}
				}
				qs = append(qs, qcase{query.LayoutRowMajor, whole, 0, -1})
				// The direct path (see direct.go): the whole array in
				// small batches, and boxes whose inner ranges lie inside
				// one block, with batches and limits cutting blocks.
				qs = append(qs, qcase{query.LayoutRowMajor, whole, 1 + rng.Intn(7), -1})
				for k := 0; k < 3; k++ {
					rs := make([][][2]int64, len(c.Shape))
					for d, n := range c.Shape {
						lo := rng.Int63n(n)
						hi := lo + rng.Int63n(n-lo)
						if d > 0 && len(c.Blocks) == len(c.Shape) && c.Blocks[d] > 0 && c.Chunks[d] > 0 {
							// inside the block holding lo
							cs, bs := c.Chunks[d], c.Blocks[d]
							bend := min(lo/cs*cs+min((lo%cs/bs+1)*bs, cs), n) - 1
							hi = lo + rng.Int63n(bend-lo+1)
						}
						rs[d] = [][2]int64{{lo, hi}}
					}
					lim := -1
					if k == 2 {
						lim = 1 + rng.Intn(60)
					}
					qs = append(qs, qcase{query.LayoutRowMajor, rs, 1 + rng.Intn(70), lim})
				}
				for _, l := range []query.Layout{query.LayoutRowMajor, query.LayoutColMajor, query.LayoutGlobal} {
					for k := 0; k < 2; k++ {
						rs := make([][][2]int64, len(c.Shape))
						for d, n := range c.Shape {
							for j := 0; j <= rng.Intn(2); j++ {
								lo := rng.Int63n(n)
								hi := lo + rng.Int63n(n-lo)
								rs[d] = append(rs[d], [2]int64{lo, hi})
							}
						}
						lim := -1
						if k == 1 {
							lim = 1 + rng.Intn(40)
						}
						qs = append(qs, qcase{l, rs, 1 + rng.Intn(50), lim})
					}
				}
				// Every query once more with groups of one block-row in
				// the direct path (groups cut across chunks and batches).
				nq := len(qs)
				qs = append(qs, qs...)
				defer func(g int64) { *ndarray.DirectGroupBytes = g }(*ndarray.DirectGroupBytes)
				for qi, qc := range qs {
					*ndarray.DirectGroupBytes = 4 << 20
					if qi >= nq {
						*ndarray.DirectGroupBytes = 1
					}
					q := &query.Query{Array: name, Layout: qc.layout, BatchRows: qc.batch, Limit: int64(qc.limit)}
					if qc.limit < 0 {
						q.Limit = -1
					}
					for d, rs := range qc.rs {
						dr := query.DimRanges{Dim: fmt.Sprintf("dim%d", d)}
						for _, r := range rs {
							dr.Ranges = append(dr.Ranges, query.Range{Lo: query.Value{Num: json.Number(fmt.Sprint(r[0]))}, Hi: query.Value{Num: json.Number(fmt.Sprint(r[1]))}})
						}
						q.Subarray = append(q.Subarray, dr)
					}
					r, err := reader.Open(ctx, st, q, reader.Options{Workers: 2})
					if err != nil {
						t.Fatalf("query %d: %v", qi, err)
					}
					got := readAllRecords(t, r)
					r.Close()
					a := r.Plan().Array.B2ND
					coords := expectedCoords(a.Shape, a.ChunkShape, a.BlockShape, qc.rs, r.Plan().Layout, qc.limit)
					for i, f := range r.Schema().Fields() {
						var want arrow.Array
						if i < len(a.Shape) {
							v := make([]int64, len(coords))
							for k, cc := range coords {
								v[k] = cc[i]
							}
							want = arrowconv.Int64Column(v)
						} else {
							fld := a.Dtype.Fields[i-len(a.Shape)]
							buf := make([]byte, 0, len(coords)*fld.Size)
							for _, cc := range coords {
								var item int64
								for d := range cc {
									item = item*a.Shape[d] + cc[d]
								}
								p := item*int64(a.ItemSize) + int64(fld.Offset)
								buf = append(buf, raw[p:p+int64(fld.Size)]...)
							}
							want, err = arrowconv.B2NDColumn(fld, buf, len(coords))
							if err != nil {
								t.Fatal(err)
							}
						}
						same := arrowarray.ApproxEqual(want, got[i], arrowarray.WithNaNsEqual(true))
						if f.Type.ID() == arrow.FLOAT16 { // ApproxEqual does not see float16 NaNs as equal
							same = want.Len() == got[i].Len() && string(want.Data().Buffers()[1].Bytes()[:2*want.Len()]) == string(got[i].Data().Buffers()[1].Bytes()[2*got[i].Data().Offset():2*(got[i].Data().Offset()+got[i].Len())])
						}
						if !same {
							t.Fatalf("query %d (%s %v batch %d limit %d): column %s differs:\nwant %v\ngot  %v", qi, qc.layout, qc.rs, qc.batch, qc.limit, f.Name, want, got[i])
						}
					}
				}
			})
		}
	}
}

func TestB2NDTimestampRefused(t *testing.T) {
	st, _ := storage.NewLocal(filepath.Join("..", "..", "testdata", "b2nd", "arrays"))
	_, err := reader.Open(context.Background(), st, &query.Query{Array: "g_lef8.b2nd", Timestamp: &query.Timestamp{End: 5}, Limit: -1}, reader.Options{})
	if errkind.Of(err) != errkind.InvalidArgument {
		t.Fatalf("timestamp on a .b2nd: %v, want InvalidArgument", err)
	}
}

// TestB2NDMappedFileTruncated: a contiguous frame truncated by another
// program while a read has it mapped fails the read with DataLoss naming
// the chunk (the fault is recovered), never a crash; the same read of the
// intact file returns every cell.
func TestB2NDMappedFileTruncated(t *testing.T) {
	src, err := os.ReadFile(filepath.Join("..", "..", "testdata", "b2nd", "arrays", "g_lef8.b2nd"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "x.b2nd")
	st, _ := storage.NewLocal(dir)
	q := &query.Query{Array: "x.b2nd", Limit: -1}
	read := func() (int64, error) {
		r, err := reader.Open(context.Background(), st, q, reader.Options{Workers: 2})
		if err != nil {
			return 0, err
		}
		defer r.Close()
		var n int64
		for {
			rec, err := r.Next(context.Background())
			if err == io.EOF {
				return n, nil
			}
			if err != nil {
				return n, err
			}
			n += rec.NumRows()
			rec.Release()
		}
	}
	// The file is truncated once its mapping is made: before the chunks'
	// heads are read from it, or before their blocks are decoded.
	for _, hook := range []struct {
		name string
		at   *func()
	}{{"heads", ndarray.BeforeHead}, {"blocks", ndarray.BeforeDecode}} {
		if err := os.WriteFile(path, src, 0o644); err != nil {
			t.Fatal(err)
		}
		n, err := read()
		if err != nil || n == 0 {
			t.Fatalf("intact read: %d rows, %v", n, err)
		}
		*hook.at = func() {
			if err := os.Truncate(path, 0); err != nil {
				t.Error(err)
			}
		}
		_, err = read()
		*hook.at = nil
		if errkind.Of(err) != errkind.DataLoss {
			t.Fatalf("read of a file truncated under its mapping before the %s: %v, want DataLoss", hook.name, err)
		}
		t.Log(hook.name, err)
	}
}
