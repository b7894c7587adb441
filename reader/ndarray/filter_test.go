package ndarray_test

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	arrowarray "github.com/apache/arrow-go/v18/arrow/array"

	"github.com/tileflight/tileflight/arrowconv"
	"github.com/tileflight/tileflight/b2nd"
	"github.com/tileflight/tileflight/errkind"
	"github.com/tileflight/tileflight/query"
	"github.com/tileflight/tileflight/reader"
	"github.com/tileflight/tileflight/reader/ndarray"
	"github.com/tileflight/tileflight/storage"
)

// b2ndValue decodes one numeric value of f from its raw bytes.
func b2ndValue(f b2nd.Field, v []byte) float64 {
	var bo binary.ByteOrder = binary.LittleEndian
	if f.Big {
		bo = binary.BigEndian
	}
	switch {
	case f.Kind == 'f' && f.Size == 8:
		return math.Float64frombits(bo.Uint64(v))
	case f.Kind == 'f' && f.Size == 4:
		return float64(math.Float32frombits(bo.Uint32(v)))
	case f.Kind == 'i' && f.Size == 4:
		return float64(int32(bo.Uint32(v)))
	case f.Kind == 'i' && f.Size == 2:
		return float64(int16(bo.Uint16(v)))
	case f.Kind == 'u' && f.Size == 2:
		return float64(bo.Uint16(v))
	}
	panic(fmt.Sprintf("kind %c size %d", f.Kind, f.Size))
}

// TestB2NDFilterAggregates checks filters (failing cells come back zero,
// every cell of the subarray is returned) and aggregates over the golden
// fixtures against values computed here from the raw cells.
func TestB2NDFilterAggregates(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join("..", "..", "testdata", "b2nd")
	st, err := storage.NewLocal(filepath.Join(dir, "arrays"))
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		array, field string
		// filter is built from a threshold: the median of the field.
		filter func(med float64) string
		pass   func(c []int64, v, med float64) bool
		sub    [][2]int64 // per dimension; nil: whole
	}{
		{"g_lef8", "value", func(m float64) string { return fmt.Sprintf("value > %v and value < 40", m) },
			func(c []int64, v, m float64) bool { return v > m && v < 40 }, [][2]int64{{2, 11}, {0, 10}}},
		{"g_lef8", "value", func(m float64) string { return fmt.Sprintf("value != %v", m) },
			func(c []int64, v, m float64) bool { return v != m }, nil},
		{"g_lei4", "value", func(m float64) string { return fmt.Sprintf("value <= %d or not value != 30", int64(m)) },
			func(c []int64, v, m float64) bool { return v <= m || v == 30 }, [][2]int64{{1, 6}, {2, 7}, {0, 4}}},
		{"g_bei2", "value", func(m float64) string { return fmt.Sprintf("value < %d", int64(m)) },
			func(c []int64, v, m float64) bool { return v < m }, [][2]int64{{0, 12}, {3, 9}}},
		{"g_structab", "b", func(m float64) string { return fmt.Sprintf("b >= %v", m) },
			func(c []int64, v, m float64) bool { return v >= m }, [][2]int64{{5, 30}}},
		{"g_vlmeta", "value", func(m float64) string { return fmt.Sprintf("value in [%d, 0, 1] or value > %d", int64(m), int64(m)) },
			func(c []int64, v, m float64) bool { return v >= m || v == 0 || v == 1 }, nil},
		{"g_zeros_s", "value", func(float64) string { return "value != 0" },
			func(c []int64, v, m float64) bool { return v != 0 }, [][2]int64{{3, 17}, {0, 29}}},
		{"g_zeros_s", "value", func(float64) string { return "value == 0" },
			func(c []int64, v, m float64) bool { return v == 0 }, nil},
	}
	for ci, tc := range cases {
		t.Run(fmt.Sprintf("%d_%s", ci, tc.array), func(t *testing.T) {
			raw, err := os.ReadFile(filepath.Join(dir, "expect", tc.array+".raw"))
			if err != nil {
				t.Fatal(err)
			}
			a, err := ndarray.OpenB2ND(ctx, st, tc.array+".b2nd")
			if err != nil {
				t.Fatal(err)
			}
			ba := a.B2ND
			var fld b2nd.Field
			for _, f := range ba.Dtype.Fields {
				if f.Name == tc.field {
					fld = f
				}
			}
			val := func(item int64) float64 {
				p := item*int64(ba.ItemSize) + int64(fld.Offset)
				return b2ndValue(fld, raw[p:p+int64(fld.Size)])
			}
			total := int64(1)
			for _, n := range ba.Shape {
				total *= n
			}
			var all []float64
			for i := int64(0); i < total; i++ {
				all = append(all, val(i))
			}
			sort.Float64s(all)
			med := all[len(all)/2]
			sub := tc.sub
			if sub == nil {
				for _, n := range ba.Shape {
					sub = append(sub, [2]int64{0, n - 1})
				}
			}
			rs := make([][][2]int64, len(sub))
			var subq []query.DimRanges
			for d, r := range sub {
				rs[d] = [][2]int64{r}
				subq = append(subq, query.DimRanges{Dim: fmt.Sprintf("dim%d", d), Ranges: []query.Range{{Lo: query.Value{Num: json.Number(fmt.Sprint(r[0]))}, Hi: query.Value{Num: json.Number(fmt.Sprint(r[1]))}}}})
			}
			filter := tc.filter(med)
			// Expected: the cells of the subarray in row-major order, the
			// failing ones zero; aggregates over the passing ones.
			coords := expectedCoords(ba.Shape, ba.ChunkShape, ba.BlockShape, rs, query.LayoutRowMajor, -1)
			buf := make([]byte, 0, len(coords)*fld.Size)
			var sum, mn, mx float64
			npass := 0
			for _, cc := range coords {
				var item int64
				for d := range cc {
					item = item*ba.Shape[d] + cc[d]
				}
				v := val(item)
				if !tc.pass(cc, v, med) {
					buf = append(buf, make([]byte, fld.Size)...)
					continue
				}
				p := item*int64(ba.ItemSize) + int64(fld.Offset)
				buf = append(buf, raw[p:p+int64(fld.Size)]...)
				if npass == 0 || v < mn {
					mn = v
				}
				if npass == 0 || v > mx {
					mx = v
				}
				sum += v
				npass++
			}
			want, err := arrowconv.B2NDColumn(fld, buf, len(coords))
			if err != nil {
				t.Fatal(err)
			}
			for _, batch := range []int{7, 0} {
				q := &query.Query{Array: tc.array + ".b2nd", Columns: []string{tc.field}, Filter: filter, Subarray: subq, Limit: -1, BatchRows: batch}
				r, err := reader.Open(ctx, st, q, reader.Options{Workers: 2})
				if err != nil {
					t.Fatalf("%s: %v", filter, err)
				}
				got := readAllRecords(t, r)
				r.Close()
				if len(got) != 1 || !arrowarray.ApproxEqual(want, got[0], arrowarray.WithNaNsEqual(true)) {
					t.Fatalf("%s: got %v\nwant %v", filter, got, want)
				}
			}
			// Aggregates.
			q := &query.Query{Array: tc.array + ".b2nd", Filter: filter, Subarray: subq, Limit: -1,
				Aggregates: []query.Aggregate{{Op: "sum", Field: tc.field}, {Op: "min", Field: tc.field}, {Op: "max", Field: tc.field},
					{Op: "mean", Field: tc.field}, {Op: "count", Field: "*"}, {Op: "count", Field: tc.field}}}
			r, err := reader.Open(ctx, st, q, reader.Options{Workers: 2})
			if err != nil {
				t.Fatalf("%s: aggregates: %v", filter, err)
			}
			got := readAllRecords(t, r)
			r.Close()
			num := func(a arrow.Array) float64 {
				switch c := a.(type) {
				case *arrowarray.Float64:
					return c.Value(0)
				case *arrowarray.Float32:
					return float64(c.Value(0))
				case *arrowarray.Int64:
					return float64(c.Value(0))
				case *arrowarray.Uint64:
					return float64(c.Value(0))
				case *arrowarray.Int32:
					return float64(c.Value(0))
				case *arrowarray.Int16:
					return float64(c.Value(0))
				case *arrowarray.Uint16:
					return float64(c.Value(0))
				}
				t.Fatalf("column of type %s", a.DataType())
				return 0
			}
			// Without the filter: every cell of the subarray (special chunks
			// taken whole).
			before := ndarray.SpecialChunks.Load()
			qa := &query.Query{Array: tc.array + ".b2nd", Subarray: subq, Limit: -1,
				Aggregates: []query.Aggregate{{Op: "sum", Field: tc.field}, {Op: "min", Field: tc.field}, {Op: "max", Field: tc.field}, {Op: "count", Field: "*"}}}
			ra, err := reader.Open(ctx, st, qa, reader.Options{Workers: 2})
			if err != nil {
				t.Fatal(err)
			}
			gotAll := readAllRecords(t, ra)
			ra.Close()
			var asum float64
			amin, amax := math.Inf(1), math.Inf(-1)
			for _, cc := range coords {
				var item int64
				for d := range cc {
					item = item*ba.Shape[d] + cc[d]
				}
				v := val(item)
				asum += v
				amin, amax = math.Min(amin, v), math.Max(amax, v)
			}
			if tc.array == "g_zeros_s" && ndarray.SpecialChunks.Load() == before {
				t.Errorf("no special chunk was aggregated whole")
			}
			for i, w := range []float64{asum, amin, amax, float64(len(coords))} {
				g := gotAll[i]
				var x float64
				switch c := g.(type) {
				case *arrowarray.Float64:
					x = c.Value(0)
				case *arrowarray.Int64:
					x = float64(c.Value(0))
				case *arrowarray.Uint64:
					x = float64(c.Value(0))
				case *arrowarray.Int32:
					x = float64(c.Value(0))
				case *arrowarray.Int16:
					x = float64(c.Value(0))
				case *arrowarray.Uint16:
					x = float64(c.Value(0))
				default:
					t.Fatalf("column of type %s", g.DataType())
				}
				if math.Abs(x-w) > 1e-9*math.Max(1, math.Abs(w)) {
					t.Errorf("no filter: aggregate %d = %v, want %v", i, x, w)
				}
			}
			mean := math.NaN()
			if npass > 0 {
				mean = sum / float64(npass)
			}
			// No passing cell: dense min/max answer zero (TileDB).
			wants := []float64{sum, mn, mx, mean, float64(len(coords)), float64(len(coords))}
			names := []string{"sum", "min", "max", "mean", "count(*)", "count"}
			if fld.Kind == 'i' || fld.Kind == 'u' {
				if got[0].DataType().ID() != arrow.INT64 && got[0].DataType().ID() != arrow.UINT64 {
					t.Fatalf("sum of %s is %s", fld.Dtype, got[0].DataType())
				}
			}
			for i, w := range wants {
				g := num(got[i])
				if math.IsNaN(w) != math.IsNaN(g) || !math.IsNaN(w) && math.Abs(g-w) > 1e-9*math.Max(1, math.Abs(w)) {
					t.Errorf("%s: %s = %v, want %v", filter, names[i], g, w)
				}
			}
		})
	}
}

func TestB2NDFilterErrors(t *testing.T) {
	st, _ := storage.NewLocal(filepath.Join("..", "..", "testdata", "b2nd", "arrays"))
	for _, q := range []*query.Query{
		{Array: "g_lef8.b2nd", Filter: "nope > 1", Limit: -1},
		{Array: "g_lef8.b2nd", Filter: "dim0 > 1", Limit: -1}, // dense: TileDB refuses it too
		{Array: "g_leU3.b2nd", Filter: "value > 1", Limit: -1},
		{Array: "g_lef8.b2nd", Aggregates: []query.Aggregate{{Op: "sum", Field: "nope"}}, Limit: -1},
		{Array: "g_lef8.b2nd", Aggregates: []query.Aggregate{{Op: "null_count", Field: "value"}}, Limit: -1},
		{Array: "g_leU3.b2nd", Aggregates: []query.Aggregate{{Op: "sum", Field: "value"}}, Limit: -1},
	} {
		_, err := reader.Open(context.Background(), st, q, reader.Options{})
		if k := errkind.Of(err); k != errkind.InvalidArgument {
			t.Errorf("%s / %v: %v (%v), want InvalidArgument", q.Filter, q.Aggregates, err, k)
		}
	}
}
