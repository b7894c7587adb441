package fragmeta

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"math"
	"os"
	"path"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/tileflight/tileflight/format/datatype"
	"github.com/tileflight/tileflight/format/gentile"
	"github.com/tileflight/tileflight/internal/golden"
)

// The golden cases are written by python_tests/golden/fragmeta_cases.py
// with the tiledb package (TileDB 2.30).

type goldenField struct {
	Name       string `json:"name"`
	Type       int    `json:"type"`
	CellValNum uint32 `json:"cell_val_num"`
	Nullable   bool   `json:"nullable"`
}

type goldenInfo struct {
	Name            string            `json:"name"`
	Version         uint32            `json:"version"`
	TimestampRange  [2]uint64         `json:"timestamp_range"`
	NonEmptyDomain  []json.RawMessage `json:"nonempty_domain"`
	CellNum         uint64            `json:"cell_num"`
	Dense           bool              `json:"dense"`
	SchemaName      string            `json:"schema_name"`
	HasConsolidated bool              `json:"has_consolidated_metadata"`
}

type goldenAttrFacts struct {
	NullCount uint64  `json:"null_count"`
	Min       *string `json:"min"`
	Max       *string `json:"max"`
	Sum       *string `json:"sum"`
}

type goldenTile struct {
	CellNum uint64                     `json:"cell_num"`
	MBR     [][2]string                `json:"mbr"`
	Attrs   map[string]goldenAttrFacts `json:"attrs"`
}

type goldenCase struct {
	Layout struct {
		Dense        bool          `json:"dense"`
		Dims         []goldenField `json:"dims"`
		Attrs        []goldenField `json:"attrs"`
		CellsPerTile uint64        `json:"cells_per_tile"`
	} `json:"layout"`
	Fragments           []goldenInfo `json:"fragments"`
	Files               []string     `json:"files"`
	MetaFiles           []string     `json:"meta_files"`
	Tiles               []goldenTile `json:"tiles"`
	HasTimestamps       bool         `json:"has_timestamps"`
	HasDeleteMeta       bool         `json:"has_delete_meta"`
	ProcessedConditions []string     `json:"processed_conditions"`
}

func (g *goldenCase) layout() Layout {
	conv := func(fs []goldenField) []Field {
		var out []Field
		for _, f := range fs {
			out = append(out, Field{Name: f.Name, Type: datatype.Datatype(f.Type), CellValNum: f.CellValNum, Nullable: f.Nullable})
		}
		return out
	}
	return Layout{Dense: g.Layout.Dense, Dims: conv(g.Layout.Dims), Attrs: conv(g.Layout.Attrs), CellsPerTile: g.Layout.CellsPerTile}
}

func loadCases(t *testing.T) map[string]*goldenCase {
	t.Helper()
	dirs, err := filepath.Glob("testdata/*/case.json")
	if err != nil || len(dirs) == 0 {
		t.Fatalf("no golden cases in testdata (regenerate with python_tests/golden/fragmeta_cases.py): %v", err)
	}
	out := map[string]*goldenCase{}
	for _, p := range dirs {
		var c goldenCase
		golden.ReadJSON(t, p, &c)
		out[filepath.Base(filepath.Dir(p))] = &c
	}
	return out
}

func nameVersion(t *testing.T, name string) uint32 {
	t.Helper()
	i := strings.LastIndexByte(name, '_')
	v, err := strconv.ParseUint(name[i+1:], 10, 32)
	if err != nil {
		t.Fatalf("fragment name %q: %v", name, err)
	}
	return uint32(v)
}

// memFile serves ranged reads from b and counts them.
type memFile struct {
	b     []byte
	reads atomic.Int64
}

func (m *memFile) read(off, n uint64) ([]byte, error) {
	m.reads.Add(1)
	if off > uint64(len(m.b)) || n > uint64(len(m.b))-off {
		return nil, os.ErrInvalid
	}
	return m.b[off : off+n], nil
}

// rangeMatchesJSON compares a decoded range with TileDB's nonempty_domain
// entry (numbers, or {"bytes": hex} for strings).
func rangeMatchesJSON(t *testing.T, dim Field, rg Range, raw json.RawMessage) {
	t.Helper()
	var pair [2]json.RawMessage
	if err := json.Unmarshal(raw, &pair); err != nil {
		t.Fatalf("nonempty domain %s: %v", raw, err)
	}
	for i, got := range [][]byte{rg.Start, rg.End} {
		var want []byte
		if bytes.HasPrefix(pair[i], []byte("{")) {
			var s struct{ Bytes string }
			json.Unmarshal(pair[i], &s)
			want, _ = hex.DecodeString(s.Bytes)
		} else {
			want = make([]byte, dim.Type.Size())
			switch {
			case dim.Type.IsFloat():
				f, _ := strconv.ParseFloat(string(pair[i]), 64)
				if dim.Type == datatype.Float32 {
					binary.LittleEndian.PutUint32(want, math.Float32bits(float32(f)))
				} else {
					binary.LittleEndian.PutUint64(want, math.Float64bits(f))
				}
			default:
				v, err := strconv.ParseInt(string(pair[i]), 10, 64)
				if err != nil {
					t.Fatalf("nonempty domain value %s: %v", pair[i], err)
				}
				var b8 [8]byte
				binary.LittleEndian.PutUint64(b8[:], uint64(v))
				copy(want, b8[:])
			}
		}
		if !bytes.Equal(got, want) {
			t.Errorf("dimension %q non-empty domain bound %d: got %x, TileDB reports %x", dim.Name, i, got, want)
		}
	}
}

func hexOf(s *string) []byte {
	b, _ := hex.DecodeString(*s)
	return b
}

func TestGoldenFragments(t *testing.T) {
	for name, c := range loadCases(t) {
		t.Run(name, func(t *testing.T) {
			l := c.layout()
			infos := map[string]goldenInfo{}
			for _, fi := range c.Fragments {
				infos[fi.Name] = fi
			}
			for _, fname := range c.Files {
				b, err := os.ReadFile(filepath.Join("testdata", name, fname+".tdb"))
				if err != nil {
					t.Fatal(err)
				}
				info, ok := infos[fname]
				if !ok {
					t.Fatalf("%s: TileDB did not report this fragment", fname)
				}
				mf := &memFile{b: b}
				fr, err := Open(mf.read, uint64(len(b)), l, nameVersion(t, fname), nil)
				if err != nil {
					t.Fatalf("%s: %v", fname, err)
				}
				if n := mf.reads.Load(); n != 1 {
					t.Errorf("opening read %d times, want 1 (the tail)", n)
				}
				f := fr.Footer()
				if f.Version != info.Version || f.SchemaName != info.SchemaName || f.Dense != info.Dense {
					t.Errorf("footer version/schema/dense = %d %q %v, TileDB: %d %q %v", f.Version, f.SchemaName, f.Dense, info.Version, info.SchemaName, info.Dense)
				}
				if f.HasTimestamps != c.HasTimestamps || f.HasDeleteMeta != c.HasDeleteMeta {
					t.Errorf("timestamps/delete meta = %v/%v, want %v/%v", f.HasTimestamps, f.HasDeleteMeta, c.HasTimestamps, c.HasDeleteMeta)
				}
				for d, dim := range l.Dims {
					rg, ok := fr.NonEmptyDomain(d)
					if !ok {
						t.Fatalf("no non-empty domain for %q", dim.Name)
					}
					rangeMatchesJSON(t, dim, rg, info.NonEmptyDomain[d])
				}
				tn, err := fr.TileNum()
				if err != nil {
					t.Fatal(err)
				}
				var cells uint64
				for i := uint64(0); i < tn; i++ {
					n, err := fr.TileCellNum(i)
					if err != nil {
						t.Fatal(err)
					}
					cells += n
				}
				if !f.Dense && cells != info.CellNum {
					t.Errorf("cells over all tiles = %d, TileDB reports %d", cells, info.CellNum)
				}
				if f.Dense && cells != info.CellNum {
					t.Errorf("dense: tiles x cells per tile = %d, TileDB reports %d", cells, info.CellNum)
				}
				checkTiles(t, fr, c, tn)
				checkLayoutInvariants(t, fr, tn)
				if c.ProcessedConditions != nil {
					pc, err := fr.ProcessedConditions()
					if err != nil {
						t.Fatal(err)
					}
					// TileDB records the marker's path relative to the array.
					var base []string
					for _, p := range pc {
						base = append(base, path.Base(p))
					}
					if !reflect.DeepEqual(base, c.ProcessedConditions) || !strings.HasPrefix(pc[0], "__commits/") {
						t.Errorf("processed conditions %q, want %q", pc, c.ProcessedConditions)
					}
				}
				if name == "sparse_int" {
					// 115 tiles under fanout 10: leaves, 12, 2, root.
					rt, _ := fr.RTree()
					if len(rt.Levels) != 4 || len(rt.Levels[1]) != 2 || rt.Fanout != DefaultFanout {
						t.Errorf("R-tree has %d levels, fanout %d", len(rt.Levels), rt.Fanout)
					}
				}
				checkRoundTrip(t, b, fr)
			}
		})
	}
}

func checkTiles(t *testing.T, fr *Fragment, c *goldenCase, tn uint64) {
	t.Helper()
	if c.Tiles == nil {
		return
	}
	if uint64(len(c.Tiles)) != tn {
		t.Fatalf("%d tiles, expected %d", tn, len(c.Tiles))
	}
	l := &fr.Footer().Layout
	for ti, want := range c.Tiles {
		tile := uint64(ti)
		if n, _ := fr.TileCellNum(tile); n != want.CellNum {
			t.Errorf("tile %d: %d cells, want %d", ti, n, want.CellNum)
		}
		if want.MBR != nil {
			mbr, err := fr.MBR(tile)
			if err != nil {
				t.Fatal(err)
			}
			for d, rg := range mbr {
				if hex.EncodeToString(rg.Start) != want.MBR[d][0] || hex.EncodeToString(rg.End) != want.MBR[d][1] {
					t.Errorf("tile %d dim %q MBR [%x, %x], want [%s, %s]", ti, l.Dims[d].Name, rg.Start, rg.End, want.MBR[d][0], want.MBR[d][1])
				}
			}
		}
		for ai, a := range l.Attrs {
			wf := want.Attrs[a.Name]
			field := l.AttrIndex(ai)
			nc, ok, err := fr.TileNullCount(field, tile)
			if err != nil {
				t.Fatal(err)
			}
			if a.Nullable != ok || nc != wf.NullCount {
				t.Errorf("tile %d %q: null count %d (present %v), want %d", ti, a.Name, nc, ok, wf.NullCount)
			}
			mn, okMin, err := fr.TileMin(field, tile)
			if err != nil {
				t.Fatal(err)
			}
			mx, okMax, err := fr.TileMax(field, tile)
			if err != nil {
				t.Fatal(err)
			}
			if wf.Min != nil {
				if !okMin || !bytes.Equal(mn, hexOf(wf.Min)) || !okMax || !bytes.Equal(mx, hexOf(wf.Max)) {
					t.Errorf("tile %d %q: min/max %x/%x (present %v/%v), want %s/%s", ti, a.Name, mn, mx, okMin, okMax, *wf.Min, *wf.Max)
				}
			}
			if wf.Sum != nil {
				s, ok, err := fr.TileSum(field, tile)
				if err != nil {
					t.Fatal(err)
				}
				var got [8]byte
				binary.LittleEndian.PutUint64(got[:], s)
				if !ok || !bytes.Equal(got[:], hexOf(wf.Sum)) {
					t.Errorf("tile %d %q: sum %x (present %v), want %s", ti, a.Name, got, ok, *wf.Sum)
				}
			}
		}
	}
}

// checkLayoutInvariants checks what must hold for any TileDB fragment: the
// tile offsets of each file start at 0, increase and end within the file.
func checkLayoutInvariants(t *testing.T, fr *Fragment, tn uint64) {
	t.Helper()
	f := fr.Footer()
	for i := 0; i < f.FieldNum(); i++ {
		fd, _ := f.Field(i)
		offs, err := fr.TileOffsets(i)
		if err != nil {
			t.Fatal(err)
		}
		if fd.Name == CoordsName {
			// From v5 no __coords.tdb is written: its offsets are zeros.
			for _, o := range offs {
				if o != 0 || f.FileSizes[i] != 0 {
					t.Errorf("v5+ fragment has zipped-coords tiles %v, file size %d", offs, f.FileSizes[i])
					break
				}
			}
			continue
		}
		if uint64(len(offs)) != tn {
			t.Errorf("field %q: %d tile offsets for %d tiles", fd.Name, len(offs), tn)
		}
		var total uint64
		for ti := range offs {
			if ti == 0 && offs[0] != 0 {
				t.Errorf("field %q: first tile at %d", fd.Name, offs[0])
			}
			n, err := fr.PersistedTileSize(i, uint64(ti))
			if err != nil {
				t.Fatal(err)
			}
			total += n
		}
		if total != f.FileSizes[i] {
			t.Errorf("field %q: tiles add up to %d bytes, file size %d", fd.Name, total, f.FileSizes[i])
		}
		if fd.Var() {
			vs, err := fr.TileVarSizes(i)
			if err != nil || uint64(len(vs)) != tn {
				t.Errorf("field %q: %d var sizes (%v)", fd.Name, len(vs), err)
			}
			var vt uint64
			for ti := uint64(0); ti < tn; ti++ {
				n, err := fr.PersistedTileVarSize(i, ti)
				if err != nil {
					t.Fatal(err)
				}
				vt += n
			}
			if vt != f.FileVarSizes[i] {
				t.Errorf("field %q: var tiles add up to %d, file var size %d", fd.Name, vt, f.FileVarSizes[i])
			}
		}
		if fd.Nullable {
			var vt uint64
			for ti := uint64(0); ti < tn; ti++ {
				n, err := fr.PersistedTileValiditySize(i, ti)
				if err != nil {
					t.Fatal(err)
				}
				vt += n
			}
			if vt != f.FileValiditySizes[i] {
				t.Errorf("field %q: validity tiles add up to %d, file size %d", fd.Name, vt, f.FileValiditySizes[i])
			}
		}
	}
	if !f.Dense {
		rt, err := fr.RTree()
		if err != nil {
			t.Fatal(err)
		}
		if uint64(len(rt.Leaves())) != tn {
			t.Errorf("%d R-tree leaves for %d tiles", len(rt.Leaves()), tn)
		}
		rebuilt, err := BuildRTree(rt.Leaves(), rt.Fanout, &f.Layout)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(rebuilt, rt) {
			t.Errorf("R-tree rebuilt from its leaves differs from TileDB's (%d vs %d levels)", len(rebuilt.Levels), len(rt.Levels))
		}
	}
}

// rawSections returns every section payload of a TileDB-written file,
// keyed by its offset, plus the raw footer bytes.
func rawSections(t *testing.T, b []byte, f *Footer) (map[uint64][]byte, map[uint64]gentile.Header, []byte) {
	t.Helper()
	end := uint64(len(b))
	if HasFooterLength(&f.Layout, f.Version) {
		end -= 8
	}
	footer := b[end-f.Size : end]
	out := map[uint64][]byte{}
	hdrs := map[uint64]gentile.Header{}
	for off := 0; uint64(off) < end-f.Size; {
		h, p, n, err := gentile.Decode(b[off:], nil)
		if err != nil {
			t.Fatalf("section at %d: %v", off, err)
		}
		out[uint64(off)] = p
		hdrs[uint64(off)] = h
		off += n
	}
	return out, hdrs, footer
}

func checkRoundTrip(t *testing.T, b []byte, fr *Fragment) {
	t.Helper()
	f := fr.Footer()
	m, err := LoadAll(fr)
	if err != nil {
		t.Fatal(err)
	}
	raw, hdrs, footer := rawSections(t, b, f)

	// The footer re-encodes byte for byte.
	fb, err := EncodeFooter(f)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(fb, footer) {
		t.Errorf("re-encoded footer differs from TileDB's:\n got %x\nwant %x", fb, footer)
	}

	// Every section payload re-encodes byte for byte.
	o := &f.Offsets
	type sec struct {
		what string
		off  uint64
		enc  []byte
	}
	rt, err := EncodeRTree(&m.RTree, &f.Layout)
	if err != nil {
		t.Fatal(err)
	}
	secs := []sec{{"R-tree", o.RTree, rt},
		{"fragment stats", o.FragmentStats, EncodeFragmentStats(m.FragmentStats)},
		{"processed conditions", o.ProcessedConditions, EncodeProcessedConditions(m.ProcessedConditions)}}
	if f.Version < versionProcessedConds {
		secs = secs[:len(secs)-1]
	}
	if f.Version < versionFragmentStats {
		secs = secs[:1]
	}
	add := func(what string, offs []uint64, enc func(i int) []byte) {
		for i, off := range offs {
			secs = append(secs, sec{what, off, enc(i)})
		}
	}
	add("tile offsets", o.TileOffsets, func(i int) []byte { return EncodeU64List(m.TileOffsets[i]) })
	add("tile var offsets", o.TileVarOffsets, func(i int) []byte { return EncodeU64List(m.TileVarOffsets[i]) })
	add("tile var sizes", o.TileVarSizes, func(i int) []byte { return EncodeU64List(m.TileVarSizes[i]) })
	add("tile validity offsets", o.TileValidityOffsets, func(i int) []byte { return EncodeU64List(m.TileValidityOffsets[i]) })
	add("tile mins", o.TileMins, func(i int) []byte { return EncodeMinMax(m.TileMins[i]) })
	add("tile maxes", o.TileMaxes, func(i int) []byte { return EncodeMinMax(m.TileMaxes[i]) })
	add("tile sums", o.TileSums, func(i int) []byte { return EncodeU64List(m.TileSums[i]) })
	add("tile null counts", o.TileNullCounts, func(i int) []byte { return EncodeU64List(m.TileNullCounts[i]) })
	add("global order mins", o.GlobalOrderMins, func(i int) []byte { return EncodeMinMax(m.GlobalOrderMins[i]) })
	add("global order maxes", o.GlobalOrderMaxes, func(i int) []byte { return EncodeMinMax(m.GlobalOrderMaxes[i]) })
	if len(secs) != len(raw) {
		t.Errorf("footer points at %d sections, file holds %d", len(secs), len(raw))
	}
	for _, s := range secs {
		if !bytes.Equal(s.enc, raw[s.off]) {
			t.Errorf("%s at %d: re-encoded payload differs:\n got %x\nwant %x", s.what, s.off, s.enc, raw[s.off])
		}
	}

	// The whole file written by Encode decodes to the same metadata, with
	// sections in TileDB's order and headers like TileDB's.
	out, nf, err := Encode(m, nil)
	if err != nil {
		t.Fatal(err)
	}
	mf := &memFile{b: out}
	fr2, err := Open(mf.read, uint64(len(out)), f.Layout, f.Version, nil)
	if err != nil {
		t.Fatalf("re-reading encoded file: %v", err)
	}
	m2, err := LoadAll(fr2)
	if err != nil {
		t.Fatal(err)
	}
	m2.Footer.Offsets, m.Footer.Offsets = Offsets{}, Offsets{}
	m2.Footer.Size, m.Footer.Size = 0, 0
	if !reflect.DeepEqual(normalize(m), normalize(m2)) {
		t.Errorf("encoded file decodes to different metadata")
	}
	if !reflect.DeepEqual(sortedKeys(raw), sectionOrder(f)) {
		t.Errorf("TileDB's section order is not the footer's field order")
	}
	raw2, hdrs2, _ := rawSections(t, out, nf)
	if !reflect.DeepEqual(sectionOrder(nf), sortedKeys(raw2)) {
		t.Errorf("our section order differs from TileDB's")
	}
	if len(raw2) != len(raw) {
		t.Errorf("we wrote %d sections, TileDB %d", len(raw2), len(raw))
	}
	// Headers match section by section (sizes aside, which depend on the
	// compressor).
	k1, k2 := sortedKeys(raw), sortedKeys(raw2)
	for i := range min(len(k1), len(k2)) {
		h, h2 := hdrs[k1[i]], hdrs2[k2[i]]
		h.PersistedSize, h2.PersistedSize = 0, 0
		if !reflect.DeepEqual(h, h2) {
			t.Errorf("section %d: generic tile header %+v, TileDB wrote %+v", i, h2, h)
		}
	}
}

// sectionOrder lists section offsets in the order TileDB writes sections.
func sectionOrder(f *Footer) []uint64 {
	o := &f.Offsets
	s := []uint64{o.RTree}
	for _, v := range [][]uint64{o.TileOffsets, o.TileVarOffsets, o.TileVarSizes, o.TileValidityOffsets,
		o.TileMins, o.TileMaxes, o.GlobalOrderMins, o.GlobalOrderMaxes, o.TileSums, o.TileNullCounts} {
		s = append(s, v...)
	}
	if f.Version >= versionFragmentStats {
		s = append(s, o.FragmentStats)
	}
	if f.Version >= versionProcessedConds {
		s = append(s, o.ProcessedConditions)
	}
	return s
}

func sortedKeys(m map[uint64][]byte) []uint64 {
	var k []uint64
	for x := range m {
		k = append(k, x)
	}
	for i := range k {
		for j := i + 1; j < len(k); j++ {
			if k[j] < k[i] {
				k[i], k[j] = k[j], k[i]
			}
		}
	}
	return k
}

// normalize maps empty slices to nil so that DeepEqual compares content.
func normalize(m *Metadata) *Metadata {
	c := *m
	fix := func(ls [][]uint64) [][]uint64 {
		out := make([][]uint64, len(ls))
		for i, v := range ls {
			if len(v) > 0 {
				out[i] = v
			}
		}
		return out
	}
	c.TileOffsets, c.TileVarOffsets, c.TileVarSizes = fix(c.TileOffsets), fix(c.TileVarOffsets), fix(c.TileVarSizes)
	c.TileValidityOffsets, c.TileSums, c.TileNullCounts = fix(c.TileValidityOffsets), fix(c.TileSums), fix(c.TileNullCounts)
	mm := func(ls []MinMax) []MinMax {
		out := make([]MinMax, len(ls))
		for i, v := range ls {
			if len(v.Fixed) > 0 {
				out[i].Fixed = v.Fixed
			}
			if len(v.Var) > 0 {
				out[i].Var = v.Var
			}
		}
		return out
	}
	c.TileMins, c.TileMaxes = mm(c.TileMins), mm(c.TileMaxes)
	return &c
}

func TestGoldenConsolidated(t *testing.T) {
	cases := loadCases(t)
	c := cases["frag_meta"]
	if c == nil || len(c.MetaFiles) != 1 {
		t.Fatalf("frag_meta case needs one .meta file")
	}
	l := c.layout()
	b, err := os.ReadFile(filepath.Join("testdata", "frag_meta", c.MetaFiles[0]))
	if err != nil {
		t.Fatal(err)
	}
	cons, err := DecodeConsolidated(b, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(cons.Entries) != len(c.Files) {
		t.Fatalf("%d entries, want %d", len(cons.Entries), len(c.Files))
	}
	var names []string
	var footers [][]byte
	for _, fi := range c.Fragments {
		if !fi.HasConsolidated {
			t.Errorf("%s: TileDB does not see consolidated metadata", fi.Name)
		}
		i, ok := cons.Find(fi.Name)
		if !ok {
			t.Fatalf("%s not in the consolidated file", fi.Name)
		}
		cf, err := cons.Footer(i, l, fi.Version)
		if err != nil {
			t.Fatal(err)
		}
		fb, err := os.ReadFile(filepath.Join("testdata", "frag_meta", fi.Name+".tdb"))
		if err != nil {
			t.Fatal(err)
		}
		own, err := DecodeFooterTail(fb, uint64(len(fb)), l, fi.Version)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(cf, own) {
			t.Errorf("%s: consolidated footer differs from the fragment's own", fi.Name)
		}
		// Sections still come from the fragment's file.
		mf := &memFile{b: fb}
		fr := OpenWithFooter(mf.read, uint64(len(fb)), cf, nil)
		if _, err := LoadAll(fr); err != nil {
			t.Errorf("%s: loading sections with the consolidated footer: %v", fi.Name, err)
		}
		enc, _ := EncodeFooter(cf)
		names = append(names, cons.Entries[i].Name)
		footers = append(footers, enc)
	}
	p, err := EncodeConsolidatedPayload(names, footers)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(p, cons.Payload) {
		t.Errorf("re-encoded consolidated payload differs from TileDB's")
	}
}

// TestLazyConcurrent checks that sections load once and concurrent users
// share them.
func TestLazyConcurrent(t *testing.T) {
	c := loadCases(t)["sparse_int"]
	b, err := os.ReadFile(filepath.Join("testdata", "sparse_int", c.Files[0]+".tdb"))
	if err != nil {
		t.Fatal(err)
	}
	mf := &memFile{b: b}
	fr, err := Open(mf.read, uint64(len(b)), c.layout(), nameVersion(t, c.Files[0]), nil)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := fr.MBR(3); err != nil {
				t.Error(err)
			}
			if _, err := fr.TileOffset(0, 2); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if n := mf.reads.Load(); n != 3 {
		t.Errorf("%d reads, want 3 (footer, R-tree, one offsets section)", n)
	}
}
