package tileio

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/tileflight/tileflight/format/wire"
	"github.com/tileflight/tileflight/internal/legacygen"
	"github.com/tileflight/tileflight/storage"
	"github.com/tileflight/tileflight/tdbarray"
)

// coordsTile lays out the coordinates of cells (one row of d values per
// cell, int32) as a format v1-4 __coords.tdb tile holds them unfiltered.
func coordsTile(cells [][]int32, split bool) []byte {
	var b []byte
	if split {
		for d := range cells[0] {
			for _, c := range cells {
				b = binary.LittleEndian.AppendUint32(b, uint32(c[d]))
			}
		}
		return b
	}
	for _, c := range cells {
		for _, v := range c {
			b = binary.LittleEndian.AppendUint32(b, uint32(v))
		}
	}
	return b
}

func int32s(vs ...int32) []byte {
	var b []byte
	for _, v := range vs {
		b = binary.LittleEndian.AppendUint32(b, uint32(v))
	}
	return b
}

func TestZippedCoordsColumn(t *testing.T) {
	// TileDB's v1 input array non_split_coords_v1_4_0 holds (1,10) (2,10)
	// (3,10) (4,10) cell by cell; v2-4 fragments hold all d1 then all d2.
	two := [][]int32{{1, 10}, {2, 10}, {3, 10}, {4, 10}}
	three := [][]int32{{-1, 7, 100}, {5, -8, 0}, {2147483647, -2147483648, 3}}
	for _, c := range []struct {
		name  string
		cells [][]int32
		split bool
		want  [][]byte
	}{
		{"v1 zipped, 2 dims", two, false, [][]byte{int32s(1, 2, 3, 4), int32s(10, 10, 10, 10)}},
		{"v2+ split, 2 dims", two, true, [][]byte{int32s(1, 2, 3, 4), int32s(10, 10, 10, 10)}},
		{"v1 zipped, 3 dims", three, false, [][]byte{int32s(-1, 5, 2147483647), int32s(7, -8, -2147483648), int32s(100, 0, 3)}},
		{"v2+ split, 3 dims", three, true, [][]byte{int32s(-1, 5, 2147483647), int32s(7, -8, -2147483648), int32s(100, 0, 3)}},
		{"one cell", [][]int32{{9, 8}}, false, [][]byte{int32s(9), int32s(8)}},
	} {
		t.Run(c.name, func(t *testing.T) {
			tile := coordsTile(c.cells, c.split)
			for d, want := range c.want {
				z := zippedCoords{dim: d, dims: len(c.want), size: 4, split: c.split}
				got, err := z.column(tile, uint64(len(c.cells)))
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got, want) {
					t.Errorf("dimension %d: %v, want %v", d, got, want)
				}
			}
		})
	}
}

// TestZippedCoordsInconsistent: a tile whose size is not cells x
// dimensions x coordinate size is corrupt (the loader reports it as
// DataLoss naming the fragment, field and tile).
func TestZippedCoordsInconsistent(t *testing.T) {
	tile := coordsTile([][]int32{{1, 10}, {2, 10}}, true)
	for _, c := range []struct {
		name  string
		data  []byte
		cells uint64
	}{
		{"short", tile[:15], 2},
		{"long", append(tile, 0), 2},
		{"more cells than bytes", tile, 3},
		{"huge cell count", tile, 1 << 62},
		{"empty", nil, 1},
	} {
		z := zippedCoords{dim: 1, dims: 2, size: 4, split: true}
		if _, err := z.column(c.data, c.cells); !errors.Is(err, wire.ErrCorrupt) {
			t.Errorf("%s: %v, want ErrCorrupt", c.name, err)
		}
	}
}

// FuzzZippedCoords: any tile, cell count and shape either decodes to a
// column of cells x size bytes that agrees with the other layout's
// reading of the same values, or fails with ErrCorrupt; never a panic.
func FuzzZippedCoords(f *testing.F) {
	f.Add(coordsTile([][]int32{{1, 10}, {2, 10}, {3, 10}, {4, 10}}, false), uint64(4), uint8(2), uint8(1), uint8(4), false)
	f.Add(coordsTile([][]int32{{1, 10}, {2, 10}}, true), uint64(2), uint8(2), uint8(0), uint8(4), true)
	f.Add([]byte{1, 2, 3}, uint64(1), uint8(3), uint8(2), uint8(1), false)
	f.Fuzz(func(t *testing.T, data []byte, cells uint64, dims, dim, size uint8, split bool) {
		z := zippedCoords{dim: int(dim), dims: int(dims), size: int(size), split: split}
		got, err := z.column(data, cells)
		if err != nil {
			return
		}
		if uint64(len(got)) != cells*uint64(size) {
			t.Fatalf("%d bytes for %d cells of %d", len(got), cells, size)
		}
		// Cell c of this dimension, read straight from the tile.
		s, n := int(size), int(cells)
		for c := range n {
			var at int
			if split {
				at = (int(dim)*n + c) * s
			} else {
				at = (c*int(dims) + int(dim)) * s
			}
			if !bytes.Equal(got[c*s:(c+1)*s], data[at:at+s]) {
				t.Fatalf("cell %d differs", c)
			}
		}
	})
}

// TestLoadSyntheticLegacy loads every tile of the synthetic format v1-4 arrays
// (internal/legacygen; TileDB 2.30 reads the same cells from them, see
// python_tests/test_legacy_synthetic.py) and requires the cells written:
// coordinates split out of __coords.tdb (zstd and stored dimension by
// dimension in v2-4, plain and cell by cell in v1), the zstd int32 attribute
// and the gzip var-size strings, sparse and dense.
func TestLoadSyntheticLegacy(t *testing.T) {
	dir := t.TempDir()
	if err := legacygen.Write(dir); err != nil {
		t.Fatal(err)
	}
	st, err := storage.NewLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		array   string
		fields  [2]string // the dimensions
		sparse  bool
		version uint32
	}{
		{"v2_sparse", [2]string{"d1", "d2"}, true, 2}, {"v1_sparse", [2]string{"d1", "d2"}, true, 1}, {"v2_dense", [2]string{"r", "c"}, false, 2},
		{"v4_sparse", [2]string{"d1", "d2"}, true, 4}, {"v3_sparse", [2]string{"d1", "d2"}, true, 3}, {"v4_dense", [2]string{"r", "c"}, false, 4},
	} {
		t.Run(c.array, func(t *testing.T) {
			var want []legacygen.Cell
			b, err := os.ReadFile(filepath.Join(dir, c.array+".json"))
			if err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(b, &want); err != nil {
				t.Fatal(err)
			}
			a, err := tdbarray.Open(context.Background(), st, c.array, tdbarray.Options{})
			if err != nil {
				t.Fatal(err)
			}
			if len(a.Fragments) != 1 || a.Fragments[0].Meta.Footer().Version != c.version {
				t.Fatalf("want one v%d fragment, have %d", c.version, len(a.Fragments))
			}
			f := a.Fragments[0]
			l := NewLoader(a, Options{MemoryBudget: 1 << 20})
			n, err := f.Meta.TileNum()
			if err != nil {
				t.Fatal(err)
			}
			var got []legacygen.Cell
			for ti := range n {
				load := func(name string) *Tile {
					tile, err := l.Load(context.Background(), f, name, ti)
					if err != nil {
						t.Fatalf("%s tile %d: %v", name, ti, err)
					}
					t.Cleanup(tile.Release)
					return tile
				}
				at, st := load("a"), load("s")
				var d1, d2 *Tile
				if c.sparse {
					d1, d2 = load(c.fields[0]), load(c.fields[1])
				}
				for i := range int(at.Cells) {
					cell := legacygen.Cell{A: int32(binary.LittleEndian.Uint32(at.Data[4*i:]))}
					end := uint64(len(st.Data))
					if i+1 < int(st.Cells) {
						end = st.Offset(i + 1)
					}
					cell.S = string(st.Data[st.Offset(i):end])
					if c.sparse {
						cell.D1 = int64(binary.LittleEndian.Uint64(d1.Data[8*i:]))
						cell.D2 = int64(binary.LittleEndian.Uint64(d2.Data[8*i:]))
					}
					got = append(got, cell)
				}
			}
			if len(got) != len(want) {
				t.Fatalf("%d cells, want %d", len(got), len(want))
			}
			for i := range want {
				w := want[i]
				if !c.sparse { // dense tiles carry no coordinates
					w.D1, w.D2 = 0, 0
				}
				if got[i] != w {
					t.Errorf("cell %d: %+v, want %+v", i, got[i], w)
				}
			}
		})
	}
}
