package filters

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/tileflight/tileflight/format/datatype"
	"github.com/tileflight/tileflight/format/pipeline"
	"github.com/tileflight/tileflight/format/wire"
	"github.com/tileflight/tileflight/internal/golden"
)

// goldenCase is one entry of testdata/cases.json, written by
// python_tests/golden/filters_cases.py with TileDB.
type goldenCase struct {
	Name           string          `json:"name"`
	Type           string          `json:"type"`
	CellValNum     json.RawMessage `json:"cell_val_num"`
	N              int             `json:"n"`
	Version        uint32          `json:"version"`
	Filters        []goldenFilter  `json:"filters"`
	OffsetsFilters []goldenFilter  `json:"offsets_filters"`
	MaxChunkSize   uint32          `json:"max_chunk_size"`
}

type goldenFilter struct {
	Type        string `json:"type"`
	Level       int32  `json:"level"`
	Reinterpret string `json:"reinterpret"`
	Window      uint32 `json:"window"`
}

func (c goldenCase) isVar() bool { return string(c.CellValNum) == `"var"` }

func loadCases(t testing.TB) []goldenCase {
	t.Helper()
	var cases []goldenCase
	golden.ReadJSON(t, filepath.Join("testdata", "cases.json"), &cases)
	return cases
}

func readGz(t testing.TB, name string) []byte {
	t.Helper()
	return golden.ReadGz(t, filepath.Join("testdata", name))
}

func toPipeline(t testing.TB, fs []goldenFilter, maxChunk uint32) pipeline.Pipeline {
	t.Helper()
	p := pipeline.Pipeline{MaxChunkSize: maxChunk}
	for _, g := range fs {
		ft, err := pipeline.ParseFilterType(g.Type)
		if err != nil {
			t.Fatal(err)
		}
		f := pipeline.Filter{Type: ft, Level: g.Level, Reinterpret: datatype.Any, MaxWindow: g.Window}
		f.Compressor, _ = pipeline.CompressorFor(ft)
		if g.Reinterpret != "" {
			if f.Reinterpret, err = datatype.Parse(g.Reinterpret); err != nil {
				t.Fatal(err)
			}
		}
		p.Filters = append(p.Filters, f)
	}
	// Round-trip through the serialized form, as a reader would get it.
	w := wire.NewWriter(nil)
	pipeline.Encode(w, p, 22)
	back, err := pipeline.Decode(wire.NewReader(w.Bytes()), 22)
	if err != nil {
		t.Fatal(err)
	}
	return back
}

// deterministic reports whether TileDB's bytes can be reproduced: every
// filter but the zlib, zstd and bzip2 compressors (lz4 uses the
// reference-compatible block compressor).
func deterministic(fs []goldenFilter) bool {
	for _, f := range fs {
		switch f.Type {
		case "gzip", "zstd", "bzip2":
			return false
		}
	}
	return true
}

// chunkLengths returns the original length of every chunk of a tile.
func chunkLengths(t testing.TB, tile []byte) []uint32 {
	t.Helper()
	r := wire.NewReader(tile)
	n := r.Count(8, 12, "chunks")
	var out []uint32
	for i := 0; i < n; i++ {
		out = append(out, r.Uint32("orig"))
		fl := r.Uint32("filtered")
		ml := r.Uint32("meta")
		r.Skip(int(fl)+int(ml), "chunk")
	}
	if r.Err() != nil || r.Len() != 0 {
		t.Fatalf("bad framing: %v, %d bytes left", r.Err(), r.Len())
	}
	return out
}

func TestGolden(t *testing.T) {
	for _, c := range loadCases(t) {
		t.Run(c.Name, func(t *testing.T) {
			dt, err := datatype.Parse(c.Type)
			if err != nil {
				t.Fatal(err)
			}
			pl := toPipeline(t, c.Filters, c.MaxChunkSize)
			tdb := readGz(t, c.Name+".tdb.gz")
			want := readGz(t, c.Name+".out.gz")
			if !c.isVar() {
				p, err := New(pl, dt, 1, c.Version, Options{})
				if err != nil {
					t.Fatal(err)
				}
				got, err := p.UnfilterTile(make([]byte, len(want)), tdb)
				if err != nil {
					t.Fatalf("unfilter: %v", err)
				}
				if !bytes.Equal(got, want) {
					t.Fatalf("unfilter: cells differ from TileDB's")
				}
				ours, err := p.FilterTile(want)
				if err != nil {
					t.Fatalf("filter: %v", err)
				}
				checkForward(t, c.Filters, ours, tdb, func(b []byte) ([]byte, error) {
					return p.UnfilterTile(make([]byte, len(want)), b)
				}, want)
				return
			}
			off, err := New(toPipeline(t, c.OffsetsFilters, c.MaxChunkSize), datatype.Uint64, 1, c.Version, Options{IsOffsets: true})
			if err != nil {
				t.Fatal(err)
			}
			p, err := New(pl, dt, 0, c.Version, Options{})
			if err != nil {
				t.Fatal(err)
			}
			tdbVar := readGz(t, c.Name+".var.gz")
			wantOffs := readGz(t, c.Name+".offs.gz")
			offs, vals, err := p.UnfilterVarTile(off, tdb, tdbVar, make([]byte, len(wantOffs)+8), make([]byte, len(want)))
			if err != nil {
				t.Fatalf("unfilter: %v", err)
			}
			if !bytes.Equal(vals, want) {
				t.Fatalf("unfilter: values differ from TileDB's")
			}
			if !bytes.Equal(offs[:len(wantOffs)], wantOffs) || binary.LittleEndian.Uint64(offs[len(wantOffs):]) != uint64(len(want)) {
				t.Fatalf("unfilter: offsets differ from TileDB's")
			}
			if p.CarriesOffsets() != (len(chunkLengths(t, tdb)) == 0) {
				t.Fatalf("CarriesOffsets = %v but TileDB's offsets tile has %d chunks", p.CarriesOffsets(), len(chunkLengths(t, tdb)))
			}
			u64 := make([]uint64, c.N)
			for i := range u64 {
				u64[i] = binary.LittleEndian.Uint64(wantOffs[8*i:])
			}
			fo, fv, err := p.FilterVarTile(off, u64, want)
			if err != nil {
				t.Fatalf("filter: %v", err)
			}
			checkForward(t, c.Filters, fv, tdbVar, nil, nil)
			checkForward(t, c.OffsetsFilters, fo, tdb, nil, nil)
			o2, v2, err := p.UnfilterVarTile(off, fo, fv, make([]byte, len(wantOffs)+8), make([]byte, len(want)))
			if err != nil {
				t.Fatalf("unfilter ours: %v", err)
			}
			if !bytes.Equal(v2, want) || !bytes.Equal(o2[:len(wantOffs)], wantOffs) {
				t.Fatalf("our var tile does not round-trip")
			}
		})
	}
}

// checkForward compares our filtered tile with TileDB's: byte for byte
// when the filters are deterministic, otherwise the same chunking and a
// round trip back to the cells.
func checkForward(t *testing.T, fs []goldenFilter, ours, tdb []byte, unfilter func([]byte) ([]byte, error), want []byte) {
	t.Helper()
	if deterministic(fs) {
		if !bytes.Equal(ours, tdb) {
			t.Fatalf("filter: %d bytes differ from TileDB's %d (first difference at %d)", len(ours), len(tdb), firstDiff(ours, tdb))
		}
		return
	}
	a, b := chunkLengths(t, ours), chunkLengths(t, tdb)
	if len(a) != len(b) {
		t.Fatalf("filter: %d chunks, TileDB %d", len(a), len(b))
	}
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("filter: chunk %d holds %d bytes, TileDB's %d", i, a[i], b[i])
		}
	}
	if unfilter != nil {
		got, err := unfilter(ours)
		if err != nil {
			t.Fatalf("unfilter ours: %v", err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("our tile does not round-trip")
		}
	}
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}
