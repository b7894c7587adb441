package fragmeta

import (
	"bytes"
	"encoding/binary"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/tileflight/tileflight/format/datatype"
	"github.com/tileflight/tileflight/format/gentile"
	"github.com/tileflight/tileflight/format/wire"
)

func i32(v int32) []byte { return binary.LittleEndian.AppendUint32(nil, uint32(v)) }
func i64(v int64) []byte { return binary.LittleEndian.AppendUint64(nil, uint64(v)) }

var (
	layout2i32 = Layout{Dims: []Field{{Name: "d1", Type: datatype.Int32, CellValNum: 1}, {Name: "d2", Type: datatype.Int32, CellValNum: 1}},
		Attrs: []Field{{Name: "a", Type: datatype.Int32, CellValNum: 1}, {Name: "s", Type: datatype.StringASCII, CellValNum: VarNum}}}
	layoutVarDim = Layout{Dims: []Field{{Name: "s", Type: datatype.StringASCII, CellValNum: VarNum}, {Name: "x", Type: datatype.Int64, CellValNum: 1}},
		Attrs: []Field{{Name: "a", Type: datatype.Float64, CellValNum: 1, Nullable: true}}}
)

// sampleFooter builds a plausible footer of any version for layout l.
func sampleFooter(l Layout, version uint32, ts, del bool) *Footer {
	f := &Footer{Version: version, Layout: l, SchemaName: legacySchemaName, SparseTileNum: 3, LastTileCellNum: 2}
	if version >= versionSchemaName {
		f.SchemaName = "__1_1_abcdef_22"
	}
	if version >= versionTimestamps {
		f.HasTimestamps = ts
	}
	if version >= versionDeleteMeta {
		f.HasDeleteMeta = del
	}
	for _, d := range l.Dims {
		if d.Var() {
			f.NonEmptyDomain = append(f.NonEmptyDomain, Range{Start: []byte("aa"), End: []byte("zzz")})
		} else {
			f.NonEmptyDomain = append(f.NonEmptyDomain, Range{Start: make([]byte, d.Type.Size()), End: bytes.Repeat([]byte{7}, d.Type.Size())})
		}
	}
	num := f.FieldNum()
	nVar := num
	if version < versionSplitCoords {
		nVar = len(l.Attrs)
	}
	seq := func(n int, base uint64) []uint64 {
		out := make([]uint64, n)
		for i := range out {
			out[i] = base + uint64(i)*3
		}
		return out
	}
	f.FileSizes, f.FileVarSizes = seq(num, 100), seq(nVar, 200)
	o := &f.Offsets
	o.RTree = 0
	o.TileOffsets, o.TileVarOffsets, o.TileVarSizes = seq(num, 10), seq(nVar, 20), seq(nVar, 30)
	if version >= versionValidity {
		f.FileValiditySizes, o.TileValidityOffsets = seq(num, 300), seq(num, 40)
	}
	if version >= versionTileMetadata {
		o.TileMins, o.TileMaxes, o.TileSums, o.TileNullCounts = seq(num, 50), seq(num, 60), seq(num, 70), seq(num, 80)
	}
	if version >= versionFragmentStats {
		o.FragmentStats = 90
	}
	if version >= versionProcessedConds {
		o.ProcessedConditions = 91
	}
	if version >= versionOptionalSection {
		o.GlobalOrderMins, o.GlobalOrderMaxes = seq(len(l.Dims), 92), seq(len(l.Dims), 93)
		f.Optional = []OptionalSection{{ID: optionalTileGlobalOrder}, {ID: 77, Data: []byte("future")}}
	}
	return f
}

// TestFooterVersions encodes a footer of every version, places it at the end
// of a file as TileDB does, and decodes it back, including the pre-v10
// footers whose size is computed rather than stored.
func TestFooterVersions(t *testing.T) {
	cases := []struct {
		name     string
		l        Layout
		versions []uint32
		ts, del  bool
	}{
		{"fixed dims", layout2i32, []uint32{3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 20, 21, 22, 23}, false, false},
		{"var dim", layoutVarDim, []uint32{5, 6, 7, 9, 10, 11, 12, 16, 22, 23}, false, false},
		{"timestamps", layout2i32, []uint32{14, 15, 22, 23}, true, false},
		{"delete meta", layoutVarDim, []uint32{15, 22, 23}, true, true},
	}
	for _, c := range cases {
		for _, v := range c.versions {
			f := sampleFooter(c.l, v, c.ts, c.del)
			fb, err := EncodeFooter(f)
			if err != nil {
				t.Fatalf("%s v%d: %v", c.name, v, err)
			}
			file := append(bytes.Repeat([]byte{0xEE}, 40), fb...)
			if HasFooterLength(&f.Layout, v) {
				file = binary.LittleEndian.AppendUint64(file, uint64(len(fb)))
			} else if n, ok := FixedFooterSize(&f.Layout, v); !ok || n != uint64(len(fb)) {
				t.Fatalf("%s v%d: computed footer size %d (%v), encoded %d", c.name, v, n, ok, len(fb))
			}
			got, err := DecodeFooterTail(file, uint64(len(file)), c.l, v)
			if err != nil {
				t.Fatalf("%s v%d: %v", c.name, v, err)
			}
			f.Size = uint64(len(fb))
			if v >= versionOptionalSection {
				// The global-order section is regenerated from the offsets.
				f.Optional = got.Optional
			}
			if !reflect.DeepEqual(got, f) {
				t.Errorf("%s v%d: decoded footer differs:\n got %+v\nwant %+v", c.name, v, got, f)
			}
			if v >= versionOptionalSection && (len(got.Optional) != 2 || got.Optional[1].ID != 77 || string(got.Optional[1].Data) != "future") {
				t.Errorf("%s v%d: unknown optional section not kept: %+v", c.name, v, got.Optional)
			}
			// A version mismatch between name and footer is corruption,
			// except a v3 footer in a fragment whose __t1_t2_uuid name
			// says 4 (TileDB 1.6 and 1.7 named fragments alike).
			got, err = DecodeFooterTail(file, uint64(len(file)), c.l, v+1)
			if v == 3 {
				if err != nil || got.Version != 3 {
					t.Errorf("%s v3 named v4: %v, version %d", c.name, err, got.Version)
				}
			} else if err == nil {
				t.Errorf("%s v%d: decoding as v%d succeeded", c.name, v, v+1)
			}
		}
	}
}

// TestEncodeVersions writes whole files of several versions and reads them
// back lazily.
func TestEncodeVersions(t *testing.T) {
	for _, v := range []uint32{7, 10, 11, 12, 15, 16, 22, 23} {
		l := layoutVarDim
		m := &Metadata{Footer: *sampleFooter(l, v, false, false)}
		m.Footer.Dense = false
		leaves := []MBR{
			{{Start: []byte("a"), End: []byte("c")}, {Start: i64(1), End: i64(5)}},
			{{Start: []byte("d"), End: []byte("q")}, {Start: i64(-3), End: i64(2)}},
		}
		rt, err := BuildRTree(leaves, DefaultFanout, &l)
		if err != nil {
			t.Fatal(err)
		}
		m.RTree = *rt
		num := m.Footer.FieldNum()
		m.TileOffsets = make([][]uint64, num)
		for i := range m.TileOffsets {
			m.TileOffsets[i] = []uint64{0, uint64(10 + i)}
		}
		if v >= versionTileMetadata {
			m.TileMins = make([]MinMax, num)
			m.TileMins[0] = MinMax{Fixed: append(i64(1), i64(2)...)}
			m.TileSums = make([][]uint64, num)
			m.TileSums[0] = []uint64{3, 4}
		}
		if v >= versionFragmentStats {
			m.FragmentStats = make([]FieldStats, num)
			m.FragmentStats[0] = FieldStats{Min: i64(1), Max: i64(9), Sum: 10}
		}
		if v >= versionProcessedConds {
			m.ProcessedConditions = []string{"__commits/__1_1_x_22.del"}
		}
		if v >= versionOptionalSection {
			m.GlobalOrderMins = []MinMax{{Fixed: append(i64(0), i64(1)...), Var: []byte("ad")}, {Fixed: append(i64(1), i64(-3)...)}}
			m.GlobalOrderMaxes = []MinMax{{Fixed: append(i64(0), i64(1)...), Var: []byte("cq")}, {Fixed: append(i64(5), i64(2)...)}}
		}
		b, nf, err := Encode(m, nil)
		if err != nil {
			t.Fatalf("v%d: %v", v, err)
		}
		mf := &memFile{b: b}
		fr, err := Open(mf.read, uint64(len(b)), l, v, nil)
		if err != nil {
			t.Fatalf("v%d: %v", v, err)
		}
		if !reflect.DeepEqual(fr.Footer().Offsets, nf.Offsets) {
			t.Errorf("v%d: offsets differ", v)
		}
		if mbr, err := fr.MBR(1); err != nil || string(mbr[0].End) != "q" {
			t.Errorf("v%d: MBR(1) = %v, %v", v, mbr, err)
		}
		if off, err := fr.TileOffset(2, 1); err != nil || off != 12 {
			t.Errorf("v%d: TileOffset = %d, %v", v, off, err)
		}
		if v >= versionOptionalSection {
			g, err := fr.GlobalOrderMaxes(0)
			if err != nil {
				t.Fatal(err)
			}
			if val, ok, err := g.Value(1, 0); err != nil || !ok || string(val) != "q" {
				t.Errorf("v%d: global order max of tile 1 = %q %v %v", v, val, ok, err)
			}
		}
		if v >= versionTileMetadata {
			if mn, ok, err := fr.TileMin(0, 1); err != nil || !ok || !bytes.Equal(mn, i64(2)) {
				t.Errorf("v%d: TileMin = %x %v %v", v, mn, ok, err)
			}
		}
		m2, err := LoadAll(fr)
		if err != nil {
			t.Fatalf("v%d: %v", v, err)
		}
		if !reflect.DeepEqual(m2.ProcessedConditions, m.ProcessedConditions) || !reflect.DeepEqual(m2.RTree, m.RTree) {
			t.Errorf("v%d: sections differ after the round trip", v)
		}
	}
}

// TestEncodeZippedVersions writes whole files of versions 3 to 6 (3 and 4
// with the R-tree that records the dimension count and datatype, and var
// sections for the attributes only) and reads them back lazily.
func TestEncodeZippedVersions(t *testing.T) {
	l := layout2i32
	for _, v := range []uint32{3, 4, 5, 6} {
		m := &Metadata{Footer: *sampleFooter(l, v, false, false)}
		m.Footer.Dense = false
		leaves := []MBR{
			{{Start: i32(1), End: i32(2)}, {Start: i32(10), End: i32(10)}},
			{{Start: i32(3), End: i32(4)}, {Start: i32(7), End: i32(10)}},
		}
		rt, err := BuildRTree(leaves, DefaultFanout, &l)
		if err != nil {
			t.Fatal(err)
		}
		m.RTree = *rt
		num := m.Footer.FieldNum()
		m.TileOffsets = make([][]uint64, num)
		for i := range m.TileOffsets {
			m.TileOffsets[i] = []uint64{0, uint64(10 + i)}
		}
		m.TileVarOffsets = [][]uint64{nil, {0, 4}}
		m.TileVarSizes = [][]uint64{nil, {4, 6}}
		b, nf, err := Encode(m, nil)
		if err != nil {
			t.Fatalf("v%d: %v", v, err)
		}
		if v < versionSplitCoords && len(nf.Offsets.TileVarOffsets) != len(l.Attrs) {
			t.Errorf("v%d: %d var offset sections, want one per attribute", v, len(nf.Offsets.TileVarOffsets))
		}
		mf := &memFile{b: b}
		fr, err := Open(mf.read, uint64(len(b)), l, v, nil)
		if err != nil {
			t.Fatalf("v%d: %v", v, err)
		}
		if mbr, err := fr.MBR(1); err != nil || !bytes.Equal(mbr[1].Start, i32(7)) {
			t.Errorf("v%d: MBR(1) = %v, %v", v, mbr, err)
		}
		if off, err := fr.TileOffset(l.CoordsIndex(), 1); err != nil || off != uint64(10+l.CoordsIndex()) {
			t.Errorf("v%d: coordinates TileOffset = %d, %v", v, off, err)
		}
		if sz, err := fr.TileVarSize(1, 1); err != nil || sz != 6 {
			t.Errorf("v%d: TileVarSize = %d, %v", v, sz, err)
		}
		m2, err := LoadAll(fr)
		if err != nil {
			t.Fatalf("v%d: %v", v, err)
		}
		if !reflect.DeepEqual(m2.RTree, m.RTree) {
			t.Errorf("v%d: R-tree differs after the round trip:\n got %+v\nwant %+v", v, m2.RTree, m.RTree)
		}
		if len(m2.TileVarSizes) < 2 || !reflect.DeepEqual(m2.TileVarSizes[1], m.TileVarSizes[1]) || len(m2.TileVarSizes[0]) != 0 {
			t.Errorf("v%d: var sizes differ after the round trip: %v", v, m2.TileVarSizes)
		}
	}
	// Dimensions of two types cannot be zipped into one coordinates file.
	mixed := Layout{Dims: []Field{{Name: "x", Type: datatype.Int32, CellValNum: 1}, {Name: "y", Type: datatype.Int64, CellValNum: 1}},
		Attrs: l.Attrs}
	m := &Metadata{Footer: *sampleFooter(mixed, 4, false, false), RTree: RTree{Fanout: DefaultFanout}}
	if _, _, err := Encode(m, nil); err == nil {
		t.Error("v4 with dimensions of two types: encoded")
	}
}

// legacyPayload builds a pre-v3 metadata tile for layout2i32 (one
// attribute "a" and the var attribute "s").
func legacyPayload(version uint32) []byte {
	w := wire.NewWriter(nil)
	w.Uint32(version)
	w.Uint64(16)
	for _, v := range []int32{1, 4, 10, 10} {
		w.Int32(v)
	}
	w.Uint64(2) // MBRs
	for _, v := range []int32{1, 2, 10, 10, 3, 4, 10, 10} {
		w.Int32(v)
	}
	w.Uint64(2) // bounding coords: skipped
	w.Write(make([]byte, 2*16))
	for _, l := range [][]uint64{{0, 8}, {0, 5}, {0, 16}} { // a, s, coords
		w.Uint64(uint64(len(l)))
		for _, x := range l {
			w.Uint64(x)
		}
	}
	for _, l := range [][]uint64{{}, {0, 9}} { // var offsets: a, s
		w.Uint64(uint64(len(l)))
		for _, x := range l {
			w.Uint64(x)
		}
	}
	for _, l := range [][]uint64{{}, {4, 6}} { // var sizes
		w.Uint64(uint64(len(l)))
		for _, x := range l {
			w.Uint64(x)
		}
	}
	w.Uint64(2) // last tile cell num
	for _, x := range []uint64{16, 10, 32, 0, 20} {
		w.Uint64(x) // file sizes a, s, coords; var sizes a, s
	}
	return w.Bytes()
}

func TestLegacyV1V2(t *testing.T) {
	for _, v := range []uint32{1, 2} {
		tile, err := gentile.Encode(legacyPayload(v), v, nil)
		if err != nil {
			t.Fatal(err)
		}
		mf := &memFile{b: tile}
		l := layout2i32
		fr, err := Open(mf.read, uint64(len(tile)), l, v, nil)
		if err != nil {
			t.Fatalf("v%d: %v", v, err)
		}
		f := fr.Footer()
		if f.Dense || f.SparseTileNum != 2 || f.LastTileCellNum != 2 || f.FieldNum() != 3 {
			t.Errorf("v%d: footer %+v", v, f)
		}
		if r, _ := fr.NonEmptyDomain(0); !bytes.Equal(r.Start, i32(1)) || !bytes.Equal(r.End, i32(4)) {
			t.Errorf("v%d: non-empty domain %v", v, r)
		}
		if mbr, err := fr.MBR(1); err != nil || !bytes.Equal(mbr[0].Start, i32(3)) {
			t.Errorf("v%d: MBR %v %v", v, mbr, err)
		}
		if n, err := fr.TileNum(); err != nil || n != 2 {
			t.Errorf("v%d: TileNum %d %v", v, n, err)
		}
		if s, err := fr.PersistedTileVarSize(1, 1); err != nil || s != 11 {
			t.Errorf("v%d: var tile size %d %v", v, s, err)
		}
		if s, err := fr.PersistedTileSize(l.CoordsIndex(), 1); err != nil || s != 16 {
			t.Errorf("v%d: coords tile size %d %v", v, s, err)
		}
		if n, err := fr.TileVarSize(1, 0); err != nil || n != 4 {
			t.Errorf("v%d: var size %d %v", v, n, err)
		}
		if fd, _ := f.Field(2); fd.Name != CoordsName || fd.CellValNum != 2 {
			t.Errorf("v%d: field 2 is %+v", v, fd)
		}
	}
}

// TestLegacyV3V4 decodes a v3/v4 footer and R-tree (one coords field,
// dimension count and type recorded in the tree).
func TestLegacyV3V4(t *testing.T) {
	l := layout2i32
	w := wire.NewWriter(nil)
	w.Uint32(2)                    // dim num
	w.Uint32(10)                   // fanout
	w.Uint8(uint8(datatype.Int32)) // type
	w.Uint32(1)                    // levels
	w.Uint64(1)                    // MBRs
	for _, v := range []int32{1, 4, 10, 10} {
		w.Int32(v)
	}
	rt, err := DecodeRTree(w.Bytes(), l, 4)
	if err != nil {
		t.Fatal(err)
	}
	if len(rt.Leaves()) != 1 || !bytes.Equal(rt.Leaves()[0][1].End, i32(10)) {
		t.Errorf("R-tree %+v", rt)
	}
	bad := append([]byte(nil), w.Bytes()...)
	bad[0] = 3
	if _, err := DecodeRTree(bad, l, 4); err == nil {
		t.Errorf("wrong dimension count accepted")
	}
}

// TestTileDBLegacyInputs reads TileDB's own backward-compatibility arrays
// when they are present on this machine (they are not redistributed).
func TestTileDBLegacyInputs(t *testing.T) {
	root := "/tmp/legacy/test/inputs/arrays"
	if _, err := os.Stat(root); err != nil {
		t.Skip("TileDB test inputs not present; fixtures under testdata cover the current format")
	}
	v1, _ := filepath.Glob(filepath.Join(root, "non_split_coords_v1_4_0/__*/__fragment_metadata.tdb"))
	v10, _ := filepath.Glob(filepath.Join(root, "zero_var_chunks_v10/__*/__fragment_metadata.tdb"))
	if len(v1) != 1 || len(v10) != 1 {
		t.Fatalf("legacy inputs changed: %v %v", v1, v10)
	}
	// v1, sparse, dims d1/d2 int32, attribute a int32; TileDB reports a
	// non-empty domain ((1, 4), (10, 10)) and 4 cells.
	b, _ := os.ReadFile(v1[0])
	l := Layout{Dims: []Field{{Name: "d1", Type: datatype.Int32, CellValNum: 1}, {Name: "d2", Type: datatype.Int32, CellValNum: 1}},
		Attrs: []Field{{Name: "a", Type: datatype.Int32, CellValNum: 1}}, CellsPerTile: 100000}
	m, err := DecodeLegacy(b, l, nil)
	if err != nil {
		t.Fatal(err)
	}
	ned := m.Footer.NonEmptyDomain
	if !bytes.Equal(ned[0].Start, i32(1)) || !bytes.Equal(ned[0].End, i32(4)) || !bytes.Equal(ned[1].Start, i32(10)) || !bytes.Equal(ned[1].End, i32(10)) {
		t.Errorf("v1 non-empty domain %v", ned)
	}
	if m.Footer.Dense || m.Footer.SparseTileNum != 1 || m.Footer.LastTileCellNum != 4 {
		t.Errorf("v1 footer %+v", m.Footer)
	}
	// v10, sparse, one var string dimension; TileDB reports ('', '') and 1 cell.
	b, _ = os.ReadFile(v10[0])
	l = Layout{Dims: []Field{{Name: "d", Type: datatype.StringASCII, CellValNum: VarNum}},
		Attrs: []Field{{Name: "a", Type: datatype.Int32, CellValNum: 1}}, CellsPerTile: 10000}
	mf := &memFile{b: b}
	fr, err := Open(mf.read, uint64(len(b)), l, 10, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r, _ := fr.NonEmptyDomain(0); len(r.Start) != 0 || len(r.End) != 0 {
		t.Errorf("v10 non-empty domain %q", r)
	}
	if n, err := fr.TileCellNum(0); err != nil || n != 1 {
		t.Errorf("v10 cells %d %v", n, err)
	}
	checkLayoutInvariants(t, fr, 1)
	checkRoundTrip(t, b, fr)
}
