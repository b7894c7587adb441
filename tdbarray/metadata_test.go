package tdbarray

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"math"
	"math/big"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/tileflight/tileflight/format/arraymeta"
	"github.com/tileflight/tileflight/storage"
)

// metaTestdata holds the metadata files TileDB wrote (arrays and what
// tiledb-py reported for them), shared with package arraymeta's tests.
var metaTestdata = filepath.Join("..", "format", "arraymeta", "testdata")

type snapCase struct {
	array, label string
	start, end   uint64
	want         map[string]any
}

func loadExpected(t *testing.T) []snapCase {
	b, err := os.ReadFile(filepath.Join(metaTestdata, "expected.json"))
	if err != nil {
		t.Fatal(err)
	}
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var exp map[string]map[string]map[string]any
	if err := d.Decode(&exp); err != nil {
		t.Fatal(err)
	}
	var out []snapCase
	for arr, snaps := range exp {
		for label, want := range snaps {
			c := snapCase{array: arr, label: label, start: 0, end: arraymeta.Latest, want: want}
			if label != "latest" {
				lo, hi, _ := strings.Cut(label, "-")
				c.start, _ = strconv.ParseUint(lo, 10, 64)
				c.end, _ = strconv.ParseUint(hi, 10, 64)
			}
			out = append(out, c)
		}
	}
	return out
}

// norm makes TileDB's report and ours comparable: numbers by value (exact
// for integers), bytes ({"hex"} on TileDB's side) as base64.
func norm(x any) any {
	switch v := x.(type) {
	case json.Number:
		if i, ok := new(big.Int).SetString(v.String(), 10); ok {
			return i.String()
		}
		f, _ := v.Float64()
		if f == math.Trunc(f) && math.Abs(f) < 1<<53 {
			return strconv.FormatInt(int64(f), 10)
		}
		return strconv.FormatFloat(f, 'g', -1, 64)
	case []any:
		out := make([]any, len(v))
		for i := range v {
			out[i] = norm(v[i])
		}
		return out
	case map[string]any:
		if h, ok := v["hex"].(string); ok && len(v) == 1 {
			b, _ := hex.DecodeString(h)
			return base64.StdEncoding.EncodeToString(b)
		}
		out := map[string]any{}
		for k, e := range v {
			out[k] = norm(e)
		}
		return out
	}
	return x
}

func roundTripJSON(t *testing.T, x any) any {
	b, err := json.Marshal(x)
	if err != nil {
		t.Fatal(err)
	}
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var out any
	if err := d.Decode(&out); err != nil {
		t.Fatal(err)
	}
	return out
}

// What LoadMetadata reports for each array and timestamp range equals what
// tiledb's Array.meta showed, key by key, type by type.
func TestLoadMatchesTileDB(t *testing.T) {
	st, err := storage.NewLocal(metaTestdata)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for _, c := range loadExpected(t) {
		snap, err := LoadMetadata(context.Background(), st, c.array, c.start, c.end, nil)
		if err != nil {
			t.Fatalf("%s %s: %v", c.array, c.label, err)
		}
		got, err := arraymeta.JSONMap(snap.Values)
		if err != nil {
			t.Fatalf("%s %s: %v", c.array, c.label, err)
		}
		want := map[string]any{}
		for k, tv := range c.want {
			pair := tv.([]any)
			want[k] = pair[1]
			typ := pair[0].(string)
			v, ok := snap.Values[k]
			if !ok {
				v, ok = snap.Values[arraymeta.NumpyDataPrefix+k]
				if _, shaped := snap.Values[arraymeta.NumpyShapePrefix+k]; shaped {
					continue // tiledb-py reports the shape's type there
				}
			}
			if ok && v.Type.TileDBName() != typ {
				t.Errorf("%s %s: key %q: type %s, TileDB says %s", c.array, c.label, k, v.Type.TileDBName(), typ)
			}
		}
		if g, w := norm(roundTripJSON(t, got)), norm(roundTripJSON(t, want)); !reflect.DeepEqual(g, w) {
			t.Errorf("%s %s:\n got %v\nwant %v", c.array, c.label, g, w)
		}
	}
}

func TestLoadSemantics(t *testing.T) {
	ctx := context.Background()
	st := storage.NewMem()
	put := func(name string, entries ...arraymeta.Entry) {
		b, err := arraymeta.EncodeFile(entries, 22)
		if err != nil {
			t.Fatal(err)
		}
		if err := st.Put(ctx, "arr/__meta/"+name, b); err != nil {
			t.Fatal(err)
		}
	}
	// Listed out of timestamp order on purpose: __5 sorts after __10 by
	// bytes but applies first.
	put("__5_5_00000000000000000000000000000001", arraymeta.Entry{Key: "k", Value: arraymeta.Int64s(5)}, arraymeta.Entry{Key: "gone", Value: arraymeta.Int64s(0)})
	put("__10_10_00000000000000000000000000000002", arraymeta.Entry{Key: "k", Value: arraymeta.Int64s(10)}, arraymeta.Entry{Key: "gone", Deleted: true})
	put("__10_10_00000000000000000000000000000003", arraymeta.Entry{Key: "k", Value: arraymeta.Int64s(11)})
	put("__50_50_00000000000000000000000000000004.tmp", arraymeta.Entry{Key: "k", Value: arraymeta.Int64s(50)})
	// A vacuum file out of every range below except "latest" hides __10_..02.
	if err := st.Put(ctx, "arr/__meta/__5_60_00000000000000000000000000000009.vac",
		[]byte("file:///somewhere/arr/__meta/__10_10_00000000000000000000000000000002\n")); err != nil {
		t.Fatal(err)
	}
	if err := st.Put(ctx, "arr/__meta/notes.txt", []byte("ignored")); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		start, end uint64
		k          int64
		gone       bool
		applied    int
	}{
		{0, arraymeta.Latest, 11, true, 2}, // the vacuum file hides the deletion
		{0, 59, 11, false, 3},              // vacuum file out of range: all three apply
		{0, 9, 5, true, 1},
		{6, 10, 11, false, 2},
	}
	for _, c := range cases {
		snap, err := LoadMetadata(ctx, st, "arr", c.start, c.end, nil)
		if err != nil {
			t.Fatal(err)
		}
		k, _ := snap.Values["k"].Int64s()
		_, hasGone := snap.Values["gone"]
		if len(k) != 1 || k[0] != c.k || hasGone != c.gone || len(snap.Applied) != c.applied {
			t.Errorf("[%d,%d]: k=%v gone=%v applied=%v", c.start, c.end, k, hasGone, snap.Applied)
		}
	}
	snap, err := LoadMetadata(ctx, st, "no/such/array", 0, arraymeta.Latest, nil)
	if err != nil || len(snap.Values) != 0 {
		t.Fatalf("missing array: %v %v", snap, err)
	}
}
