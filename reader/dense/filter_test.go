package dense_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/tileflight/tileflight/format/schema"
	"github.com/tileflight/tileflight/reader"
	"github.com/tileflight/tileflight/reader/internal/readtest"
	"github.com/tileflight/tileflight/storage"
	"github.com/tileflight/tileflight/storage/errorfs"
	"github.com/tileflight/tileflight/writer"
)

// A dense filtered read does not read the tiles whose statistics prove no
// cell can pass, and returns exactly what reading them would: the cells a
// skipped tile is the newest writer of fail (fill values), even where an
// older fragment's value would pass.
func TestDenseFilterSkipsTilesByMinMax(t *testing.T) {
	ctx := context.Background()
	mem := storage.NewMem()
	s, err := schema.FromJSON([]byte(`{"type": "dense", "cell_order": "row-major", "tile_order": "row-major",
	  "dimensions": [{"name": "x", "type": "int64", "domain": [0, 999], "tile": 100}],
	  "attributes": [{"name": "v", "type": "int32"}, {"name": "s", "type": "string_ascii", "cell_val_num": "var"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if err := writer.CreateArray(ctx, mem, "d", s); err != nil {
		t.Fatal(err)
	}
	// Fragment a: x in [0, 999], v = x - 500, s = "a<x>"; fragment b,
	// newer: x in [300, 349], v = x - 10500, s = "b<x>".
	val := func(frag string, x int) (int32, string) {
		if frag == "b" {
			return int32(x - 10500), fmt.Sprintf("b%d", x)
		}
		return int32(x - 500), fmt.Sprintf("a%d", x)
	}
	names := map[string]string{}
	write := func(frag string, lo, hi int, ts uint64) {
		v := make([]byte, 4*(hi-lo+1))
		var sd []byte
		offs := make([]byte, 8*(hi-lo+1))
		for x := lo; x <= hi; x++ {
			iv, sv := val(frag, x)
			binary.LittleEndian.PutUint32(v[4*(x-lo):], uint32(iv))
			binary.LittleEndian.PutUint64(offs[8*(x-lo):], uint64(len(sd)))
			sd = append(sd, sv...)
		}
		res, err := writer.WriteDense(ctx, mem, "d", s, [][2]int64{{int64(lo), int64(hi)}}, schema.RowMajor,
			map[string]writer.Column{"v": {Data: v}, "s": {Data: sd, Offsets: offs}}, writer.Options{Timestamp: ts})
		if err != nil {
			t.Fatal(err)
		}
		names[frag] = res.Fragments[0]
	}
	write("a", 0, 999, 10)
	write("b", 300, 349, 20)
	fillV := int32(binary.LittleEndian.Uint32(s.Attributes[0].FillValue))
	fillS := string(s.Attributes[1].FillValue)
	log := &readtest.KeyLog{}
	st := errorfs.Wrap(mem, log)
	for _, c := range []struct {
		filter       string
		lo, hi       int
		pass         func(v int32) bool
		readA, readB int // tiles of v read per fragment
	}{
		{"v > 10000", 0, 999, func(v int32) bool { return v > 10000 }, 0, 0},
		// b's values all fail: its tile is skipped, and its cells fail
		// although a's values there would pass.
		{"v > -600", 0, 999, func(v int32) bool { return v > -600 }, 10, 0},
		{"v > -600", 250, 449, func(v int32) bool { return v > -600 }, 3, 0},
		// a's tiles all fail: only b's tile is read.
		{"v < -5000", 0, 999, func(v int32) bool { return v < -5000 }, 0, 1},
		{"v == 10 or v < -10190", 0, 999, func(v int32) bool { return v == 10 || v < -10190 }, 1, 1},
	} {
		name := fmt.Sprintf("%s over [%d, %d]", c.filter, c.lo, c.hi)
		log.Keys = nil
		q := readtest.Parse(t, fmt.Sprintf(`{"array":"d","subarray":{"x":[[%d,%d]]},"filter":%q}`, c.lo, c.hi, c.filter))
		recs, _, err := readtest.ReadAll(t, st, q, reader.Options{})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		var got []string
		for _, rec := range recs {
			xs := rec.Column(0).(*array.Int64)
			vs := rec.Column(1).(*array.Int32)
			ss := rec.Column(2).(*array.LargeString)
			for i := 0; i < int(rec.NumRows()); i++ {
				got = append(got, fmt.Sprintf("%d %d %q", xs.Value(i), vs.Value(i), ss.Value(i)))
			}
			rec.Release()
		}
		var want []string
		sum := int64(0)
		for x := c.lo; x <= c.hi; x++ {
			frag := "a"
			if x >= 300 && x <= 349 {
				frag = "b"
			}
			v, sv := val(frag, x)
			if !c.pass(v) {
				v, sv = fillV, fillS
			} else {
				sum += int64(v)
			}
			want = append(want, fmt.Sprintf("%d %d %q", x, v, sv))
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s: got %d rows %.300v\nwant %d rows %.300v", name, len(got), got, len(want), want)
		}
		if n := log.Reads(names["a"] + "/a0.tdb"); n != c.readA {
			t.Errorf("%s: %d tiles of v read from fragment a, want %d", name, n, c.readA)
		}
		if n := log.Reads(names["b"] + "/a0.tdb"); n != c.readB {
			t.Errorf("%s: %d tiles of v read from fragment b, want %d", name, n, c.readB)
		}
		// Aggregates over the same filter see the same passing cells
		// (dense count(*) counts every cell, as TileDB's; sum does not).
		agg := readtest.AggRow(t, st, fmt.Sprintf(`{"array":"d","subarray":{"x":[[%d,%d]]},"filter":%q,"aggregates":{"v":["sum"]}}`, c.lo, c.hi, c.filter))
		if fmt.Sprint(agg["sum(v)"]) != fmt.Sprint(sum) {
			t.Errorf("%s: sum(v) %v, want %d", name, agg["sum(v)"], sum)
		}
	}
}
