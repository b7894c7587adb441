package schema

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/tileflight/tileflight/format/datatype"
	"github.com/tileflight/tileflight/format/wire"
)

// TestGoldenEnumerations decodes every enumeration file TileDB wrote,
// re-encodes it byte-identically and compares the values with tiledb's.
func TestGoldenEnumerations(t *testing.T) {
	files, _ := filepath.Glob("testdata/*.enum.*")
	if len(files) == 0 {
		t.Fatal("no enumeration golden files")
	}
	byCase := map[string]map[string]*Enumeration{}
	for _, f := range files {
		base := filepath.Base(f)
		cs := base[:strings.Index(base, ".enum.")]
		payload := payloadOf(t, f)
		e, err := DecodeEnumeration(payload)
		if err != nil {
			t.Fatalf("%s: %v", base, err)
		}
		if e.PathName != base[len(cs)+len(".enum."):] {
			t.Errorf("%s: path name %q", base, e.PathName)
		}
		enc, err := EncodeEnumeration(e)
		if err != nil || !bytes.Equal(enc, payload) {
			t.Fatalf("%s: re-encoding differs (%v)", base, err)
		}
		if byCase[cs] == nil {
			byCase[cs] = map[string]*Enumeration{}
		}
		byCase[cs][e.PathName] = e
	}
	for cs, enums := range byCase {
		g := readGolden(t, cs)
		last := g.Schemas[len(g.Schemas)-1]
		s, err := Decode(payloadOf(t, "testdata/"+cs+"."+itoa(len(g.Schemas)-1)+".schema"))
		if err != nil {
			t.Fatal(err)
		}
		_ = last
		for name, ge := range g.Enumerations {
			ref := s.EnumerationByName(name)
			if ref == nil {
				t.Fatalf("%s: schema lacks enumeration %q", cs, name)
			}
			e := enums[ref.PathName]
			if e == nil || e.Name != name {
				t.Fatalf("%s: enumeration %q: file %q missing or misnamed", cs, name, ref.PathName)
			}
			if e.Ordered != ge.Ordered || e.CellValNum != ge.CellValNum || e.Len() != len(ge.Values) {
				t.Errorf("%s/%s: ordered %v cvn %d len %d, want %v %d %d", cs, name, e.Ordered, e.CellValNum, e.Len(), ge.Ordered, ge.CellValNum, len(ge.Values))
				continue
			}
			for i, raw := range ge.Values {
				var want string
				if json.Unmarshal(raw, &want) != nil {
					want = string(raw)
				}
				if got := FormatValue(e.Type, e.Value(i)); got != want {
					t.Errorf("%s/%s value %d: %q, want %q", cs, name, i, got, want)
				}
			}
		}
	}
}

func itoa(i int) string { return strconv.Itoa(i) }

func TestGoldenDimensionLabels(t *testing.T) {
	s, err := Decode(payloadOf(t, "testdata/dim_labels.0.schema"))
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Labels) != 2 {
		t.Fatalf("labels %+v", s.Labels)
	}
	want := map[string]struct {
		order DataOrder
		typ   datatype.Datatype
		cvn   uint32
	}{"lab": {DecreasingData, datatype.Float64, 1}, "slab": {IncreasingData, datatype.StringASCII, VarNum}}
	for _, l := range s.Labels {
		w, ok := want[l.Name]
		if !ok || l.DimIndex != 0 || l.Order != w.order || l.Type != w.typ || l.CellValNum != w.cvn || l.External || !l.RelativeURI || l.URI == "" || l.AttrName == "" {
			t.Errorf("label %+v", l)
		}
	}
}

// TestLegacyArrays reads TileDB's own backward-compatibility arrays when
// TILEFLIGHT_LEGACY_ARRAYS points at TileDB's test/inputs/arrays (they are
// not redistributed here). TileDB reads the 1.4 array and refuses the 1.3
// one and the experimental version; so must we.
func TestLegacyArrays(t *testing.T) {
	dir := os.Getenv("TILEFLIGHT_LEGACY_ARRAYS")
	if dir == "" {
		t.Skip("TILEFLIGHT_LEGACY_ARRAYS not set")
	}
	b, err := os.ReadFile(filepath.Join(dir, "non_split_coords_v1_4_0", "__array_schema.tdb"))
	if err != nil {
		t.Fatal(err)
	}
	s, err := DecodeFile(b)
	if err != nil {
		t.Fatalf("v1.4.0: %v", err)
	}
	t.Logf("v1.4.0 schema: %+v", *s)
	payload := payloadOf(t, filepath.Join(dir, "non_split_coords_v1_4_0", "__array_schema.tdb"))
	if enc, err := Encode(s); err != nil || !bytes.Equal(enc, payload) {
		t.Fatalf("v1.4.0 re-encoding differs: %v", err)
	}
	if b, err = os.ReadFile(filepath.Join(dir, "dense_array_v1_3_0", "__array_schema.tdb")); err != nil {
		t.Fatal(err)
	}
	if _, err := DecodeFile(b); err == nil {
		t.Fatal("TileDB 1.3.0 schema accepted; TileDB refuses it")
	}
	for _, sub := range []string{"sparse_array_v11", "zero_var_chunks_v10", "experimental_array_vUINT32_MAX"} {
		m, _ := filepath.Glob(filepath.Join(dir, sub, "__schema", "__*"))
		for _, f := range m {
			if st, err := os.Stat(f); err != nil || st.IsDir() {
				continue
			}
			b, _ := os.ReadFile(f)
			s, err := DecodeFile(b)
			if sub == "experimental_array_vUINT32_MAX" {
				if !errors.Is(err, ErrUnsupportedVersion) && !errors.Is(err, wire.ErrCorrupt) {
					t.Errorf("%s: want a version error, got %v", sub, err)
				}
				continue
			}
			if err != nil {
				t.Fatalf("%s: %v", sub, err)
			}
			enc, err := Encode(s)
			if err != nil || !bytes.Equal(enc, payloadOf(t, f)) {
				t.Errorf("%s: re-encoding differs: %v", sub, err)
			}
			t.Logf("%s: version %d, %d dims, %d attrs", sub, s.Version, len(s.Dimensions), len(s.Attributes))
		}
	}
}
