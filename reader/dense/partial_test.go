package dense_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/tileflight/tileflight/format/schema"
	"github.com/tileflight/tileflight/reader"
	"github.com/tileflight/tileflight/reader/internal/readtest"
	"github.com/tileflight/tileflight/reader/tileio"
	"github.com/tileflight/tileflight/storage"
	"github.com/tileflight/tileflight/writer"
)

// Small dense boxes over multi-chunk filtered tiles decode only the
// chunks holding their cells (tileio.LoadRange), and read exactly what
// decoding the tiles whole reads, and what was written. The undecoded
// bytes are poisoned (0xA5) while the partial path runs, so a painter
// reading one would show. Tiles are 512x512 cells: 2 MiB of float64 (32
// chunks of 64 KiB), 1 MiB of int32 (16 chunks); fragments overlap.
func TestDensePartialTiles(t *testing.T) {
	ctx := context.Background()
	type frag struct{ x0, x1, y0, y1 int }
	// Fragment k, newer than k-1. The first does not cover x > 900, where
	// the fill values show.
	allFrags := []frag{{0, 900, 0, 511}, {100, 700, 50, 400}, {0, 511, 300, 511}}
	val := func(k, x, y int) (v float64, valid bool, w int32) {
		return float64(k*1_000_000+x*1000+y) + 0.25, (x+y+k)%7 != 0, int32(k*1_000_000 + y*1000 + x)
	}
	type cfg struct {
		filters string
		order   string
		frags   int
	}
	var cfgs []cfg
	pipes := []string{`[{"name": "zstd", "level": 1}]`, `[{"name": "lz4"}]`, `[{"name": "byteshuffle"}, {"name": "zstd"}]`, `[]`}
	for i, fl := range pipes {
		for j, order := range []string{"row-major", "col-major"} {
			cfgs = append(cfgs, cfg{fl, order, 1 + (2*i+j)%3})
		}
	}
	rng := rand.New(rand.NewSource(14))
	var sumTiles, sumChunks, sumDecoded int64
	defer func() {
		t.Logf("%d tiles decoded in part: %d of their %d chunks", sumTiles, sumDecoded, sumChunks)
	}()
	for ci, c := range cfgs {
		name := fmt.Sprintf("%s/%s/%d frags", c.filters, c.order, c.frags)
		mem := storage.NewMem()
		s, err := schema.FromJSON([]byte(fmt.Sprintf(`{"type": "dense", "cell_order": %q, "tile_order": "row-major",
		  "dimensions": [{"name": "x", "type": "int64", "domain": [0, 1023], "tile": 512}, {"name": "y", "type": "int64", "domain": [0, 511], "tile": 512}],
		  "attributes": [{"name": "v", "type": "float64", "nullable": true, "fill": -1, "filters": %s},
		                 {"name": "w", "type": "int32", "fill": -1, "filters": %s}]}`, c.order, c.filters, c.filters)))
		if err != nil {
			t.Fatal(err)
		}
		if err := writer.CreateArray(ctx, mem, "d", s); err != nil {
			t.Fatal(err)
		}
		frags := allFrags[:c.frags]
		for k, f := range frags {
			n := (f.x1 - f.x0 + 1) * (f.y1 - f.y0 + 1)
			v, valid, w := make([]byte, 8*n), make([]byte, n), make([]byte, 4*n)
			i := 0
			for x := f.x0; x <= f.x1; x++ {
				for y := f.y0; y <= f.y1; y++ {
					fv, ok, iw := val(k, x, y)
					binary.LittleEndian.PutUint64(v[8*i:], math.Float64bits(fv))
					if ok {
						valid[i] = 1
					}
					binary.LittleEndian.PutUint32(w[4*i:], uint32(iw))
					i++
				}
			}
			_, err := writer.WriteDense(ctx, mem, "d", s, [][2]int64{{int64(f.x0), int64(f.x1)}, {int64(f.y0), int64(f.y1)}}, schema.RowMajor,
				map[string]writer.Column{"v": {Data: v, Validity: valid}, "w": {Data: w}}, writer.Options{Timestamp: uint64(10 + k)})
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
		}
		want := func(x, y int) string {
			for k := len(frags) - 1; k >= 0; k-- {
				if f := frags[k]; x >= f.x0 && x <= f.x1 && y >= f.y0 && y <= f.y1 {
					v, ok, w := val(k, x, y)
					if !ok {
						return fmt.Sprintf("%d %d null %d", x, y, w)
					}
					return fmt.Sprintf("%d %d %g %d", x, y, v, w)
				}
			}
			return fmt.Sprintf("%d %d null -1", x, y)
		}
		read := func(q string, mode tileio.PartialMode, opt reader.Options) []string {
			defer tileio.SetPartialMode(mode)()
			recs, _, err := readtest.ReadAll(t, mem, readtest.Parse(t, q), opt)
			if err != nil {
				t.Fatalf("%s: %s: %v", name, q, err)
			}
			var rows []string
			for _, rec := range recs {
				xs, ys := rec.Column(0).(*array.Int64), rec.Column(1).(*array.Int64)
				vs, ws := rec.Column(2).(*array.Float64), rec.Column(3).(*array.Int32)
				for i := 0; i < int(rec.NumRows()); i++ {
					if vs.IsNull(i) {
						rows = append(rows, fmt.Sprintf("%d %d null %d", xs.Value(i), ys.Value(i), ws.Value(i)))
					} else {
						rows = append(rows, fmt.Sprintf("%d %d %g %d", xs.Value(i), ys.Value(i), vs.Value(i), ws.Value(i)))
					}
				}
				rec.Release()
			}
			return rows
		}
		for b := 0; b < 12; b++ {
			// 1 cell .. a few rows (of either dimension), anywhere; every
			// fourth box a wide one, which decodes (close to) whole tiles.
			h, w := 1+rng.Intn(4), 1+rng.Intn(40)
			if rng.Intn(2) == 0 {
				h, w = w, h
			}
			if b%4 == 3 {
				h, w = 1+rng.Intn(300), 1+rng.Intn(512)
			}
			x0, y0 := rng.Intn(1024-h+1), rng.Intn(512-w+1)
			x1, y1 := x0+h-1, y0+w-1
			layout := []string{"row-major", "col-major"}[rng.Intn(2)]
			q := fmt.Sprintf(`{"array":"d","subarray":{"x":[[%d,%d]],"y":[[%d,%d]]},"layout":%q}`, x0, x1, y0, y1, layout)
			var exp []string
			if layout == "row-major" {
				for x := x0; x <= x1; x++ {
					for y := y0; y <= y1; y++ {
						exp = append(exp, want(x, y))
					}
				}
			} else {
				for y := y0; y <= y1; y++ {
					for x := x0; x <= x1; x++ {
						exp = append(exp, want(x, y))
					}
				}
			}
			whole := read(q, tileio.PartialOff, reader.Options{})
			before := tileio.PartialStats()
			got := read(q, tileio.PartialPoison, reader.Options{Workers: 1 + b%3})
			after := tileio.PartialStats()
			if strings.Join(whole, "\n") != strings.Join(exp, "\n") {
				t.Fatalf("%s: %s: whole tiles: %s", name, q, rowsDiff(whole, exp))
			}
			if strings.Join(got, "\n") != strings.Join(exp, "\n") {
				t.Fatalf("%s: %s: partial tiles: %s", name, q, rowsDiff(got, exp))
			}
			tiles, chunks, decoded := after.Tiles-before.Tiles, after.Chunks-before.Chunks, after.Decoded-before.Decoded
			if 2*decoded > chunks {
				t.Errorf("%s: %s: %d of %d chunks decoded in part", name, q, decoded, chunks)
			}
			// One cell .. a few cells wide in either order is a handful of
			// chunks of each tile it touches, well under half: every tile
			// of the array is then decoded in part (a box no fragment
			// wrote is all fill values and reads no tile).
			written := false // some fragment has cells in the box
			for _, f := range frags {
				written = written || (x0 <= f.x1 && x1 >= f.x0 && y0 <= f.y1 && y1 >= f.y0)
			}
			if written && b%4 != 3 && h*w <= 40 && tiles == 0 {
				t.Errorf("%s: %s: no tile decoded in part", name, q)
			}
			sumTiles, sumChunks, sumDecoded = sumTiles+tiles, sumChunks+chunks, sumDecoded+decoded
			// A cache keeping 2 MiB tiles (32 MiB) decodes them whole;
			// one of 8 MiB keeps the 1 MiB int32 tiles only.
			if ci == 0 && b%4 != 3 {
				for _, cc := range []struct {
					size      int64
					wantTiles bool
				}{{32 << 20, false}, {8 << 20, true}} {
					cache := tileio.NewCache(cc.size)
					before := tileio.PartialStats()
					got := read(q, tileio.PartialPoison, reader.Options{TileCache: cache})
					tiles := tileio.PartialStats().Tiles - before.Tiles
					if strings.Join(got, "\n") != strings.Join(exp, "\n") {
						t.Fatalf("%s: %s: cache %d: %s", name, q, cc.size, rowsDiff(got, exp))
					}
					if (tiles > 0) != (cc.wantTiles && written) {
						t.Errorf("%s: %s: cache %d: %d tiles decoded in part", name, q, cc.size, tiles)
					}
					// Nothing partial enters the cache: only the int32
					// tiles (1 MiB) are kept by the small one.
					st := cache.Stats()
					if cc.wantTiles && st.Bytes > int64(st.Tiles)*(1<<20+4096) {
						t.Errorf("%s: %s: cache %d holds %d bytes in %d tiles: a float64 tile was kept", name, q, cc.size, st.Bytes, st.Tiles)
					}
				}
			}
		}
	}
}

// rowsDiff describes the first difference between two row lists.
func rowsDiff(got, want []string) string {
	for i := range min(len(got), len(want)) {
		if got[i] != want[i] {
			return fmt.Sprintf("row %d is %q, want %q (%d rows, want %d)", i, got[i], want[i], len(got), len(want))
		}
	}
	return fmt.Sprintf("%d rows, want %d", len(got), len(want))
}
