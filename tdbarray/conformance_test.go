package tdbarray

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"path/filepath"
	"testing"

	"github.com/tileflight/tileflight/format/arraymeta"
	"github.com/tileflight/tileflight/format/datatype"
	"github.com/tileflight/tileflight/format/pipeline"
	"github.com/tileflight/tileflight/format/schema"
	"github.com/tileflight/tileflight/internal/fixtures"
	"github.com/tileflight/tileflight/storage"
)

// TestConformance opens every array TileDB wrote for the conformance
// matrix and compares what we decode (schema, visible fragments, array
// metadata) with what TileDB reported about it.
func TestConformance(t *testing.T) {
	cases := fixtures.Cases(t)
	if len(cases) == 0 {
		t.Fatal("no conformance cases")
	}
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			st, err := storage.NewLocal(filepath.Dir(c.Dir))
			if err != nil {
				t.Fatal(err)
			}
			opt := Options{}
			if c.Expect.Encryption != nil {
				opt.EncryptionKey = []byte(c.Expect.Encryption.Key)
			}
			a, err := Open(context.Background(), st, filepath.Base(c.Dir), opt)
			if err != nil {
				t.Fatal(err)
			}
			checkSchema(t, a.Schema, &c.Expect.Schema)
			checkFragments(t, a, c.Expect.Fragments)
			checkMetadata(t, a, &c.Expect.Metadata)
		})
	}
}

func checkSchema(t *testing.T, s *schema.ArraySchema, want *fixtures.Schema) {
	t.Helper()
	if s.Type.String() != want.Type {
		t.Errorf("type %s, want %s", s.Type, want.Type)
	}
	if s.CellOrder.String() != want.CellOrder {
		t.Errorf("cell order %s, want %s", s.CellOrder, want.CellOrder)
	}
	if want.TileOrder != nil && s.TileOrder.String() != *want.TileOrder {
		t.Errorf("tile order %s, want %s", s.TileOrder, *want.TileOrder)
	}
	if !s.IsDense() && s.Capacity != want.Capacity {
		t.Errorf("capacity %d, want %d", s.Capacity, want.Capacity)
	}
	if s.AllowsDups != want.AllowsDuplicates {
		t.Errorf("allows duplicates %v, want %v", s.AllowsDups, want.AllowsDuplicates)
	}
	if want.Version != 0 && s.Version != want.Version {
		t.Errorf("version %d, want %d", s.Version, want.Version)
	}
	if len(s.Dimensions) != len(want.Dimensions) {
		t.Fatalf("%d dimensions, want %d", len(s.Dimensions), len(want.Dimensions))
	}
	for i, wd := range want.Dimensions {
		d := &s.Dimensions[i]
		if d.Name != wd.Name || d.Type.String() != wd.Type {
			t.Errorf("dimension %d: %s %s, want %s %s", i, d.Name, d.Type, wd.Name, wd.Type)
		}
		if wd.Domain != nil {
			if !sameValue(d.Type, d.Lo(), wd.Domain[0]) || !sameValue(d.Type, d.Hi(), wd.Domain[1]) {
				t.Errorf("dimension %s: domain [%s, %s], want %v", d.Name,
					schema.FormatValue(d.Type, d.Lo()), schema.FormatValue(d.Type, d.Hi()), wd.Domain)
			}
		}
		if len(filterNames(s.DimensionFilters(i).Filters)) != len(wd.Filters) {
			t.Errorf("dimension %s: filters %v, want %v", d.Name, filterNames(s.DimensionFilters(i).Filters), wd.Filters)
		}
	}
	if len(s.Attributes) != len(want.Attributes) {
		t.Fatalf("%d attributes, want %d", len(s.Attributes), len(want.Attributes))
	}
	for i, wa := range want.Attributes {
		at := &s.Attributes[i]
		if at.Name != wa.Name || at.Type.String() != wa.Type || at.Nullable != wa.Nullable {
			t.Errorf("attribute %d: %s %s nullable=%v, want %s %s nullable=%v", i, at.Name, at.Type, at.Nullable, wa.Name, wa.Type, wa.Nullable)
		}
		if wa.CellValNum.Var != at.IsVar() || (!wa.CellValNum.Var && wa.CellValNum.N != at.CellValNum) {
			t.Errorf("attribute %s: cell_val_num %d, want %+v", at.Name, at.CellValNum, wa.CellValNum)
		}
		names := filterNames(at.Filters.Filters)
		if len(names) != len(wa.Filters) {
			t.Errorf("attribute %s: filters %v, want %+v", at.Name, names, wa.Filters)
		} else {
			for j, f := range wa.Filters {
				if names[j] != f.Name {
					t.Errorf("attribute %s: filter %d is %s, want %s", at.Name, j, names[j], f.Name)
				}
			}
		}
		if wa.Enumeration != nil && at.EnumerationName != *wa.Enumeration {
			t.Errorf("attribute %s: enumeration %q, want %q", at.Name, at.EnumerationName, *wa.Enumeration)
		}
		if wa.Fill != nil && !at.IsVar() && at.CellValNum == 1 && !sameValue(at.Type, at.FillValue, wa.Fill) {
			t.Errorf("attribute %s: fill %s, want %v", at.Name, schema.FormatValue(at.Type, at.FillValue), wa.Fill)
		}
	}
	for _, we := range want.Enumerations {
		ref := s.EnumerationByName(we.Name)
		if ref == nil || ref.Enum == nil {
			t.Errorf("enumeration %s missing", we.Name)
			continue
		}
		if ref.Enum.Len() != len(we.Values) {
			t.Errorf("enumeration %s: %d values, want %d", we.Name, ref.Enum.Len(), len(we.Values))
			continue
		}
		for i, wv := range we.Values {
			if !sameValue(ref.Enum.Type, ref.Enum.Value(i), wv) {
				t.Errorf("enumeration %s: value %d is %q, want %v", we.Name, i, ref.Enum.Value(i), wv)
			}
		}
	}
}

func filterNames(fs []pipeline.Filter) []string {
	out := make([]string, len(fs))
	for i, f := range fs {
		out[i] = f.Type.String()
	}
	return out
}

func checkFragments(t *testing.T, a *Array, want []fixtures.Fragment) {
	t.Helper()
	if len(a.Fragments) != len(want) {
		var got []string
		for _, f := range a.Fragments {
			got = append(got, f.Path)
		}
		t.Fatalf("%d fragments %v, want %d", len(a.Fragments), got, len(want))
	}
	for i, wf := range want {
		f := a.Fragments[i]
		if f.Path != wf.URI || f.Name != wf.Name {
			t.Errorf("fragment %d: %s, want %s", i, f.Path, wf.URI)
		}
		if f.Start != wf.TimestampRange[0] || f.End != wf.TimestampRange[1] {
			t.Errorf("fragment %s: timestamps [%d, %d], want %v", f.Name, f.Start, f.End, wf.TimestampRange)
		}
		footer := f.Meta.Footer()
		if footer.Version != wf.Version {
			t.Errorf("fragment %s: version %d, want %d", f.Name, footer.Version, wf.Version)
		}
		if footer.Dense == wf.Sparse {
			t.Errorf("fragment %s: dense=%v, want sparse=%v", f.Name, footer.Dense, wf.Sparse)
		}
		if wf.SchemaName != "" && footer.SchemaName != wf.SchemaName {
			t.Errorf("fragment %s: schema %s, want %s", f.Name, footer.SchemaName, wf.SchemaName)
		}
		n, err := f.CellNum()
		if err != nil || n != wf.CellNum {
			t.Errorf("fragment %s: %d cells (%v), want %d", f.Name, n, err, wf.CellNum)
		}
		ned := f.NonEmptyDomain()
		if len(ned) != len(wf.NonemptyDomain) {
			t.Errorf("fragment %s: non-empty domain has %d dims, want %d", f.Name, len(ned), len(wf.NonemptyDomain))
			continue
		}
		for d, wr := range wf.NonemptyDomain {
			dim := &f.Schema.Dimensions[d]
			if !sameValue(dim.Type, ned[d].Start, wr[0]) || !sameValue(dim.Type, ned[d].End, wr[1]) {
				t.Errorf("fragment %s: dim %s non-empty domain %s, want %v", f.Name, dim.Name, FormatRange(dim, ned[d]), wr)
			}
		}
	}
}

func checkMetadata(t *testing.T, a *Array, want *fixtures.Metadata) {
	t.Helper()
	snap, err := a.Metadata(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(snap.Values) != len(want.Typed) {
		t.Errorf("%d metadata keys, want %d", len(snap.Values), len(want.Typed))
	}
	for k, wv := range want.Typed {
		v, ok := snap.Values[k]
		if !ok {
			t.Errorf("metadata %q missing", k)
			continue
		}
		if v.Type.String() != wv.Type {
			t.Errorf("metadata %q: type %s, want %s", k, v.Type, wv.Type)
			continue
		}
		if uint64(v.Num) != wv.ValueNum {
			t.Errorf("metadata %q: %d values, want %d", k, v.Num, wv.ValueNum)
			continue
		}
		if v.Type.IsString() || v.Type.IsByteLike() {
			continue // compared through the JSON form below
		}
		size := v.Type.Size()
		for i, x := range wv.Values {
			if !sameValue(v.Type, v.Raw[i*size:(i+1)*size], x) {
				t.Errorf("metadata %q[%d]: %s, want %v", k, i, schema.FormatValue(v.Type, v.Raw[i*size:(i+1)*size]), x)
			}
		}
	}
	got, err := arraymeta.RawJSONMap(snap.Values)
	if err != nil {
		t.Fatal(err)
	}
	for k, wv := range want.Values {
		wantJSON, _ := json.Marshal(wv)
		gv, _ := json.Marshal(got[k])
		if tv := want.Typed[k]; tv.Type != "" && (tv.Type == "blob" || tv.Type == "char") {
			continue // base64 on both sides, compared through Typed above
		}
		if string(gv) != string(wantJSON) && !numericJSONEqual(gv, wantJSON) {
			t.Errorf("metadata %q: %s, want %s", k, gv, wantJSON)
		}
	}
}

func numericJSONEqual(a, b []byte) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	return fmt.Sprint(x) == fmt.Sprint(y)
}

// sameValue compares one raw value of t with a value from the expect JSON.
func sameValue(t datatype.Datatype, raw []byte, want fixtures.Value) bool {
	switch {
	case t.IsFloat():
		w, err := fixtures.Float(want)
		if err != nil {
			return false
		}
		g := schema.AsFloat64(t, raw)
		return g == w || (math.IsNaN(g) && math.IsNaN(w))
	case t.IsString() || t == datatype.GeomWKT:
		s, ok := want.(string)
		return ok && s == string(raw)
	case t.IsByteLike():
		b, err := fixtures.Bytes(want)
		return err == nil && string(b) == string(raw)
	case t.IsSigned() || t == datatype.Bool:
		w, err := fixtures.Int(want)
		return err == nil && w == schema.AsInt64(t, raw)
	default:
		w, err := fixtures.Uint(want)
		return err == nil && w == schema.AsUint64(t, raw)
	}
}
