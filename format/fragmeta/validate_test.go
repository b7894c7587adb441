package fragmeta

import (
	"encoding/binary"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/tileflight/tileflight/format/datatype"
	"github.com/tileflight/tileflight/format/wire"
)

func le64(v int64) []byte { return binary.LittleEndian.AppendUint64(nil, uint64(v)) }

func TestValidate(t *testing.T) {
	l := Layout{Dims: []Field{{Name: "x", Type: datatype.Int64, CellValNum: 1}, {Name: "s", Type: datatype.StringASCII, CellValNum: VarNum}},
		Attrs: []Field{{Name: "v", Type: datatype.Float64, CellValNum: 1}}, CellsPerTile: 10}
	domain := MBR{{Start: le64(0), End: le64(100)}, {}}
	good := func() *Footer {
		return &Footer{Version: 22, Layout: l, SparseTileNum: 2, LastTileCellNum: 3,
			NonEmptyDomain: MBR{{Start: le64(5), End: le64(50)}, {Start: []byte("a"), End: []byte("q")}}}
	}
	leaves := func() []MBR {
		return []MBR{
			{{Start: le64(5), End: le64(20)}, {Start: []byte("a"), End: []byte("c")}},
			{{Start: le64(21), End: le64(50)}, {Start: []byte("d"), End: []byte("q")}},
		}
	}
	f64 := Layout{Dims: []Field{{Name: "f", Type: datatype.Float64, CellValNum: 1}}, CellsPerTile: 10}
	nan := binary.LittleEndian.AppendUint64(nil, math.Float64bits(math.NaN()))
	cases := []struct {
		name   string
		footer func(*Footer)
		leaves func([]MBR) []MBR
		domain MBR
		want   string // "" = valid
	}{
		{name: "consistent", want: ""},
		{name: "inverted", footer: func(f *Footer) { f.NonEmptyDomain[0].Start = le64(60) }, want: `dimension "x" is inverted: start 60 > end 50`},
		{name: "inverted var dim", footer: func(f *Footer) { f.NonEmptyDomain[1].Start = []byte("z") }, want: `dimension "s" is inverted`},
		{name: "below the domain", footer: func(f *Footer) { f.NonEmptyDomain[0].Start = le64(-1) }, want: "outside the array's domain [0, 100]"},
		{name: "above the domain", footer: func(f *Footer) { f.NonEmptyDomain[0].End = le64(101) }, want: "outside the array's domain"},
		{name: "wrong size", footer: func(f *Footer) { f.NonEmptyDomain[0].End = []byte{1} }, want: "bounds of 8 and 1 bytes"},
		{name: "missing a dimension", footer: func(f *Footer) { f.NonEmptyDomain = f.NonEmptyDomain[:1] }, want: "1 ranges for 2 dimensions"},
		{name: "sparse without one", footer: func(f *Footer) { f.NonEmptyDomain = nil }, want: "records no non-empty domain"},
		{name: "empty last tile", footer: func(f *Footer) { f.LastTileCellNum = 0 }, want: "last tile holds 0 cells"},
		{name: "last tile past capacity", footer: func(f *Footer) { f.LastTileCellNum = 11 }, want: "last tile holds 11 cells (capacity 10)"},
		{name: "NaN", footer: func(f *Footer) {
			f.Layout = f64
			f.NonEmptyDomain = MBR{{Start: nan, End: le64(0)}}
		}, domain: MBR{{}}, want: `dimension "f" is NaN`},
		{name: "MBR outside the non-empty domain", leaves: func(m []MBR) []MBR { m[1][0].End = le64(51); return m },
			want: "MBR of tile 1 on dimension \"x\", [21, 51], is outside the fragment's non-empty domain [5, 50]"},
		{name: "MBR of a var dim outside", leaves: func(m []MBR) []MBR { m[0][1].Start = []byte("0"); return m }, want: "MBR of tile 0 on dimension \"s\""},
		{name: "inverted MBR", leaves: func(m []MBR) []MBR { m[0][0].Start = le64(30); return m }, want: "MBR of tile 0 of dimension \"x\" is inverted"},
		{name: "fewer MBRs than tiles", leaves: func(m []MBR) []MBR { return m[:1] }, want: "R-tree has 1 tile MBRs, footer says 2 sparse tiles"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := good()
			if tc.footer != nil {
				tc.footer(f)
			}
			d := domain
			if tc.domain != nil {
				d = tc.domain
			}
			err := f.Validate(d)
			if err == nil {
				m := leaves()
				if tc.leaves != nil {
					m = tc.leaves(m)
				}
				err = f.ValidateRTree(&RTree{Fanout: 10, Levels: [][]MBR{m}})
			}
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !errors.Is(err, wire.ErrCorrupt) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want corruption saying %q", err, tc.want)
			}
		})
	}
	// Dense fragments have no tile MBRs to check.
	f := good()
	f.Dense = true
	if err := f.ValidateRTree(&RTree{}); err != nil {
		t.Fatal(err)
	}
}
