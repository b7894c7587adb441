package plan

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tileflight/tileflight/errkind"
	"github.com/tileflight/tileflight/format/schema"
	"github.com/tileflight/tileflight/internal/fixtures"
	"github.com/tileflight/tileflight/query"
	"github.com/tileflight/tileflight/storage"
	"github.com/tileflight/tileflight/tdbarray"
)

// openCase opens a TileDB-written case of the golden subset or of
// reader/testdata/dense.
func openCase(t testing.TB, name string) *tdbarray.Array {
	t.Helper()
	dir := filepath.Join(fixtures.GoldenDir(t), name)
	if strings.HasPrefix(name, "rd_") {
		dir = filepath.Join("..", "testdata", "dense", name)
	}
	st, err := storage.NewLocal(filepath.Dir(dir))
	if err != nil {
		t.Fatal(err)
	}
	a, err := tdbarray.Open(context.Background(), st, filepath.Base(dir), tdbarray.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func resolve(t testing.TB, a *tdbarray.Array, js string) (*Plan, error) {
	t.Helper()
	q, err := query.Parse([]byte(js))
	if err != nil {
		t.Fatalf("parse %s: %v", js, err)
	}
	return Resolve(a, q)
}

func TestResolveErrors(t *testing.T) {
	dense := openCase(t, "dense_1d")           // x int32 [1, 10]; attributes a, f
	u64 := openCase(t, "rd_int_extremes")      // u uint64 [2^64-120, 2^64-31]
	sparse := openCase(t, "sparse_string_dim") // a string dimension
	for _, tc := range []struct {
		name string
		a    *tdbarray.Array
		q    string
		want []string
	}{
		{"unknown column", dense, `{"array":"dense_1d","columns":["x","nope"]}`, []string{"dense_1d", `"nope"`, "x, a, f"}},
		{"unknown dimension", dense, `{"array":"dense_1d","subarray":{"y":[[1,2]]}}`, []string{"dense_1d", `"y"`, "dimensions: x"}},
		{"below the domain", dense, `{"array":"dense_1d","subarray":{"x":[[0,5]]}}`, []string{`"x"`, "[0, 5]", "[1, 10]"}},
		{"above the domain", dense, `{"array":"dense_1d","subarray":{"x":[[2,3],[5,11]]}}`, []string{"range 1", "[5, 11]", "[1, 10]"}},
		{"inverted", dense, `{"array":"dense_1d","subarray":{"x":[[5,2]]}}`, []string{"[5, 2]", "above the high bound"}},
		{"string bound", dense, `{"array":"dense_1d","subarray":{"x":[["a","b"]]}}`, []string{"want a number"}},
		{"fraction", dense, `{"array":"dense_1d","subarray":{"x":[[1.5,3]]}}`, []string{"1.5", "int32"}},
		{"beyond int32", dense, `{"array":"dense_1d","subarray":{"x":[[1,3000000000]]}}`, []string{"3000000000", "int32"}},
		{"beyond uint64", u64, `{"array":"rd_int_extremes","subarray":{"u":[[18446744073709551500,18446744073709551616]]}}`, []string{"18446744073709551616"}},
		{"uint64 above domain", u64, `{"array":"rd_int_extremes","subarray":{"u":[[18446744073709551500,18446744073709551615]]}}`, []string{"[18446744073709551496, 18446744073709551585]"}},
		{"negative uint64", u64, `{"array":"rd_int_extremes","subarray":{"u":[[-1,5]]}}`, []string{"-1", "uint64"}},
		{"number for string dimension", sparse, `{"array":"sparse_string_dim","subarray":{"name":[[1,2]]}}`, []string{"want a string"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := resolve(t, tc.a, tc.q)
			if err == nil {
				t.Fatal("resolved")
			}
			if !errors.Is(err, errkind.InvalidArgument) {
				t.Errorf("error %v is not InvalidArgument", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}

func TestResolveDefaults(t *testing.T) {
	a := openCase(t, "dense_1d")
	p, err := resolve(t, a, `{"array":"dense_1d"}`)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(p.Columns, ",") != "x,a,f" || p.Layout != query.LayoutRowMajor || p.BatchRows != query.DefaultBatchRows || p.Limit != -1 || p.Empty {
		t.Errorf("defaults: %+v", p)
	}
	// TileDB reported the fragments' non-empty domains [1, 6] and [4, 8].
	d := &a.Schema.Dimensions[0]
	if r := p.Subarray[0]; len(r) != 1 || schema.AsInt64(d.Type, r[0].Lo) != 1 || schema.AsInt64(d.Type, r[0].Hi) != 8 {
		t.Errorf("default x range %v, want the non-empty domain [1, 8]", r)
	}
	if n, ok := EstimateRows(p); n != 8 || !ok {
		t.Errorf("EstimateRows = %d, %v; want 8, true", n, ok)
	}
	p, _ = resolve(t, a, `{"array":"dense_1d","subarray":{"x":[[2,3],[9,10]]},"limit":3}`)
	if n, ok := EstimateRows(p); n != 3 || !ok {
		t.Errorf("EstimateRows with limit = %d, %v; want 3, true", n, ok)
	}

	s := openCase(t, "sparse_string_dim")
	p, err = resolve(t, s, `{"array":"sparse_string_dim"}`)
	if err != nil {
		t.Fatal(err)
	}
	if p.Layout != query.LayoutUnordered {
		t.Errorf("sparse default layout %s", p.Layout)
	}

	u := openCase(t, "rd_int_extremes")
	p, err = resolve(t, u, `{"array":"rd_int_extremes","subarray":{"u":[[18446744073709551496,18446744073709551585]]}}`)
	if err != nil {
		t.Fatal(err)
	}
	ud := &u.Schema.Dimensions[0]
	if lo, hi := schema.AsUint64(ud.Type, p.Subarray[0][0].Lo), schema.AsUint64(ud.Type, p.Subarray[0][0].Hi); lo != 18446744073709551496 || hi != 18446744073709551585 {
		t.Errorf("uint64 range [%d, %d]", lo, hi)
	}
}

// Split cuts the first dimension at space tile boundaries into disjoint
// parts that cover the subarray exactly, each a complete ticket.
func TestSplitDense(t *testing.T) {
	a := openCase(t, "rd_col_multirange") // r int32 [1, 9] tile 4; c [2, 11] tile 3
	for _, tc := range []struct {
		q     string
		n     int
		parts int
	}{
		{`{"array":"rd_col_multirange"}`, 3, 2}, // non-empty domain r [2, 7]: two tiles
		{`{"array":"rd_col_multirange","subarray":{"r":[[6,9],[1,2]]}}`, 4, 3},
		{`{"array":"rd_col_multirange","subarray":{"r":[[2,3]]}}`, 4, 1},
		{`{"array":"rd_col_multirange","limit":5}`, 4, 1},
	} {
		p, err := resolve(t, a, tc.q)
		if err != nil {
			t.Fatal(err)
		}
		qs := Split(p, tc.n)
		if len(qs) != tc.parts {
			t.Errorf("%s: %d parts, want %d", tc.q, len(qs), tc.parts)
		}
		var rows []int64
		var total int64
		for _, q := range qs {
			js, _ := q.MarshalJSON()
			q2, err := query.Parse(js)
			if err != nil {
				t.Fatalf("ticket %s: %v", js, err)
			}
			if q2.Timestamp == nil || q2.Timestamp.End != a.End {
				t.Errorf("ticket %s does not pin the timestamp", js)
			}
			pp, err := Resolve(a, q2)
			if err != nil {
				t.Fatalf("ticket %s: %v", js, err)
			}
			for i, r := range pp.Subarray[0] {
				lo := schema.AsInt64(a.Schema.Dimensions[0].Type, r.Lo)
				if i == 0 && len(qs) > 1 && lo != 1 && (lo-1)%4 != 0 && lo != schema.AsInt64(a.Schema.Dimensions[0].Type, p.Subarray[0][0].Lo) {
					t.Errorf("ticket %s starts mid-tile", js)
				}
				for x := lo; x <= schema.AsInt64(a.Schema.Dimensions[0].Type, r.Hi); x++ {
					rows = append(rows, x)
				}
			}
			n, _ := EstimateRows(pp)
			total += n
		}
		var want []int64
		for _, r := range p.Subarray[0] {
			for x := schema.AsInt64(a.Schema.Dimensions[0].Type, r.Lo); x <= schema.AsInt64(a.Schema.Dimensions[0].Type, r.Hi); x++ {
				want = append(want, x)
			}
		}
		if len(rows) != len(want) {
			t.Fatalf("%s: parts hold rows %v, want %v", tc.q, rows, want)
		}
		for i := range rows {
			if rows[i] != want[i] {
				t.Fatalf("%s: parts hold rows %v, want %v", tc.q, rows, want)
			}
		}
		whole, _ := EstimateRows(p)
		if p.Limit < 0 && total != whole {
			t.Errorf("%s: parts estimate %d rows, whole %d", tc.q, total, whole)
		}
	}
}

func TestSplitFloat(t *testing.T) {
	d := &schema.Dimension{Name: "x"}
	d.Type = schemaFloat64()
	put := func(f float64) []byte { v, _ := ParseValue(d, query.Value{Num: jsonNum(f)}); return v }
	rs := []Range{{Lo: put(0), Hi: put(10)}, {Lo: put(20), Hi: put(21)}}
	parts := splitFloat(d, rs, 4)
	if len(parts) < 2 || len(parts) > 4 {
		t.Fatalf("%d parts", len(parts))
	}
	prev := -1.0
	for _, p := range parts {
		for _, r := range p {
			lo, hi := schema.AsFloat64(d.Type, r.Lo), schema.AsFloat64(d.Type, r.Hi)
			if lo <= prev || hi < lo {
				t.Errorf("part range [%v, %v] overlaps or is inverted (previous end %v)", lo, hi, prev)
			}
			prev = hi
		}
	}
	if prev != 21 {
		t.Errorf("last part ends at %v", prev)
	}
}
