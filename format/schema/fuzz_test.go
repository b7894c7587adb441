package schema

import (
	"bytes"
	"path/filepath"
	"testing"

	"github.com/tileflight/tileflight/format/gentile"
	"github.com/tileflight/tileflight/internal/golden"
)

func goldenPayloads(f *testing.F, pattern string) [][]byte {
	var out [][]byte
	for _, b := range golden.Seeds(f, filepath.Join("testdata", pattern)) {
		_, payload, _, err := gentile.Decode(b, nil)
		if err != nil {
			f.Fatal(err)
		}
		out = append(out, payload)
	}
	return out
}

// FuzzDecode: no input panics; whatever decodes re-encodes, and the
// re-encoding is a fixed point.
func FuzzDecode(f *testing.F) {
	for _, p := range goldenPayloads(f, "*.schema") {
		f.Add(p)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := Decode(b)
		if err != nil {
			return
		}
		_ = s.Validate()
		_, _ = ToJSON(s)
		enc, err := Encode(s)
		if err != nil {
			t.Fatalf("decoded schema does not encode: %v", err)
		}
		s2, err := Decode(enc)
		if err != nil {
			t.Fatalf("re-encoded schema does not decode: %v", err)
		}
		enc2, err := Encode(s2)
		if err != nil || !bytes.Equal(enc, enc2) {
			t.Fatalf("encoding is not stable: %v", err)
		}
	})
}

func FuzzDecodeEnumeration(f *testing.F) {
	for _, p := range goldenPayloads(f, "*.enum.*") {
		f.Add(p)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		e, err := DecodeEnumeration(b)
		if err != nil {
			return
		}
		for i := 0; i < e.Len(); i++ {
			_ = e.Value(i)
		}
		enc, err := EncodeEnumeration(e)
		if err != nil {
			t.Fatalf("decoded enumeration does not encode: %v", err)
		}
		if !bytes.Equal(enc, b) {
			// Only the ordered flag may be normalised (any non-zero byte
			// reads as true).
			e2, err := DecodeEnumeration(enc)
			if err != nil || e2.Ordered != e.Ordered || !bytes.Equal(e2.Data, e.Data) {
				t.Fatalf("round trip changed the enumeration: %v", err)
			}
		}
	})
}

// FuzzFromJSON: no input panics; an accepted schema validates, encodes and
// decodes back to the same encoding.
func FuzzFromJSON(f *testing.F) {
	for _, p := range goldenPayloads(f, "*.0.schema") {
		s, err := Decode(p)
		if err != nil {
			f.Fatal(err)
		}
		js, err := ToJSON(s)
		if err != nil {
			continue // enumerations not loaded: FromJSON would refuse
		}
		f.Add(js)
	}
	f.Add([]byte(`{"type": "sparse", "dimensions": [{"name": "x", "type": "float64", "domain": [0, 1]}], "current_domain": {"x": [0, 1]}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := FromJSON(b)
		if err != nil {
			return
		}
		if err := s.Validate(); err != nil {
			t.Fatalf("FromJSON returned an invalid schema: %v", err)
		}
		enc, err := Encode(s)
		if err != nil {
			t.Fatalf("accepted schema does not encode: %v", err)
		}
		s2, err := Decode(enc)
		if err != nil {
			t.Fatalf("accepted schema does not decode: %v", err)
		}
		if enc2, _ := Encode(s2); !bytes.Equal(enc, enc2) {
			t.Fatal("encoding is not stable")
		}
		for _, ref := range s.Enumerations {
			if _, err := EncodeEnumeration(ref.Enum); err != nil {
				t.Fatalf("enumeration %q: %v", ref.Name, err)
			}
		}
		if _, err := ToJSON(s); err != nil {
			t.Fatal(err)
		}
	})
}
