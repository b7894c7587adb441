package schema

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
)

// loadEnums attaches the golden enumeration files of a case to s.
func loadEnums(t *testing.T, name string, s *ArraySchema) {
	t.Helper()
	for i := range s.Enumerations {
		ref := &s.Enumerations[i]
		e, err := DecodeEnumeration(payloadOf(t, filepath.Join("testdata", name+".enum."+ref.PathName)))
		if err != nil {
			t.Fatal(err)
		}
		ref.Enum = e
	}
}

// TestJSONRoundTripGolden: ToJSON -> FromJSON -> Encode reproduces every
// TileDB-written schema and enumeration file byte for byte.
func TestJSONRoundTripGolden(t *testing.T) {
	for _, name := range goldenCases(t) {
		g := readGolden(t, name)
		for i := range g.Schemas {
			t.Run(fmt.Sprintf("%s.%d", name, i), func(t *testing.T) {
				payload := payloadOf(t, fmt.Sprintf("testdata/%s.%d.schema", name, i))
				s, err := Decode(payload)
				if err != nil {
					t.Fatal(err)
				}
				loadEnums(t, name, s)
				js, err := ToJSON(s)
				if err != nil {
					t.Fatal(err)
				}
				s2, err := FromJSON(js)
				if err != nil {
					t.Fatalf("FromJSON(%s): %v", js, err)
				}
				enc, err := Encode(s2)
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(enc, payload) {
					t.Fatalf("JSON round trip changed the schema\njson %s\n got %x\nwant %x", js, enc, payload)
				}
				for _, ref := range s2.Enumerations {
					want := payloadOf(t, filepath.Join("testdata", name+".enum."+ref.PathName))
					got, err := EncodeEnumeration(ref.Enum)
					if err != nil || !bytes.Equal(got, want) {
						t.Fatalf("enumeration %q from JSON differs from TileDB's file (%v)", ref.Name, err)
					}
				}
			})
		}
	}
}

// TestFromJSONDefaults: a short description gets TileDB's defaults, so that
// the schema equals what tiledb.ArraySchema created from the same description.
func TestFromJSONDefaults(t *testing.T) {
	cases := []struct{ golden, json string }{
		{"dense_basic", `{"type": "dense", "dimensions": [
			{"name": "rows", "type": "int32", "domain": [1, 4], "tile": 2},
			{"name": "cols", "type": "int32", "domain": [1, 4], "tile": 2}],
			"attributes": [{"name": "a", "type": "int32"}]}`},
		{"dense_dim_int8", `{"cell_order": "col-major", "tile_order": "col-major",
			"dimensions": [{"name": "d", "type": "int8", "domain": [0, 99], "tile": null}],
			"attributes": [{"name": "v", "type": "float64"}]}`},
		{"sparse_float_hilbert", `{"type": "sparse", "cell_order": "hilbert", "capacity": 777, "allows_duplicates": true,
			"dimensions": [{"name": "x", "type": "float64", "domain": [-1000, 1000], "tile": 100},
			               {"name": "y", "type": "float32", "domain": [0, 1]}],
			"attributes": [{"name": "v", "type": "float32"}]}`},
		{"sparse_string_dims", `{"type": "sparse", "cell_order": "col-major", "capacity": 3,
			"dimensions": [{"name": "s", "type": "string_ascii", "domain": null, "tile": null},
			               {"name": "i", "type": "int64", "domain": [0, 1099511627776], "tile": 1048576}],
			"attributes": [{"name": "v", "type": "int8"}]}`},
		{"dense_fill", `{"dimensions": [{"name": "d", "type": "int32", "domain": [0, 9], "tile": 5}],
			"attributes": [{"name": "i", "type": "int32", "fill": -7},
			  {"name": "f", "type": "float32", "fill": 1.5},
			  {"name": "u", "type": "uint8", "fill": 3},
			  {"name": "s", "type": "char", "cell_val_num": 2, "fill": "zz"},
			  {"name": "n", "type": "int64", "nullable": true},
			  {"name": "ns", "type": "string_ascii", "nullable": true},
			  {"name": "p", "type": "float64", "cell_val_num": 2, "fill": [1, 2]},
			  {"name": "dt", "type": "datetime_ms", "fill": 5}]}`},
	}
	for _, c := range cases {
		t.Run(c.golden, func(t *testing.T) {
			s, err := FromJSON([]byte(c.json))
			if err != nil {
				t.Fatal(err)
			}
			enc, err := Encode(s)
			if err != nil {
				t.Fatal(err)
			}
			want := payloadOf(t, "testdata/"+c.golden+".0.schema")
			if !bytes.Equal(enc, want) {
				ws, _ := Decode(want)
				wj, _ := ToJSON(ws)
				gj, _ := ToJSON(s)
				t.Fatalf("differs from TileDB's schema\n got %s\nwant %s", gj, wj)
			}
		})
	}
}

func TestFromJSONErrorsNameTheField(t *testing.T) {
	base := func(dims, attrs string) string {
		return `{"type": "dense", "dimensions": [` + dims + `], "attributes": [` + attrs + `]}`
	}
	okDim := `{"name": "x", "type": "int32", "domain": [0, 9], "tile": 5}`
	okAttr := `{"name": "a", "type": "float64"}`
	cases := []struct{ name, json, want string }{
		{"bad json", `{"type": `, "schema json"},
		{"unknown key", `{"type": "dense", "dims": []}`, `"dims"`},
		{"bad type", `{"type": "weird", "dimensions": [` + okDim + `]}`, "type"},
		{"no dims", base("", okAttr), "dimensions"},
		{"bad dim type", base(`{"name": "x", "type": "int128", "domain": [0, 9]}`, okAttr), `dimensions[0] "x": type`},
		{"domain out of range", base(`{"name": "x", "type": "int8", "domain": [0, 300], "tile": 1}`, okAttr), `domain[1]`},
		{"domain reversed", base(`{"name": "x", "type": "int32", "domain": [9, 0], "tile": 1}`, okAttr), `dimension "x"`},
		{"tile too big", base(`{"name": "x", "type": "int32", "domain": [0, 9], "tile": 11}`, okAttr), `tile extent`},
		{"tile zero", base(`{"name": "x", "type": "int32", "domain": [0, 9], "tile": 0}`, okAttr), `tile extent`},
		{"dense float", base(`{"name": "x", "type": "float64", "domain": [0, 9], "tile": 1}`, okAttr), `dense arrays need integer`},
		{"dense string", base(`{"name": "x", "type": "string_ascii"}`, okAttr), `dense arrays need integer`},
		{"dense mixed", base(okDim+`, {"name": "y", "type": "int64", "domain": [0, 9], "tile": 1}`, okAttr), `one type`},
		{"dense no attrs", base(okDim, ""), `at least one attribute`},
		{"dense hilbert", `{"type": "dense", "cell_order": "hilbert", "dimensions": [` + okDim + `], "attributes": [` + okAttr + `]}`, `hilbert`},
		{"dense dups", `{"type": "dense", "allows_duplicates": true, "dimensions": [` + okDim + `], "attributes": [` + okAttr + `]}`, `allows_duplicates`},
		{"duplicate name", base(okDim, `{"name": "x", "type": "int32"}`), `"x": name already used`},
		{"reserved name", base(okDim, `{"name": "__a", "type": "int32"}`), `reserved`},
		{"bad filter", base(okDim, `{"name": "a", "type": "int32", "filters": [{"name": "zip"}]}`), `attributes[0] "a": filters: filter 0`},
		{"bad filter option", base(okDim, `{"name": "a", "type": "int32", "filters": [{"name": "lz4", "max_window": 3}]}`), `max_window`},
		{"bad fill", base(okDim, `{"name": "a", "type": "uint8", "fill": -1}`), `attributes[0] "a": fill`},
		{"bad cell_val_num", base(okDim, `{"name": "a", "type": "int32", "cell_val_num": 0}`), `cell_val_num`},
		{"unknown enumeration", base(okDim, `{"name": "a", "type": "int32", "enumeration": "e"}`), `unknown enumeration`},
		{"enum on float", `{"type": "sparse", "dimensions": [` + okDim + `], "attributes": [{"name": "a", "type": "float32", "enumeration": "e"}],
			"enumerations": [{"name": "e", "type": "string_utf8", "values": ["a"]}]}`, `single integer`},
		{"enum duplicate value", `{"type": "sparse", "dimensions": [` + okDim + `], "attributes": [{"name": "a", "type": "int32", "enumeration": "e"}],
			"enumerations": [{"name": "e", "type": "string_utf8", "values": ["a", "a"]}]}`, `enumerations[0] "e": values[1]`},
		{"current domain outside", `{"type": "sparse", "dimensions": [` + okDim + `], "attributes": [` + okAttr + `],
			"current_domain": {"x": [0, 10]}}`, `current_domain`},
		{"current domain unknown dim", `{"type": "sparse", "dimensions": [` + okDim + `], "attributes": [` + okAttr + `],
			"current_domain": {"y": [0, 1]}}`, `current_domain: no dimension "y"`},
		{"sparse zero capacity", `{"type": "sparse", "capacity": 0, "dimensions": [` + okDim + `]}`, `capacity`},
		{"webp sparse", `{"type": "sparse", "dimensions": [` + okDim + `], "attributes": [{"name": "a", "type": "uint8", "filters": [{"name": "webp", "format": "rgb"}]}]}`, `webp`},
		{"float nan domain", `{"type": "sparse", "dimensions": [{"name": "x", "type": "float64", "domain": ["nan", 1]}]}`, `finite`},
		{"string dim with domain", `{"type": "sparse", "dimensions": [{"name": "s", "type": "string_ascii", "domain": [0, 1]}]}`, `string dimension`},
		{"bool dim", `{"type": "sparse", "dimensions": [{"name": "b", "type": "bool", "domain": [0, 1]}]}`, `not a valid dimension type`},
		{"whole type domain", `{"type": "sparse", "dimensions": [{"name": "x", "type": "uint8", "domain": [0, 255], "tile": 1}]}`, `every value`},
		{"extent floor", `{"type": "sparse", "dimensions": [{"name": "x", "type": "uint64", "domain": [0, 18446744073709551614], "tile": 1000}]}`, `last tile`},
		{"extent floor signed", `{"type": "dense", "dimensions": [{"name": "x", "type": "int64", "domain": [0, 9223372036854775806], "tile": 1000}], "attributes": [` + okAttr + `]}`, `last tile`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := FromJSON([]byte(c.json))
			if err == nil {
				t.Fatalf("accepted %s", c.json)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %q does not mention %q", err, c.want)
			}
		})
	}
}

func TestFromJSONAcceptsWhatTileDBAccepts(t *testing.T) {
	for _, js := range []string{
		`{"type": "sparse", "dimensions": [{"name": "x", "type": "uint8", "domain": [0, 254], "tile": 1}]}`,
		`{"type": "dense", "dimensions": [{"name": "x", "type": "int8", "domain": [0, 99], "tile": 100}], "attributes": [{"name": "a", "type": "int32"}]}`,
		`{"type": "dense", "dimensions": [{"name": "x", "type": "int64", "domain": [-9223372036854775808, 9223372036854775806], "tile": 1}], "attributes": [{"name": "a", "type": "int32"}]}`,
		`{"type": "dense", "dimensions": [{"name": "x", "type": "int8", "domain": [0, 126], "tile": 100}], "attributes": [{"name": "a", "type": "int32"}]}`,
		`{"type": "sparse", "dimensions": [{"name": "x", "type": "uint64", "domain": [0, 18446744073709551614], "tile": 1}]}`,
	} {
		s, err := FromJSON([]byte(js))
		if err != nil {
			t.Errorf("%s: %v", js, err)
			continue
		}
		out, err := ToJSON(s)
		if err != nil {
			t.Fatal(err)
		}
		var v map[string]any
		if err := json.Unmarshal(out, &v); err != nil {
			t.Fatalf("ToJSON is not JSON: %v", err)
		}
	}
	// Exact 64-bit bounds survive the JSON.
	s, err := FromJSON([]byte(`{"type": "sparse", "dimensions": [{"name": "x", "type": "uint64", "domain": [0, 18446744073709551614], "tile": 1}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if _, hi, _ := s.Dimensions[0].DomainUint64(); hi != 18446744073709551614 {
		t.Fatalf("hi %d", hi)
	}
	if !errors.Is(s.Validate(), nil) {
		t.Fatal("validate")
	}
}
