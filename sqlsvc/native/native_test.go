package native

import (
	"context"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	arr "github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/rs/zerolog"

	"github.com/tileflight/tileflight/errkind"
	"github.com/tileflight/tileflight/flightsvc"
	"github.com/tileflight/tileflight/format/datatype"
	"github.com/tileflight/tileflight/format/schema"
	"github.com/tileflight/tileflight/storage"
	"github.com/tileflight/tileflight/writer"
)

// TestDescribe: an array as the SQL layer sees it, before and after a
// write: columns with their TileDB types, domains and non-empty domains
// read as numbers, fragments, and the filter check.
func TestDescribe(t *testing.T) {
	ctx := context.Background()
	st := storage.NewMem()
	s, err := schema.FromJSON([]byte(`{"type":"sparse","dimensions":[
		{"name":"k","type":"uint64","domain":[0,18446744073709551000],"tile":10},
		{"name":"f","type":"float64","domain":[-1.5,2.5],"tile":1},
		{"name":"s","type":"string_ascii"}],
		"attributes":[{"name":"n","type":"int32","nullable":true}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if err := writer.CreateArray(ctx, st, "g/pts", s); err != nil {
		t.Fatal(err)
	}
	svc := flightsvc.NewService(flightsvc.Config{Store: st, Log: zerolog.Nop()})
	e := New(svc)

	a, err := e.Describe(ctx, "g/pts")
	if err != nil {
		t.Fatal(err)
	}
	if a.Path != "g/pts" || a.Dense || a.B2ND || a.NonEmpty != nil || len(a.Fragments) != 0 {
		t.Fatalf("empty array described as %+v", a)
	}
	for _, tc := range []struct {
		name     string
		typ      datatype.Datatype
		isVar    bool
		nullable bool
		dim      bool
	}{
		{"k", datatype.Uint64, false, false, true},
		{"f", datatype.Float64, false, false, true},
		{"s", datatype.StringASCII, true, false, true},
		{"n", datatype.Int32, false, true, false},
	} {
		c, ok := a.Column(tc.name)
		if !ok || c.Type != tc.typ || c.Var != tc.isVar || c.Nullable != tc.nullable || (a.DimIndex(tc.name) >= 0) != tc.dim {
			t.Errorf("column %s: %+v (found %v), want type %s var %v nullable %v dimension %v", tc.name, c, ok, tc.typ, tc.isVar, tc.nullable, tc.dim)
		}
	}
	if hi := a.Dims[0].Domain.Hi.Uint; hi != 18446744073709551000 {
		t.Errorf("k's domain ends at %d", hi)
	}
	if lo := a.Dims[1].Domain.Lo.Float; lo != -1.5 {
		t.Errorf("f's domain starts at %v", lo)
	}
	if a.Arrow.NumFields() != 4 {
		t.Errorf("Arrow schema %v", a.Arrow)
	}

	rec, _, err := arr.RecordFromJSON(memory.DefaultAllocator, a.Arrow, strings.NewReader(
		`[{"k": 7, "f": 0.5, "s": "b", "n": 1}, {"k": 3, "f": -1, "s": "a", "n": null}]`))
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Release()
	rdr, err := arr.NewRecordReader(a.Arrow, []arrow.RecordBatch{rec})
	if err != nil {
		t.Fatal(err)
	}
	if n, err := e.Write(ctx, "g/pts", rdr); err != nil || n != 2 {
		t.Fatalf("write: %d rows, %v", n, err)
	}

	a, err = e.Describe(ctx, "g/pts")
	if err != nil {
		t.Fatal(err)
	}
	if len(a.NonEmpty) != 3 || a.NonEmpty[0].Lo.Int != 3 || a.NonEmpty[0].Hi.Uint != 7 ||
		a.NonEmpty[1].Lo.Float != -1 || a.NonEmpty[1].Hi.Float != 0.5 {
		t.Errorf("non-empty domain %+v", a.NonEmpty)
	}
	if len(a.Fragments) != 1 || !a.Fragments[0].CellsKnown || a.Fragments[0].Cells != 2 || len(a.Fragments[0].NonEmpty) != 3 {
		t.Errorf("fragments %+v", a.Fragments)
	}
	if err := a.CheckFilter("n > 1"); err != nil {
		t.Errorf("filter on n: %v", err)
	}
	if err := a.CheckFilter("nope > 1"); err == nil {
		t.Errorf("filter on a column that is not there compiles")
	}
	if _, err := e.Describe(ctx, "g/none"); errkind.Of(err) != errkind.NotFound {
		t.Errorf("describing an array that is not there: %v", err)
	}
}
