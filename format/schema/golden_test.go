package schema

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/tileflight/tileflight/format/datatype"
	"github.com/tileflight/tileflight/format/gentile"
	"github.com/tileflight/tileflight/format/pipeline"
	"github.com/tileflight/tileflight/internal/golden"
)

// The golden files are written by python_tests/golden/schema_cases.py with
// the tiledb package (TileDB 2.30).

type goldenFilter struct {
	Class       string   `json:"class"`
	Level       *int32   `json:"level"`
	Window      *uint32  `json:"window"`
	Reinterp    *string  `json:"reinterp_dtype"`
	Factor      *float64 `json:"factor"`
	Offset      *float64 `json:"offset"`
	Bytewidth   *uint64  `json:"bytewidth"`
	Quality     *float64 `json:"quality"`
	Lossless    *int     `json:"lossless"`
	InputFormat *int     `json:"input_format"`
}

type goldenList struct {
	Chunksize uint32         `json:"chunksize"`
	Filters   []goldenFilter `json:"filters"`
}

type goldenSchema struct {
	File            string     `json:"file"`
	Version         uint32     `json:"version"`
	Sparse          bool       `json:"sparse"`
	AllowsDups      bool       `json:"allows_duplicates"`
	CellOrder       string     `json:"cell_order"`
	TileOrder       string     `json:"tile_order"`
	Capacity        uint64     `json:"capacity"`
	CoordsFilters   goldenList `json:"coords_filters"`
	OffsetsFilters  goldenList `json:"offsets_filters"`
	ValidityFilters goldenList `json:"validity_filters"`
	Dims            []struct {
		Name       string            `json:"name"`
		Type       string            `json:"type"`
		CellValNum uint32            `json:"cell_val_num"`
		Filters    goldenList        `json:"filters"`
		Domain     []json.RawMessage `json:"domain"`
		Tile       json.RawMessage   `json:"tile"`
	} `json:"dims"`
	Attrs []struct {
		Name       string     `json:"name"`
		Type       string     `json:"type"`
		CellValNum uint32     `json:"cell_val_num"`
		Nullable   bool       `json:"nullable"`
		Filters    goldenList `json:"filters"`
		EnumLabel  *string    `json:"enum_label"`
		FillHex    *string    `json:"fill_hex"`
	} `json:"attrs"`
	CurrentDomain [][]json.RawMessage `json:"current_domain"`
}

type goldenCase struct {
	Schemas      []goldenSchema `json:"schemas"`
	Enumerations map[string]struct {
		Type       string            `json:"type"`
		Ordered    bool              `json:"ordered"`
		CellValNum uint32            `json:"cell_val_num"`
		Values     []json.RawMessage `json:"values"`
	} `json:"enumerations"`
}

func goldenCases(t *testing.T) []string {
	t.Helper()
	var out []string
	for _, f := range golden.Glob(t, "testdata/*.json") {
		out = append(out, strings.TrimSuffix(filepath.Base(f), ".json"))
	}
	sort.Strings(out)
	return out
}

func readGolden(t *testing.T, name string) goldenCase {
	t.Helper()
	var g goldenCase
	golden.ReadJSON(t, "testdata/"+name+".json", &g)
	return g
}

func payloadOf(t *testing.T, path string) []byte {
	t.Helper()
	b := golden.Read(t, path)
	_, p, n, err := gentile.Decode(b, nil)
	if err != nil || n != len(b) {
		t.Fatalf("%s: generic tile: n=%d/%d %v", path, n, len(b), err)
	}
	return p
}

// TestGoldenRoundTrip decodes every schema TileDB wrote, checks it against
// what tiledb reported, and requires Encode to reproduce TileDB's payload.
func TestGoldenRoundTrip(t *testing.T) {
	for _, name := range goldenCases(t) {
		t.Run(name, func(t *testing.T) {
			g := readGolden(t, name)
			for i, gs := range g.Schemas {
				payload := payloadOf(t, fmt.Sprintf("testdata/%s.%d.schema", name, i))
				s, err := Decode(payload)
				if err != nil {
					t.Fatalf("schema %d: %v", i, err)
				}
				compareGolden(t, s, &gs)
				enc, err := Encode(s)
				if err != nil {
					t.Fatalf("schema %d: encode: %v", i, err)
				}
				if !bytes.Equal(enc, payload) {
					t.Fatalf("schema %d: re-encoding differs from TileDB's payload\n got %x\nwant %x", i, enc, payload)
				}
				if err := s.Validate(); err != nil {
					t.Errorf("schema %d: TileDB created it, Validate refuses: %v", i, err)
				}
			}
		})
	}
}

func compareGolden(t *testing.T, s *ArraySchema, g *goldenSchema) {
	t.Helper()
	if s.Version != g.Version || s.Version != CurrentVersion {
		t.Errorf("version %d, tiledb says %d", s.Version, g.Version)
	}
	if (s.Type == Sparse) != g.Sparse || s.AllowsDups != g.AllowsDups || s.Capacity != g.Capacity {
		t.Errorf("type/dups/capacity %v %v %d, want sparse=%v %v %d", s.Type, s.AllowsDups, s.Capacity, g.Sparse, g.AllowsDups, g.Capacity)
	}
	// tiledb-py reports no tile order for Hilbert arrays.
	if s.CellOrder.String() != g.CellOrder || s.TileOrder.String() != g.TileOrder && !(s.CellOrder == Hilbert && g.TileOrder == "") {
		t.Errorf("orders %s/%s, want %s/%s", s.CellOrder, s.TileOrder, g.CellOrder, g.TileOrder)
	}
	comparePipeline(t, "coords", s.CoordsFilters, g.CoordsFilters)
	comparePipeline(t, "offsets", s.OffsetsFilters, g.OffsetsFilters)
	comparePipeline(t, "validity", s.ValidityFilters, g.ValidityFilters)
	if len(s.Dimensions) != len(g.Dims) {
		t.Fatalf("%d dims, want %d", len(s.Dimensions), len(g.Dims))
	}
	for i, gd := range g.Dims {
		d := &s.Dimensions[i]
		if d.Name != gd.Name || d.Type.String() != gd.Type || d.CellValNum != gd.CellValNum {
			t.Errorf("dim %d: %q %s %d, want %q %s %d", i, d.Name, d.Type, d.CellValNum, gd.Name, gd.Type, gd.CellValNum)
		}
		// tiledb reports a dimension's effective filters.
		comparePipeline(t, "dim "+d.Name, s.DimensionFilters(i), gd.Filters)
		if gd.Domain == nil {
			if d.Domain != nil {
				t.Errorf("dim %s: domain %x, want none", d.Name, d.Domain)
			}
		} else {
			lo, hi, _ := d.DomainStrings()
			compareScalar(t, "dim "+d.Name+" lo", d.Type, lo, gd.Domain[0])
			compareScalar(t, "dim "+d.Name+" hi", d.Type, hi, gd.Domain[1])
		}
		if len(gd.Tile) == 0 || string(gd.Tile) == "null" {
			if d.TileExtent != nil {
				t.Errorf("dim %s: tile extent %x, want null", d.Name, d.TileExtent)
			}
		} else {
			compareScalar(t, "dim "+d.Name+" tile", d.Type, FormatValue(d.Type, d.TileExtent), gd.Tile)
		}
	}
	if len(s.Attributes) != len(g.Attrs) {
		t.Fatalf("%d attrs, want %d", len(s.Attributes), len(g.Attrs))
	}
	for i, ga := range g.Attrs {
		a := &s.Attributes[i]
		if a.Name != ga.Name || a.Type.String() != ga.Type || a.CellValNum != ga.CellValNum || a.Nullable != ga.Nullable {
			t.Errorf("attr %d: %q %s %d %v, want %q %s %d %v", i, a.Name, a.Type, a.CellValNum, a.Nullable, ga.Name, ga.Type, ga.CellValNum, ga.Nullable)
		}
		comparePipeline(t, "attr "+a.Name, a.Filters, ga.Filters)
		want := ""
		if ga.EnumLabel != nil {
			want = *ga.EnumLabel
		}
		if a.EnumerationName != want {
			t.Errorf("attr %s: enumeration %q, want %q", a.Name, a.EnumerationName, want)
		}
		if ga.FillHex != nil && hex.EncodeToString(a.FillValue) != *ga.FillHex {
			t.Errorf("attr %s: fill %x, want %s", a.Name, a.FillValue, *ga.FillHex)
		}
	}
	if g.CurrentDomain != nil {
		cd := s.CurrentDomain
		if cd == nil || cd.Empty || len(cd.Ranges) != len(g.CurrentDomain) {
			t.Fatalf("current domain %+v, want %d ranges", cd, len(g.CurrentDomain))
		}
		for i, gr := range g.CurrentDomain {
			d := &s.Dimensions[i]
			compareScalar(t, "current domain "+d.Name+" start", d.Type, FormatValue(d.Type, cd.Ranges[i].Start), gr[0])
			compareScalar(t, "current domain "+d.Name+" end", d.Type, FormatValue(d.Type, cd.Ranges[i].End), gr[1])
		}
	} else if s.CurrentDomain == nil || !s.CurrentDomain.Empty {
		t.Errorf("current domain %+v, want empty", s.CurrentDomain)
	}
}

// compareScalar compares our exact decimal formatting with tiledb's JSON
// value (a number, or a string for string dimensions).
func compareScalar(t *testing.T, what string, typ datatype.Datatype, got string, want json.RawMessage) {
	t.Helper()
	var ws string
	if err := json.Unmarshal(want, &ws); err == nil {
		if got != ws {
			t.Errorf("%s: %q, want %q", what, got, ws)
		}
		return
	}
	if typ.IsFloat() {
		var wf float64
		if err := json.Unmarshal(want, &wf); err != nil {
			t.Errorf("%s: bad golden %s", what, want)
			return
		}
		var gf float64
		fmt.Sscan(got, &gf)
		if gf != wf && !(math.IsNaN(gf) && math.IsNaN(wf)) {
			t.Errorf("%s: %s, want %s", what, got, want)
		}
		return
	}
	if got != string(want) {
		t.Errorf("%s: %s, want %s", what, got, want)
	}
}

var classOf = map[pipeline.FilterType]string{
	pipeline.None: "NoOpFilter", pipeline.Gzip: "GzipFilter", pipeline.Zstd: "ZstdFilter", pipeline.LZ4: "LZ4Filter",
	pipeline.RLE: "RleFilter", pipeline.Bzip2: "Bzip2Filter", pipeline.DoubleDelta: "DoubleDeltaFilter",
	pipeline.BitWidthReduction: "BitWidthReductionFilter", pipeline.Bitshuffle: "BitShuffleFilter",
	pipeline.Byteshuffle: "ByteShuffleFilter", pipeline.PositiveDelta: "PositiveDeltaFilter",
	pipeline.ChecksumMD5: "ChecksumMD5Filter", pipeline.ChecksumSHA256: "ChecksumSHA256Filter",
	pipeline.Dictionary: "DictionaryFilter", pipeline.ScaleFloat: "FloatScaleFilter", pipeline.XOR: "XORFilter",
	pipeline.WebP: "WebpFilter", pipeline.Delta: "DeltaFilter",
}

func comparePipeline(t *testing.T, what string, p pipeline.Pipeline, g goldenList) {
	t.Helper()
	if p.MaxChunkSize != g.Chunksize || len(p.Filters) != len(g.Filters) {
		t.Errorf("%s filters: chunk %d, %d filters; want %d, %d", what, p.MaxChunkSize, len(p.Filters), g.Chunksize, len(g.Filters))
		return
	}
	for i, gf := range g.Filters {
		f := p.Filters[i]
		bad := classOf[f.Type] != gf.Class
		if gf.Level != nil && *gf.Level != f.Level {
			bad = true
		}
		if gf.Window != nil && *gf.Window != f.MaxWindow {
			bad = true
		}
		if gf.Reinterp != nil && *gf.Reinterp != f.Reinterpret.String() {
			bad = true
		}
		if gf.Reinterp == nil && (f.Type == pipeline.Delta || f.Type == pipeline.DoubleDelta) && f.Reinterpret != datatype.Any {
			bad = true
		}
		if gf.Factor != nil && (*gf.Factor != f.Scale || *gf.Offset != f.Offset || *gf.Bytewidth != f.ByteWidth) {
			bad = true
		}
		if gf.Quality != nil && (float32(*gf.Quality) != f.WebPQuality || (*gf.Lossless != 0) != f.WebPLossless || *gf.InputFormat != int(f.WebPFormat)) {
			bad = true
		}
		if bad {
			t.Errorf("%s filter %d: %+v, tiledb reports %+v", what, i, f, gf)
		}
	}
}
