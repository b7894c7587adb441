package groupagg

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"sort"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	arr "github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/tileflight/tileflight/errkind"
)

// testSchema: k int32 (nullable), s string (nullable), b bool, u uint16,
// f float64 (nullable), i int64, f32 float32.
var testSchema = arrow.NewSchema([]arrow.Field{
	{Name: "k", Type: arrow.PrimitiveTypes.Int32, Nullable: true},
	{Name: "s", Type: arrow.BinaryTypes.LargeString, Nullable: true},
	{Name: "b", Type: arrow.FixedWidthTypes.Boolean},
	{Name: "u", Type: arrow.PrimitiveTypes.Uint16},
	{Name: "f", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
	{Name: "i", Type: arrow.PrimitiveTypes.Int64},
	{Name: "f32", Type: arrow.PrimitiveTypes.Float32},
}, nil)

// batches makes nb random batches of n rows each, with few distinct
// keys and some nulls.
func batches(t *testing.T, seed uint64, nb, n int) []arrow.RecordBatch {
	t.Helper()
	r := rand.New(rand.NewPCG(seed, 7))
	var out []arrow.RecordBatch
	for range nb {
		b := arr.NewRecordBuilder(memory.DefaultAllocator, testSchema)
		for range n {
			if r.IntN(10) == 0 {
				b.Field(0).AppendNull()
			} else {
				b.Field(0).(*arr.Int32Builder).Append(int32(r.IntN(5) - 2))
			}
			if r.IntN(8) == 0 {
				b.Field(1).AppendNull()
			} else {
				b.Field(1).(*arr.LargeStringBuilder).Append([]string{"a", "b", "", "ab", "é"}[r.IntN(5)])
			}
			b.Field(2).(*arr.BooleanBuilder).Append(r.IntN(2) == 0)
			b.Field(3).(*arr.Uint16Builder).Append(uint16(r.IntN(65536)))
			if r.IntN(4) == 0 {
				b.Field(4).AppendNull()
			} else {
				b.Field(4).(*arr.Float64Builder).Append(float64(r.IntN(1000)) / 4)
			}
			b.Field(5).(*arr.Int64Builder).Append(r.Int64N(1<<40) - 1<<39)
			b.Field(6).(*arr.Float32Builder).Append(float32(r.IntN(100)) / 8)
		}
		out = append(out, b.NewRecordBatch())
		b.Release()
	}
	t.Cleanup(func() {
		for _, rec := range out {
			rec.Release()
		}
	})
	return out
}

// naive groups row by row with Go values, as the SQL engine does.
func naive(recs []arrow.RecordBatch, keys []int, aggs []Agg) map[string][]any {
	type st struct {
		key  []any
		cnt  []int64
		sum  []float64
		mm   []any
		seen []bool
	}
	groups := map[string]*st{}
	less := func(a, b any) bool {
		switch x := a.(type) {
		case int32:
			return x < b.(int32)
		case int64:
			return x < b.(int64)
		case uint16:
			return x < b.(uint16)
		case float64:
			return x < b.(float64)
		case float32:
			return x < b.(float32)
		case string:
			return x < b.(string)
		}
		panic(fmt.Sprintf("%T", a))
	}
	num := func(v any) float64 {
		switch x := v.(type) {
		case int32:
			return float64(x)
		case int64:
			return float64(x)
		case uint16:
			return float64(x)
		case float64:
			return x
		case float32:
			return float64(x)
		}
		panic(fmt.Sprintf("%T", v))
	}
	for _, rec := range recs {
		for i := range int(rec.NumRows()) {
			var kv []any
			for _, k := range keys {
				kv = append(kv, value(rec.Column(k), i))
			}
			id := fmt.Sprintf("%#v", kv)
			g := groups[id]
			if g == nil {
				g = &st{key: kv, cnt: make([]int64, len(aggs)), sum: make([]float64, len(aggs)), mm: make([]any, len(aggs)), seen: make([]bool, len(aggs))}
				groups[id] = g
			}
			for j, a := range aggs {
				if a.Op == CountStar {
					g.cnt[j]++
					continue
				}
				v := value(rec.Column(a.Col), i)
				if v == nil {
					continue
				}
				g.cnt[j]++
				switch a.Op {
				case Any:
					if !g.seen[j] {
						g.mm[j] = v
					}
				case Sum, Avg:
					g.sum[j] += num(v)
				case Min:
					if !g.seen[j] || less(v, g.mm[j]) {
						g.mm[j] = v
					}
				case Max:
					if !g.seen[j] || less(g.mm[j], v) {
						g.mm[j] = v
					}
				}
				g.seen[j] = true
			}
		}
	}
	out := map[string][]any{}
	for id, g := range groups {
		row := append([]any{}, g.key...)
		for j, a := range aggs {
			switch {
			case a.Op == CountStar || a.Op == Count:
				row = append(row, g.cnt[j])
			case g.cnt[j] == 0:
				row = append(row, nil)
			case a.Op == Sum:
				row = append(row, g.sum[j])
			case a.Op == Any:
				row = append(row, g.mm[j])
			case a.Op == Avg:
				row = append(row, g.sum[j]/float64(g.cnt[j]))
			default:
				row = append(row, g.mm[j])
			}
		}
		out[id] = row
	}
	return out
}

func rowsOf(t *testing.T, tb *Table, nkeys int) map[string][]any {
	out := map[string][]any{}
	for g := range tb.Len() {
		row := tb.Row(g)
		id := fmt.Sprintf("%#v", row[:nkeys])
		if _, dup := out[id]; dup {
			t.Fatalf("group %s twice", id)
		}
		out[id] = row
	}
	return out
}

// close compares sums within rounding (the order of float additions
// differs between one pass and merged partial states).
func sameRow(a, b []any) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		x, ok1 := a[i].(float64)
		y, ok2 := b[i].(float64)
		if ok1 && ok2 {
			d := x - y
			if d < 0 {
				d = -d
			}
			if d > 1e-9*(1+max(x, -x)) {
				return false
			}
			continue
		}
		if !reflect.DeepEqual(a[i], b[i]) {
			return false
		}
	}
	return true
}

func TestGroupAgg(t *testing.T) {
	all := []Agg{{CountStar, 0}, {Count, 4}, {Sum, 4}, {Avg, 4}, {Min, 4}, {Max, 4},
		{Sum, 0}, {Avg, 5}, {Min, 1}, {Max, 1}, {Min, 3}, {Max, 5}, {Count, 1}, {Min, 0}, {Max, 6}, {Sum, 3}}
	cases := []struct {
		name  string
		keys  []int
		aggs  []Agg
		parts int // Tables merged
	}{
		{"int key", []int{0}, all, 1},
		{"int key merged", []int{0}, all, 3},
		{"string key", []int{1}, all, 1},
		{"string key merged", []int{1}, all, 4},
		{"bool key", []int{2}, all, 2},
		{"float key", []int{4}, []Agg{{CountStar, 0}, {Sum, 5}}, 2},
		{"two keys", []int{0, 1}, all, 1},
		{"three keys merged", []int{2, 0, 1}, all, 3},
		{"uint key", []int{3}, []Agg{{CountStar, 0}, {Max, 4}}, 1},
		{"count only", []int{0}, []Agg{{CountStar, 0}}, 2},
		// any value: the first non-null one in the order of the batches
		{"any value", []int{0}, []Agg{{Any, 1}, {Any, 4}, {Any, 2}, {CountStar, 0}}, 1},
	}
	recs := batches(t, 1, 6, 500)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			want := naive(recs, tc.keys, tc.aggs)
			budget := &Budget{}
			tabs := make([]*Table, tc.parts)
			for i := range tabs {
				var err error
				if tabs[i], err = New(testSchema, tc.keys, tc.aggs, budget); err != nil {
					t.Fatal(err)
				}
			}
			for i, rec := range recs {
				if err := tabs[i%tc.parts].Add(rec); err != nil {
					t.Fatal(err)
				}
			}
			for _, o := range tabs[1:] {
				if err := tabs[0].Merge(o); err != nil {
					t.Fatal(err)
				}
			}
			if budget.Used() != tabs[0].Bytes() || budget.Used() <= 0 {
				t.Errorf("budget holds %d, the merged table %d", budget.Used(), tabs[0].Bytes())
			}
			got := rowsOf(t, tabs[0], len(tc.keys))
			if len(got) != len(want) {
				t.Fatalf("%d groups, want %d", len(got), len(want))
			}
			ids := make([]string, 0, len(want))
			for id := range want {
				ids = append(ids, id)
			}
			sort.Strings(ids)
			for _, id := range ids {
				if !sameRow(got[id], want[id]) {
					t.Errorf("group %s: got %#v, want %#v", id, got[id], want[id])
				}
			}
			tabs[0].Release()
			if budget.Used() != 0 {
				t.Errorf("budget holds %d after Release", budget.Used())
			}
		})
	}
}

// TestBudget: groups past the budget fail with RESOURCE_EXHAUSTED and
// give their charge back.
func TestBudget(t *testing.T) {
	recs := batches(t, 2, 2, 2000)
	budget := &Budget{Max: 4096}
	tb, err := New(testSchema, []int{5}, []Agg{{CountStar, 0}}, budget)
	if err != nil {
		t.Fatal(err)
	}
	err = tb.Add(recs[0])
	if !errors.Is(err, ErrTooManyGroups) || errkind.Of(err) != errkind.ResourceExhausted {
		t.Fatalf("2000 distinct int64 keys in 4096 bytes: %v (kind %v)", err, errkind.Of(err))
	}
	if budget.Used() > 4096 || budget.Used() != tb.Bytes() {
		t.Errorf("budget holds %d of 4096, the table %d", budget.Used(), tb.Bytes())
	}
	tb.Release()
	if budget.Used() != 0 {
		t.Errorf("budget holds %d after Release", budget.Used())
	}
}

// TestRefused: keys and aggregates of types not computed here are refused
// by New, with the reason.
func TestRefused(t *testing.T) {
	sc := arrow.NewSchema([]arrow.Field{
		{Name: "t", Type: arrow.FixedWidthTypes.Timestamp_us},
		{Name: "s", Type: arrow.BinaryTypes.String},
		{Name: "b", Type: arrow.FixedWidthTypes.Boolean},
	}, nil)
	cases := []struct {
		keys []int
		aggs []Agg
		kind error
	}{
		{[]int{0}, nil, errkind.Unimplemented},
		{[]int{1}, []Agg{{Sum, 1}}, errkind.Unimplemented},
		{[]int{1}, []Agg{{Min, 2}}, errkind.Unimplemented},
		{[]int{1}, []Agg{{Count, 0}}, errkind.Unimplemented},
		{[]int{3}, nil, errkind.InvalidArgument},
		{[]int{1}, []Agg{{Max, -1}}, errkind.InvalidArgument},
	}
	for _, tc := range cases {
		if _, err := New(sc, tc.keys, tc.aggs, nil); errkind.Of(err) != tc.kind {
			t.Errorf("keys %v aggs %v: %v, want kind %v", tc.keys, tc.aggs, err, tc.kind)
		}
	}
}

// BenchmarkAdd: one int32 key of 16 values with count(*), sum and avg of
// a float64, over 64 Ki row batches.
func BenchmarkAdd(b *testing.B) {
	sc := arrow.NewSchema([]arrow.Field{{Name: "k", Type: arrow.PrimitiveTypes.Int32}, {Name: "v", Type: arrow.PrimitiveTypes.Float64}}, nil)
	bld := arr.NewRecordBuilder(memory.DefaultAllocator, sc)
	r := rand.New(rand.NewPCG(1, 2))
	const n = 1 << 16
	for range n {
		bld.Field(0).(*arr.Int32Builder).Append(int32(r.IntN(16)))
		bld.Field(1).(*arr.Float64Builder).Append(r.Float64())
	}
	rec := bld.NewRecordBatch()
	defer rec.Release()
	tb, err := New(sc, []int{0}, []Agg{{CountStar, 0}, {Sum, 1}, {Avg, 1}}, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(n * 12)
	for b.Loop() {
		if err := tb.Add(rec); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/row")
}
