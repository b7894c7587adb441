package arrowconv

import (
	"bytes"
	"encoding/binary"
	"errors"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/array"
	dt "github.com/tileflight/tileflight/format/datatype"
)

func TestGather(t *testing.T) {
	i32 := fld("a", dt.Int32, 1)
	i32tiles := []Tile{
		{Data: le([]int32{0, 1, 2, 3}), N: 4},
		{Data: le([]int32{10, 11, 12, 13}), N: 4},
	}
	str := nullable(fld("s", dt.StringUTF8, VarNum))
	strTiles := []Tile{
		{Data: []byte("aabbbc"), Offsets: u64s(0, 2, 5), Validity: []byte{1, 0, 1}, N: 3},
		{Data: []byte("zz"), Offsets: u64s(0), N: 1}, // no validity: all valid
	}
	fill, err := FillTile(nullable(fld("a", dt.Int32, 1)), le(int32(-1)), true, 2)
	if err != nil {
		t.Fatal(err)
	}
	nullFill, err := FillTile(str, nil, false, 2)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name  string
		f     Field
		tiles []Tile
		runs  []Run
		want  string
	}{
		{"row-major over two tiles", i32, i32tiles, []Run{{0, 0, 2}, {1, 0, 2}, {0, 2, 2}, {1, 2, 2}}, "[0 1 10 11 2 3 12 13]"},
		{"single cells", i32, i32tiles, []Run{{1, 3, 1}, {0, 0, 1}, {1, 0, 1}}, "[13 0 10]"},
		{"empty", i32, i32tiles, nil, "[]"},
		{"var with validity", str, strTiles, []Run{{1, 0, 1}, {0, 1, 2}, {0, 0, 1}}, `["zz" (null) "c" "aa"]`},
		{"fill", nullable(fld("a", dt.Int32, 1)), []Tile{{Data: le([]int32{5}), N: 1}, fill}, []Run{{1, 0, 2}, {0, 0, 1}}, "[-1 -1 5]"},
		{"null fill", str, append(strTiles, nullFill), []Run{{2, 0, 1}, {1, 0, 1}}, `[(null) "zz"]`},
		{"bool", fld("b", dt.Bool, 1), []Tile{{Data: []byte{1, 0, 1}, N: 3}}, []Run{{0, 2, 1}, {0, 1, 1}}, "[true false]"},
		{"var int64 list", fld("v", dt.Int64, VarNum), []Tile{{Data: le([]int64{1, 2, 3}), Offsets: u64s(0, 16), N: 2}}, []Run{{0, 1, 1}, {0, 0, 2}}, "[[3] [1 2] [3]]"},
		{"fixed 3 bytes", fld("c", dt.Char, 3), []Tile{{Data: []byte("abcdef"), N: 2}}, []Run{{0, 1, 1}, {0, 0, 1}}, `["def" "abc"]`},
		{"fixed list", fld("v", dt.Int16, 2), []Tile{{Data: le([]int16{1, 2, 3, 4}), N: 2}}, []Run{{0, 1, 1}, {0, 0, 2}}, "[[3 4] [1 2] [3 4]]"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a, err := Gather(c.f, c.tiles, c.runs)
			if err != nil {
				t.Fatal(err)
			}
			if a.String() != c.want {
				t.Fatalf("got %s, want %s", a, c.want)
			}
		})
	}
}

func TestGatherErrors(t *testing.T) {
	i32 := fld("a", dt.Int32, 1)
	s := fld("s", dt.StringUTF8, VarNum)
	cases := []struct {
		name  string
		f     Field
		tiles []Tile
		runs  []Run
		want  string
	}{
		{"tile index", i32, []Tile{{Data: le(int32(1)), N: 1}}, []Run{{1, 0, 1}}, "run 0: tile 1 of 1"},
		{"run past end", i32, []Tile{{Data: le(int32(1)), N: 1}}, []Run{{0, 0, 2}}, "cells [0, 2) of a 1-cell tile"},
		{"short tile", i32, []Tile{{Data: le(int32(1)), N: 2}}, nil, "tile 0: 4 data bytes for 2 cells"},
		{"bad var offsets", s, []Tile{{Data: []byte("ab"), Offsets: u64s(2, 1), N: 2}}, []Run{{0, 0, 2}}, "tile 0 cell 0: value [2, 1)"},
		{"var offsets count", s, []Tile{{Data: []byte("ab"), Offsets: u64s(0), N: 2}}, nil, "8 offset bytes for 2 cells"},
		{"validity on non-nullable", i32, []Tile{{Data: le(int32(1)), Validity: []byte{1}, N: 1}}, nil, "non-nullable"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Gather(c.f, c.tiles, c.runs)
			if err == nil || !strings.Contains(err.Error(), c.want) || !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error %v, want %q", err, c.want)
			}
		})
	}
}

func TestColumnBuilder(t *testing.T) {
	f := nullable(fld("s", dt.StringASCII, VarNum))
	b := NewColumnBuilder(f)
	tile := []byte("aabbbcd")
	offs := u64s(0, 2, 5, 6)
	// Cells 1..2 of the tile (a batch starting mid-tile), then another tile.
	b.Append(tile[:6], offs[8:24], []byte{1, 0}, 2)
	b.Append([]byte("q"), u64s(0), nil, 1)
	if b.Len() != 3 {
		t.Fatal(b.Len())
	}
	a, err := b.Finish()
	if err != nil {
		t.Fatal(err)
	}
	if got := a.String(); got != `["bbb" (null) "q"]` {
		t.Fatal(got)
	}
	// One piece: wrapped, not copied.
	b.Append(tile, offs, nil, 4)
	a, err = b.Finish()
	if err != nil {
		t.Fatal(err)
	}
	if &a.(*array.LargeString).ValueBytes()[0] != &tile[0] {
		t.Fatal("single piece copied")
	}
	if a, err = b.Finish(); err != nil || a.Len() != 0 {
		t.Fatal("empty finish", err)
	}
}

// FuzzNewColumn feeds arbitrary buffers to every kind of field: the result
// is an array of n cells or an error, never a panic; arrays that come out
// convert back without error and then to the same array.
func FuzzNewColumn(f *testing.F) {
	f.Add(uint8(dt.Int32), uint32(1), true, []byte{1, 0, 0, 0}, []byte{}, []byte{1}, 1)
	f.Add(uint8(dt.StringUTF8), uint32(VarNum), true, []byte("abc"), u64s(0, 1), []byte{1, 0}, 2)
	f.Add(uint8(dt.Int16), uint32(VarNum), false, le([]int16{1, 2}), u64s(0, 2), []byte{}, 2)
	f.Add(uint8(dt.DatetimeDay), uint32(2), false, le([]int64{1, 2}), []byte{}, []byte{}, 1)
	f.Add(uint8(dt.Bool), uint32(1), false, []byte{1, 0, 1}, []byte{}, []byte{}, 3)
	f.Add(uint8(dt.Uint8), uint32(1), false, []byte{1, 3}, []byte{}, []byte{}, 2) // enumeration
	f.Fuzz(func(t *testing.T, typ uint8, cvn uint32, isNullable bool, data, offsets, validity []byte, n int) {
		if cvn != VarNum {
			cvn %= 5
		}
		fl := Field{Name: "f", Type: dt.Datatype(typ % 50), CellValNum: cvn, Nullable: isNullable}
		if typ >= 200 {
			fl.Type = dt.Datatype(typ)
		}
		if typ%7 == 0 {
			fl.Enumeration = &Enumeration{Name: "e", Type: dt.StringUTF8, CellValNum: VarNum, Data: []byte("abcd"), Offsets: u64s(0, 1, 1)}
		}
		if len(validity) == 0 {
			validity = nil
		}
		if n > 1<<20 || n < -1<<20 {
			n %= 1 << 20
		}
		a, err := NewColumn(fl, data, offsets, validity, n)
		if err != nil {
			return
		}
		if a.Len() != n {
			t.Fatalf("%d cells, want %d", a.Len(), n)
		}
		d, o, v, err := ToTileDB(fl, a)
		if err != nil {
			t.Fatalf("round trip of an accepted column: %v", err)
		}
		b, err := NewColumn(fl, d, o, v, n)
		if err != nil {
			t.Fatalf("second NewColumn: %v", err)
		}
		// Compared as bytes: array.Equal treats NaN as unequal to itself.
		d2, o2, v2, err := ToTileDB(fl, b)
		if err != nil || !bytes.Equal(d, d2) || !bytes.Equal(o, o2) || !bytes.Equal(v, v2) {
			t.Fatalf("round trip not stable: %v (%x %x %x then %x %x %x)", err, d, o, v, d2, o2, v2)
		}
		// Gathering every cell in reverse order also works.
		runs := make([]Run, n)
		for i := range runs {
			runs[i] = Run{Start: uint32(n - 1 - i), Len: 1}
		}
		if _, err := Gather(fl, []Tile{{Data: data, Offsets: offsets, Validity: validity, N: n}}, runs); err != nil && !strings.Contains(err.Error(), "fit 32 bits") {
			t.Fatalf("gather of an accepted tile: %v", err)
		}
	})
}

// FuzzToTileDB decodes arbitrary bytes as int64/utf8 Arrow buffers of a
// chosen type and converts them to every field type: errors, never panics.
func FuzzToTileDB(f *testing.F) {
	f.Add(uint8(dt.Int8), uint32(1), le([]int64{1, 300}), 0)
	f.Add(uint8(dt.StringUTF8), uint32(VarNum), []byte("abc"), 1)
	f.Add(uint8(dt.Float32), uint32(VarNum), le([]float64{1.5}), 2)
	f.Fuzz(func(t *testing.T, typ uint8, cvn uint32, raw []byte, kind int) {
		if cvn != VarNum {
			cvn %= 4
		}
		fl := Field{Name: "f", Type: dt.Datatype(typ % 44), CellValNum: cvn, Nullable: typ&64 != 0}
		if typ&128 != 0 {
			fl.Enumeration = enumColors
			fl.Type = dt.Int16
			fl.CellValNum = 1
		}
		var src Field
		switch kind & 7 {
		case 0:
			src = fld("s", dt.Int64, 1)
		case 1:
			src = fld("s", dt.StringUTF8, VarNum)
		case 2:
			src = fld("s", dt.Float64, 1)
		case 3:
			src = fld("s", dt.DatetimeMs, 1)
		case 4:
			src = fld("s", dt.Int32, VarNum)
		case 5:
			src = fld("s", dt.Bool, 1)
		case 6:
			src = fld("s", dt.Float64, 2)
		default:
			src = fld("s", dt.DatetimeDay, 1)
		}
		var a interface{ Len() int }
		n := 0
		var offsets []byte
		if src.IsVar() {
			n = len(raw) / 9
			offsets = make([]byte, 8*n)
			for i := 0; i < n; i++ {
				binary.LittleEndian.PutUint64(offsets[8*i:], uint64(raw[i])%uint64(len(raw)+1))
			}
			// make them non-decreasing
			var prev uint64
			for i := 0; i < n; i++ {
				o := binary.LittleEndian.Uint64(offsets[8*i:])
				if o < prev {
					o = prev
				}
				binary.LittleEndian.PutUint64(offsets[8*i:], o)
				prev = o
			}
		} else {
			n = len(raw) / src.CellSize()
			raw = raw[:n*src.CellSize()]
		}
		arr, err := NewColumn(src, raw, offsets, nil, n)
		if err != nil {
			return
		}
		a = arr
		_ = a
		for _, sl := range []int64{0, int64(n / 2)} {
			s := array.NewSlice(arr, sl, int64(n))
			d, o, v, err := ToTileDB(fl, s)
			if err != nil {
				continue
			}
			if _, err := NewColumn(fl, d, o, v, s.Len()); err != nil && !strings.Contains(err.Error(), "fit 32 bits") {
				t.Fatalf("ToTileDB output rejected by NewColumn: %v", err)
			}
		}
	})
}
