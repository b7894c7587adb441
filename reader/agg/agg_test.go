package agg_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"
	"testing"

	"github.com/tileflight/tileflight/errkind"
	"github.com/tileflight/tileflight/format/schema"
	"github.com/tileflight/tileflight/reader"
	"github.com/tileflight/tileflight/reader/internal/readtest"
	"github.com/tileflight/tileflight/storage"
	"github.com/tileflight/tileflight/storage/errorfs"
	"github.com/tileflight/tileflight/writer"
)

// sparseFixture writes a sparse array of one int64 dimension x in
// [0, 999] (tiles of 100 cells) and attributes v (int32, v = x - 500) and
// n (nullable float64, null where x % 7 == 0, else x / 2), in one
// fragment of 1000 cells (or two overlapping ones when overlap).
func sparseFixture(t *testing.T, overlap bool) (storage.Store, *readtest.KeyLog) {
	t.Helper()
	ctx := context.Background()
	mem := storage.NewMem()
	s, err := schema.FromJSON([]byte(`{"type": "sparse", "capacity": 100, "cell_order": "row-major", "tile_order": "row-major",
	  "dimensions": [{"name": "x", "type": "int64", "domain": [0, 999], "tile": 1000}],
	  "attributes": [{"name": "v", "type": "int32"}, {"name": "n", "type": "float64", "nullable": true}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if err := writer.CreateArray(ctx, mem, "s", s); err != nil {
		t.Fatal(err)
	}
	write := func(lo, hi int, ts uint64, dv int32) {
		n := hi - lo + 1
		x, v, f, valid := make([]byte, 8*n), make([]byte, 4*n), make([]byte, 8*n), make([]byte, n)
		for i := 0; i < n; i++ {
			c := lo + i
			binary.LittleEndian.PutUint64(x[8*i:], uint64(c))
			binary.LittleEndian.PutUint32(v[4*i:], uint32(int32(c-500)+dv))
			binary.LittleEndian.PutUint64(f[8*i:], math.Float64bits(float64(c)/2))
			if c%7 != 0 {
				valid[i] = 1
			}
		}
		cols := map[string]writer.Column{"x": {Data: x}, "v": {Data: v}, "n": {Data: f, Validity: valid}}
		if _, err := writer.WriteSparse(ctx, mem, "s", s, cols, writer.Options{Timestamp: ts}); err != nil {
			t.Fatal(err)
		}
	}
	write(0, 999, 10, 0)
	if overlap {
		write(950, 999, 20, 1000)
	}
	log := &readtest.KeyLog{}
	return errorfs.Wrap(mem, log), log
}

// Whole tiles that no other fragment meets are answered from the tile
// statistics: the attribute data files are never read. A filter, an
// overlapping fragment or a partial tile makes the reader read them.
func TestAggregatesFromTileStats(t *testing.T) {
	// Reference values over x in [0, 999]: v = x - 500, n = x/2 unless x%7 == 0.
	var sumV, nulls, cnt int64
	var sumN float64
	for x := 0; x < 1000; x++ {
		sumV += int64(x - 500)
		if x%7 == 0 {
			nulls++
		} else {
			sumN += float64(x) / 2
			cnt++
		}
	}
	cases := []struct {
		name     string
		overlap  bool
		query    string
		want     map[string]string
		dataRead bool
	}{
		{"whole tiles", false, `{"array":"s","aggregates":{"v":["sum","min","max","count"],"n":["null_count","sum","mean"],"*":["count"]}}`,
			map[string]string{"sum(v)": fmt.Sprint(sumV), "min(v)": "-500", "max(v)": "499", "count(v)": "1000",
				"null_count(n)": fmt.Sprint(nulls), "sum(n)": fmt.Sprint(sumN), "mean(n)": fmt.Sprint(sumN / float64(cnt)), "count(*)": "1000"}, false},
		// Float bounds are not taken from statistics (NaN cells derail them).
		{"float max", false, `{"array":"s","aggregates":{"n":["max"]}}`, map[string]string{"max(n)": "499.5"}, true},
		{"whole tiles in a subarray", false, `{"array":"s","subarray":{"x":[[100,299]]},"aggregates":{"v":["sum","count"]}}`,
			map[string]string{"sum(v)": fmt.Sprint(sumRange(100, 299)), "count(v)": "200"}, false},
		{"partial tiles", false, `{"array":"s","subarray":{"x":[[150,249]]},"aggregates":{"v":["sum","count"]}}`,
			map[string]string{"sum(v)": fmt.Sprint(sumRange(150, 249)), "count(v)": "100"}, true},
		{"filter", false, `{"array":"s","filter":"v >= 0","aggregates":{"v":["sum","count"]}}`,
			map[string]string{"sum(v)": fmt.Sprint(sumRange(500, 999)), "count(v)": "500"}, true},
		{"overlapping fragment", true, `{"array":"s","aggregates":{"v":["sum","count"]}}`,
			map[string]string{"sum(v)": fmt.Sprint(sumV + 50*1000), "count(v)": "1000"}, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			st, log := sparseFixture(t, c.overlap)
			got := readtest.AggRow(t, st, c.query)
			for k, v := range c.want {
				if fmt.Sprint(got[k]) != v {
					t.Errorf("%s = %v, want %s", k, got[k], v)
				}
			}
			if read := log.Reads("/a0.tdb") + log.Reads("/a1.tdb"); (read > 0) != c.dataRead {
				t.Errorf("attribute data read %d times; want reads: %v (keys %v)", read, c.dataRead, log.Keys)
			}
		})
	}
}

func sumRange(lo, hi int) int64 {
	s := int64(0)
	for x := lo; x <= hi; x++ {
		s += int64(x - 500)
	}
	return s
}

// A filter whose constant lies outside every tile's min/max reads no
// attribute tile at all, and returns nothing.
func TestFilterSkipsTilesByMinMax(t *testing.T) {
	st, log := sparseFixture(t, false)
	r, err := reader.Open(context.Background(), st, readtest.Parse(t, `{"array":"s","filter":"v > 10000 or v < -1000"}`), reader.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if _, err := r.Next(context.Background()); err != io.EOF {
		t.Fatalf("Next: %v, want EOF", err)
	}
	if n := log.Reads("/a0.tdb") + log.Reads("/a1.tdb") + log.Reads("/d0.tdb"); n != 0 {
		t.Fatalf("%d tile reads, want none (keys %v)", n, log.Keys)
	}
	// The same filter with one matching value reads exactly the tiles
	// that can match.
	log.Keys = nil
	r2, err := reader.Open(context.Background(), st, readtest.Parse(t, `{"array":"s","filter":"v == 0"}`), reader.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer r2.Close()
	rec, err := r2.Next(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Release()
	if rec.NumRows() != 1 {
		t.Fatalf("%d rows, want 1", rec.NumRows())
	}
	if n := log.Reads("/a0.tdb"); n != 1 {
		t.Fatalf("%d reads of v's tiles, want the one tile holding 0 (keys %v)", n, log.Keys)
	}
}

// "timestamp": 0 and [0, 0] open the array at 0, as TileDB does: the
// fragment written at 10 is not visible (it once meant "now").
func TestTimestampZero(t *testing.T) {
	st, _ := sparseFixture(t, false)
	for _, c := range []struct {
		ts   string
		want string
	}{{"0", "0"}, {"[0, 0]", "0"}, {"9", "0"}, {"10", "1000"}, {"[10, 10]", "1000"}, {"[11, 20]", "0"}} {
		got := readtest.AggRow(t, st, `{"array":"s","timestamp":`+c.ts+`,"aggregates":{"*":["count"]}}`)
		if fmt.Sprint(got["count(*)"]) != c.want {
			t.Errorf("timestamp %s: count %v, want %s", c.ts, got["count(*)"], c.want)
		}
	}
}

// Dense: whole space tiles that one fragment wrote are answered from tile
// statistics; a partial tile, or one a newer fragment overlaps, is read.
func TestDenseAggregatesFromTileStats(t *testing.T) {
	ctx := context.Background()
	mem := storage.NewMem()
	s, err := schema.FromJSON([]byte(`{"type": "dense", "cell_order": "row-major", "tile_order": "row-major",
	  "dimensions": [{"name": "x", "type": "int64", "domain": [0, 999], "tile": 100}],
	  "attributes": [{"name": "v", "type": "int32"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if err := writer.CreateArray(ctx, mem, "d", s); err != nil {
		t.Fatal(err)
	}
	write := func(lo, hi int64, ts uint64) {
		v := make([]byte, 4*(hi-lo+1))
		for x := lo; x <= hi; x++ {
			binary.LittleEndian.PutUint32(v[4*(x-lo):], uint32(int32(x-500)))
		}
		if _, err := writer.WriteDense(ctx, mem, "d", s, [][2]int64{{lo, hi}}, schema.RowMajor,
			map[string]writer.Column{"v": {Data: v}}, writer.Options{Timestamp: ts}); err != nil {
			t.Fatal(err)
		}
	}
	write(0, 999, 10)
	write(300, 349, 20) // same values: only the reads change
	log := &readtest.KeyLog{}
	st := errorfs.Wrap(mem, log)
	for _, c := range []struct {
		sub      string
		lo, hi   int
		dataRead bool
	}{
		{`"x":[[0,299]]`, 0, 299, false},
		{`"x":[[0,199],[400,599]]`, -1, -1, false},
		{`"x":[[150,249]]`, 150, 249, true},
		{`"x":[[300,399]]`, 300, 399, true},
	} {
		log.Keys = nil
		got := readtest.AggRow(t, st, `{"array":"d","subarray":{`+c.sub+`},"aggregates":{"v":["sum","count","min"]}}`)
		want, n := int64(0), 0
		for x := 0; x < 1000; x++ {
			in := x >= c.lo && x <= c.hi
			if c.lo < 0 {
				in = x <= 199 || x >= 400 && x <= 599
			}
			if in {
				want += int64(x - 500)
				n++
			}
		}
		if fmt.Sprint(got["sum(v)"]) != fmt.Sprint(want) || fmt.Sprint(got["count(v)"]) != fmt.Sprint(n) {
			t.Errorf("%s: sum %v count %v, want %d %d", c.sub, got["sum(v)"], got["count(v)"], want, n)
		}
		if read := log.Reads("/a0.tdb"); (read > 0) != c.dataRead {
			t.Errorf("%s: attribute data read %d times, want reads: %v", c.sub, read, c.dataRead)
		}
	}
}

// min/max of STRING_ASCII attributes compare bytes (as TileDB's
// std::less<std::string_view>), skip nulls, see only the newest version
// of a cell and honour filters; an empty input is null (sparse); UTF-8
// and CHAR are refused as TileDB refuses them.
func TestStringMinMax(t *testing.T) {
	ctx := context.Background()
	st := storage.NewMem()
	s, err := schema.FromJSON([]byte(`{"type": "sparse", "capacity": 2,
	  "dimensions": [{"name": "x", "type": "int64", "domain": [0, 99], "tile": 10}],
	  "attributes": [{"name": "s", "type": "string_ascii", "cell_val_num": "var"},
	                 {"name": "n", "type": "string_ascii", "cell_val_num": "var", "nullable": true},
	                 {"name": "u", "type": "string_utf8", "cell_val_num": "var"},
	                 {"name": "v", "type": "int32"},
	                 {"name": "f", "type": "string_ascii", "cell_val_num": 2}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if err := writer.CreateArray(ctx, st, "s", s); err != nil {
		t.Fatal(err)
	}
	strs := func(vs ...string) writer.Column {
		var c writer.Column
		for _, v := range vs {
			c.Offsets = binary.LittleEndian.AppendUint64(c.Offsets, uint64(len(c.Data)))
			c.Data = append(c.Data, v...)
		}
		return c
	}
	i32 := func(vs ...int32) []byte {
		var b []byte
		for _, v := range vs {
			b = binary.LittleEndian.AppendUint32(b, uint32(v))
		}
		return b
	}
	write := func(ts uint64, xs []int64, sv, n []string, valid []byte, v []int32) {
		t.Helper()
		var xb []byte
		for _, x := range xs {
			xb = binary.LittleEndian.AppendUint64(xb, uint64(x))
		}
		nc := strs(n...)
		nc.Validity = valid
		var fixed []byte
		for _, x := range sv {
			fixed = append(fixed, (x + "__")[:2]...)
		}
		cols := map[string]writer.Column{"x": {Data: xb}, "s": strs(sv...), "n": nc, "u": strs(sv...), "v": {Data: i32(v...)}, "f": {Data: fixed}}
		if _, err := writer.WriteSparse(ctx, st, "s", s, cols, writer.Options{Timestamp: ts}); err != nil {
			t.Fatal(err)
		}
	}
	write(1, []int64{1, 2, 3, 4, 5}, []string{"pear", "Zoo", "apple", "", "zz"}, []string{"b", "a", "zz", "c", "d"}, []byte{1, 0, 0, 1, 1}, []int32{1, 2, 3, 4, 5})
	write(2, []int64{5, 6}, []string{"app", "zebra"}, []string{"A", "q"}, []byte{1, 0}, []int32{50, 60})
	for _, c := range []struct {
		q    string
		want map[string]any
	}{
		{`{"array": "s", "aggregates": {"s": ["min", "max"], "n": ["min", "max"], "f": ["min", "max"]}}`,
			map[string]any{"min(s)": "", "max(s)": "zebra", "min(n)": "A", "max(n)": "c", "min(f)": "Zo", "max(f)": "ze"}},
		{`{"array": "s", "aggregates": {"s": ["min", "max"], "n": ["min"]}, "filter": "v < 4"}`,
			map[string]any{"min(s)": "Zoo", "max(s)": "pear", "min(n)": "b"}},
		{`{"array": "s", "aggregates": {"s": ["min"], "n": ["max"]}, "filter": "v > 100"}`,
			map[string]any{"min(s)": nil, "max(n)": nil}},
		{`{"array": "s", "aggregates": {"s": ["max"], "n": ["max"]}, "subarray": {"x": [[2, 3]]}}`,
			map[string]any{"max(s)": "apple", "max(n)": nil}},
	} {
		if got := readtest.AggRow(t, st, c.q); fmt.Sprint(got) != fmt.Sprint(c.want) {
			t.Errorf("%s: %v, want %v", c.q, got, c.want)
		}
	}
	_, err = reader.Open(ctx, st, readtest.Parse(t, `{"array": "s", "aggregates": {"u": ["min"]}}`), reader.Options{})
	if !errors.Is(err, errkind.InvalidArgument) || !strings.Contains(err.Error(), "string_ascii only") {
		t.Fatalf("min of a UTF-8 string: %v", err)
	}
}
