package fragmeta

import (
	"path/filepath"
	"reflect"
	"testing"

	"github.com/tileflight/tileflight/format/gentile"
	"github.com/tileflight/tileflight/internal/golden"
)

// fuzzLayouts are the field layouts the fuzzers decode with: fixed and
// var-sized dimensions, nullable and var attributes.
var fuzzLayouts = []Layout{layout2i32, layoutVarDim}

func goldenFiles(f *testing.F, pattern string) [][]byte {
	return golden.Seeds(f, filepath.Join("testdata", "*", pattern))
}

func FuzzFooter(f *testing.F) {
	for _, l := range fuzzLayouts {
		for _, v := range []uint32{3, 5, 7, 10, 11, 12, 15, 16, 22, 23} {
			if !l.allFixedDims() && v < versionSplitCoords {
				continue
			}
			fb, err := EncodeFooter(sampleFooter(l, v, v >= 14, v >= 15))
			if err != nil {
				f.Fatal(err)
			}
			f.Add(fb, uint8(v), false)
		}
	}
	f.Fuzz(func(t *testing.T, b []byte, v uint8, varLayout bool) {
		l := fuzzLayouts[0]
		if varLayout {
			l = fuzzLayouts[1]
		}
		version := uint32(v%24) + 1
		ft, err := DecodeFooter(b, l, version)
		if err == nil {
			// Whatever decodes re-encodes to a footer that decodes the same
			// (flag bytes other than 0/1 normalize).
			enc, err := EncodeFooter(ft)
			if err != nil {
				t.Fatalf("decoded footer does not encode: %v", err)
			}
			ft2, err := DecodeFooter(enc, l, version)
			if err != nil {
				t.Fatalf("re-encoded footer does not decode: %v", err)
			}
			if ft2.Size != uint64(len(enc)) || !reflect.DeepEqual(ft2.NonEmptyDomain, ft.NonEmptyDomain) ||
				!reflect.DeepEqual(ft2.Offsets.TileOffsets, ft.Offsets.TileOffsets) || ft2.SchemaName != ft.SchemaName {
				t.Fatalf("re-encoded footer differs")
			}
		}
		DecodeFooterTail(b, uint64(len(b)), l, version)
		LocateFooter(b, uint64(len(b))+uint64(v), &l, version)
	})
}

func FuzzRTree(f *testing.F) {
	for _, l := range fuzzLayouts {
		leaves := []MBR{}
		for i := 0; i < 23; i++ {
			m := MBR{}
			for _, d := range l.Dims {
				if d.Var() {
					m = append(m, Range{Start: []byte{byte(i)}, End: []byte{byte(i), 1}})
				} else {
					m = append(m, Range{Start: make([]byte, d.Type.Size()), End: make([]byte, d.Type.Size())})
				}
			}
			leaves = append(leaves, m)
		}
		rt, _ := BuildRTree(leaves, DefaultFanout, &l)
		b, err := EncodeRTree(rt, &l)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b, uint8(22), !l.allFixedDims())
	}
	f.Fuzz(func(t *testing.T, b []byte, v uint8, varLayout bool) {
		l := fuzzLayouts[0]
		if varLayout {
			l = fuzzLayouts[1]
		}
		rt, err := DecodeRTree(b, l, uint32(v%24)+1)
		if err != nil {
			return
		}
		if len(rt.Leaves()) > 0 && rt.Fanout >= 2 {
			if _, err := BuildRTree(rt.Leaves(), rt.Fanout, &l); err != nil {
				t.Fatalf("decoded leaves do not build: %v", err)
			}
		}
		if uint32(v%24)+1 >= versionSplitCoords {
			if _, err := EncodeRTree(rt, &l); err != nil {
				t.Fatalf("decoded tree does not encode: %v", err)
			}
		}
	})
}

func FuzzSections(f *testing.F) {
	f.Add(EncodeU64List([]uint64{0, 10, 20}), uint8(0))
	f.Add(EncodeMinMax(MinMax{Fixed: append(i64(0), i64(3)...), Var: []byte("abcdef")}), uint8(1))
	f.Add(EncodeFragmentStats([]FieldStats{{Min: i64(1), Max: i64(2), Sum: 3, NullCount: 4}}), uint8(2))
	f.Add(EncodeProcessedConditions([]string{"__commits/x.del"}), uint8(3))
	f.Fuzz(func(t *testing.T, b []byte, kind uint8) {
		switch kind % 4 {
		case 0:
			if v, err := U64List(b, "tile offsets"); err == nil && string(EncodeU64List(v)) != string(b[:8+8*len(v)]) {
				t.Fatal("u64 list round trip")
			}
		case 1:
			m, err := DecodeMinMax(b, "tile mins")
			if err != nil {
				return
			}
			for i := uint64(0); i < 4; i++ {
				m.Value(i, 0)
				m.Value(i, 8)
				m.Value(i, 3)
			}
		case 2:
			DecodeFragmentStats(b, int(kind/4)+1)
		case 3:
			DecodeProcessedConditions(b)
		}
	})
}

// FuzzFragment drives the lazy accessors over a corrupted whole file.
func FuzzFragment(f *testing.F) {
	for _, b := range goldenFiles(f, "__1_3_*.tdb") {
		f.Add(b)
	}
	l := Layout{Dims: []Field{{Name: "x", Type: 0, CellValNum: 1}}, Attrs: []Field{{Name: "a", Type: 0, CellValNum: 1}}, CellsPerTile: 4}
	f.Fuzz(func(t *testing.T, b []byte) {
		mf := &memFile{b: b}
		fr, err := Open(mf.read, uint64(len(b)), l, 22, nil)
		if err != nil {
			return
		}
		n, _ := fr.TileNum()
		for i := uint64(0); i < min(n, 4); i++ {
			fr.MBR(i)
			fr.PersistedTileSize(0, i)
			fr.TileMin(0, i)
			fr.TileSum(0, i)
			fr.TileCellNum(i)
		}
		LoadAll(fr)
	})
}

func FuzzConsolidated(f *testing.F) {
	for _, b := range goldenFiles(f, "*.meta") {
		f.Add(b)
		if _, p, _, err := gentile.Decode(b, nil); err == nil {
			f.Add(p)
		}
	}
	l := Layout{Dims: []Field{{Name: "s", Type: 11, CellValNum: VarNum}, {Name: "x", Type: 0, CellValNum: 1}},
		Attrs: []Field{{Name: "a", Type: 0, CellValNum: 1}}}
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := DecodeConsolidated(b, nil)
		if err != nil {
			if c, err = DecodeConsolidatedPayload(b); err != nil {
				return
			}
		}
		for i := range c.Entries {
			c.Footer(i, l, 22)
			_ = c.Entries[i].FragmentName() // must not panic
		}
	})
}

func FuzzLegacy(f *testing.F) {
	for _, v := range []uint32{1, 2} {
		f.Add(legacyPayload(v))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := decodeLegacyPayload(b, layout2i32)
		if err != nil {
			return
		}
		if uint64(len(m.RTree.Leaves())) != m.Footer.SparseTileNum {
			t.Fatalf("%d leaves for %d tiles", len(m.RTree.Leaves()), m.Footer.SparseTileNum)
		}
		tile, err := gentile.Encode(b, 1, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := DecodeLegacy(tile, layout2i32, nil); err != nil {
			t.Fatalf("payload decodes but its tile does not: %v", err)
		}
	})
}
