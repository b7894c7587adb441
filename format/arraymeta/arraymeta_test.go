package arraymeta

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/tileflight/tileflight/format/datatype"
	"github.com/tileflight/tileflight/format/gentile"
	"github.com/tileflight/tileflight/format/names"
	"github.com/tileflight/tileflight/format/wire"
)

func tileDBFiles(t *testing.T) []string {
	fs, err := filepath.Glob("testdata/*/__meta/__*")
	if err != nil || len(fs) == 0 {
		t.Fatalf("no golden files: %v", err)
	}
	var out []string
	for _, f := range fs {
		if !strings.HasSuffix(f, names.ExtVacuum) {
			out = append(out, f)
		}
	}
	return out
}

// Every metadata file TileDB wrote decodes, and re-encoding its entries
// gives TileDB's payload byte for byte.
func TestTileDBPayloadsRoundTrip(t *testing.T) {
	for _, f := range tileDBFiles(t) {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		tiles, err := gentile.DecodeAll(b, nil)
		if err != nil || len(tiles) != 1 {
			t.Fatalf("%s: %d tiles, %v", f, len(tiles), err)
		}
		es, err := DecodeFile(b)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		enc, err := EncodePayload(es)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if !bytes.Equal(enc, tiles[0]) {
			t.Errorf("%s: re-encoded payload differs from TileDB's", f)
		}
		file, err := EncodeFile(es, 22)
		if err != nil {
			t.Fatal(err)
		}
		back, err := DecodeFile(file)
		if err != nil || !reflect.DeepEqual(back, es) {
			t.Errorf("%s: EncodeFile/DecodeFile round trip: %v", f, err)
		}
	}
}

// Entries built from scratch encode to exactly the payload TileDB wrote for
// the history array. tiledb-py deletes the numpy shadow keys of every key
// it sets, so those deletions are part of each file.
func TestEncodeMatchesTileDB(t *testing.T) {
	shadows := func(keys ...string) []Entry {
		var es []Entry
		for _, k := range keys {
			es = append(es, Entry{Key: NumpyDataPrefix + k, Deleted: true}, Entry{Key: NumpyShapePrefix + k, Deleted: true})
		}
		return es
	}
	cases := []struct {
		glob    string
		entries []Entry
	}{
		{"__10_10_*", append(shadows("b", "a"), Entry{Key: "b", Value: Int64s(2)}, Entry{Key: "a", Value: Int64s(1)})},
		{"__20_20_*", append(shadows("a", "b"), Entry{Key: "a", Value: Int64s(3)}, Entry{Key: "b", Deleted: true})},
		{"__30_30_*", append(shadows("c"), Entry{Key: "c", Value: String("x")})},
	}
	for _, c := range cases {
		fs, _ := filepath.Glob("testdata/history/__meta/" + c.glob)
		if len(fs) != 1 {
			t.Fatalf("%s: %v", c.glob, fs)
		}
		b, _ := os.ReadFile(fs[0])
		tiles, err := gentile.DecodeAll(b, nil)
		if err != nil {
			t.Fatal(err)
		}
		got, err := EncodePayload(c.entries)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, tiles[0]) {
			t.Errorf("%s:\n got %x\nwant %x", c.glob, got, tiles[0])
		}
	}
}

func TestMergeOrder(t *testing.T) {
	mk := func(s string) names.Name {
		n, err := names.Parse(s)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	files := []File{
		{Name: mk("__20_20_00000000000000000000000000000000"), Entries: []Entry{{Key: "a", Deleted: true}, {Key: "b", Value: String("late")}}},
		{Name: mk("__3_30_00000000000000000000000000000000"), Entries: []Entry{{Key: "a", Value: String("first")}, {Key: "b", Value: String("early")}, {Key: "a", Value: String("second")}}},
	}
	m := Merge(files)
	if len(m) != 1 {
		t.Fatalf("%v", m)
	}
	if s, _ := m["b"].Text(); s != "late" {
		t.Fatalf("b = %q", s)
	}
}

func TestValues(t *testing.T) {
	le := func(xs ...uint64) []byte {
		var b []byte
		for _, x := range xs {
			b = append(b, byte(x), byte(x>>8))
		}
		return b
	}
	cases := []struct {
		v    Value
		json string
	}{
		{Int64s(-7), `-7`},
		{Int64s(1, 2), `[1,2]`},
		{Int64s(), `[]`},
		{Value{Type: datatype.Int32}, `[]`},
		{Float64s(math.NaN(), math.Inf(1), math.Inf(-1), 0.5), `["NaN","Infinity","-Infinity",0.5]`},
		{String("héllo"), `"héllo"`},
		{String(""), `""`},
		{Blob([]byte{0, 1, 255}), `"AAH/"`},
		{Value{Type: datatype.Uint64, Num: 1, Raw: []byte{255, 255, 255, 255, 255, 255, 255, 255}}, `18446744073709551615`},
		{Value{Type: datatype.Int8, Num: 2, Raw: []byte{1, 0xfe}}, `[1,-2]`},
		{Value{Type: datatype.Bool, Num: 2, Raw: []byte{1, 0}}, `[true,false]`},
		{Value{Type: datatype.Float32, Num: 1, Raw: []byte{0, 0, 0x80, 0x3e}}, `0.25`},
		{Value{Type: datatype.StringUTF16, Num: 2, Raw: le('h', 0x00e9)}, `"hé"`},
		{Value{Type: datatype.StringUTF32, Num: 1, Raw: []byte{0x00, 0xf6, 0x01, 0x00}}, `"😀"`},
		{Value{Type: datatype.Char, Num: 2, Raw: []byte("ab")}, `"ab"`},
		{Value{Type: datatype.DatetimeMs, Num: 1, Raw: []byte{1, 0, 0, 0, 0, 0, 0, 0}}, `1`},
	}
	for _, c := range cases {
		j, err := c.v.JSON()
		if err != nil {
			t.Errorf("%v: %v", c.v, err)
			continue
		}
		b, err := json.Marshal(j)
		if err != nil || string(b) != c.json {
			t.Errorf("%s %x: JSON %s, want %s (%v)", c.v.Type, c.v.Raw, b, c.json, err)
		}
	}
	if _, err := (Value{Type: datatype.Int32, Num: 2, Raw: []byte{1}}).JSON(); err == nil {
		t.Error("short raw accepted")
	}
	if _, err := String("x").Int64s(); err == nil {
		t.Error("Int64s of a string")
	}
	if f, err := (Value{Type: datatype.Float32, Num: 1, Raw: []byte{0, 0, 0x80, 0x3e}}).Float64s(); err != nil || f[0] != 0.25 {
		t.Errorf("Float64s: %v %v", f, err)
	}
	if _, err := (Value{Type: datatype.Uint64, Num: 1, Raw: bytes.Repeat([]byte{255}, 8)}).Int64s(); err == nil {
		t.Error("uint64 max fit int64")
	}
	if _, err := (Value{Type: datatype.StringUTF16, Num: 3, Raw: []byte{'h', 0}}).Text(); err == nil {
		t.Error("Text of a short UTF-16 value")
	}
	// A count that the raw bytes do not back is refused before anything
	// is allocated from it.
	if _, err := JSONMap(map[string]Value{NumpyDataPrefix + "x": {Type: datatype.Int32, Num: math.MaxUint32}}); err == nil {
		t.Error("numpy value with a forged count accepted")
	}
	// A shape deeper than numpy allows is not reshaped: the flat values.
	deep := make([]int64, maxNumpyDims+1)
	for i := range deep {
		deep[i] = 1
	}
	m, err := JSONMap(map[string]Value{NumpyDataPrefix + "x": Int64s(5), NumpyShapePrefix + "x": Int64s(deep...)})
	if b, _ := json.Marshal(m); err != nil || string(b) != `{"x":[5]}` {
		t.Errorf("deep shape: %s %v", b, err)
	}
}

func TestFromJSON(t *testing.T) {
	dec := func(s string) any {
		d := json.NewDecoder(strings.NewReader(s))
		d.UseNumber()
		var x any
		if err := d.Decode(&x); err != nil {
			t.Fatal(err)
		}
		return x
	}
	cases := []struct {
		in   string
		want Value
	}{
		{`5`, Int64s(5)},
		{`-5`, Int64s(-5)},
		{`1.5`, Float64s(1.5)},
		{`1.0`, Float64s(1)},
		{`"s"`, String("s")},
		{`[1,2]`, Int64s(1, 2)},
		{`[1,2.5]`, Float64s(1, 2.5)},
		{`[]`, Value{Type: datatype.Int32}},
		{`true`, Int64s(1)},
	}
	for _, c := range cases {
		v, err := FromJSON(dec(c.in))
		if err != nil || !v.Equal(c.want) {
			t.Errorf("FromJSON(%s) = %+v, %v", c.in, v, err)
		}
	}
	for _, bad := range []string{`null`, `{"a":1}`, `[[1]]`, `["a"]`} {
		if v, err := FromJSON(dec(bad)); err == nil {
			t.Errorf("FromJSON(%s) accepted: %+v", bad, v)
		}
	}
}

func TestDecodeErrors(t *testing.T) {
	good, _ := EncodePayload([]Entry{{Key: "k", Value: Int64s(1, 2)}})
	cases := []struct {
		name string
		b    []byte
		want error
	}{
		{"truncated key length", good[:2], wire.ErrTruncated},
		{"truncated key", good[:5], wire.ErrTruncated},
		{"truncated value", good[:len(good)-1], wire.ErrTruncated},
		{"bad deletion flag", append(append([]byte{}, good[:5]...), 7), wire.ErrCorrupt},
		{"bad type", append(append([]byte{}, good[:6]...), 200, 0, 0, 0, 0), wire.ErrCorrupt},
		{"huge count", append(append([]byte{}, good[:7]...), 0xff, 0xff, 0xff, 0xff), wire.ErrTruncated},
	}
	for _, c := range cases {
		_, err := DecodePayload(c.b)
		if !errors.Is(err, c.want) {
			t.Errorf("%s: got %v, want %v", c.name, err, c.want)
		}
	}
	if _, err := EncodePayload([]Entry{{Key: "a", Value: Int64s(1)}, {Key: "a", Deleted: true}}); err == nil {
		t.Error("duplicate keys encoded")
	}
	if _, err := EncodePayload([]Entry{{Key: "a", Value: Value{Type: datatype.Any, Num: 1, Raw: []byte{1}}}}); err == nil {
		t.Error("ANY value encoded")
	}
}

func FuzzDecodePayload(f *testing.F) {
	for _, fn := range []string{"__10_10_*", "__20_20_*"} {
		fs, _ := filepath.Glob("testdata/history/__meta/" + fn)
		for _, p := range fs {
			b, _ := os.ReadFile(p)
			if tiles, err := gentile.DecodeAll(b, nil); err == nil {
				f.Add(tiles[0])
			}
		}
	}
	good, _ := EncodePayload([]Entry{{Key: "k", Value: Int64s(1, 2)}, {Key: "s", Value: String("x")}, {Key: "z", Deleted: true}})
	f.Add(good)
	f.Fuzz(func(t *testing.T, b []byte) {
		es, err := DecodePayload(b)
		if err != nil {
			return
		}
		m := map[string]Value{}
		apply(m, es)
		if _, err := RawJSONMap(m); err != nil {
			t.Fatalf("decoded values do not render: %v", err)
		}
		JSONMap(m)
		// Last entry per key, re-encoded and decoded, gives the same map.
		last := map[string]Entry{}
		for _, e := range es {
			last[e.Key] = e
		}
		var uniq []Entry
		for _, e := range last {
			if e.Value.Type == datatype.Any && !e.Deleted {
				return // TileDB never writes ANY; Encode refuses it
			}
			uniq = append(uniq, e)
		}
		enc, err := EncodePayload(uniq)
		if err != nil {
			t.Fatalf("re-encode: %v", err)
		}
		back, err := DecodePayload(enc)
		if err != nil {
			t.Fatalf("decode re-encoded: %v", err)
		}
		m2 := map[string]Value{}
		apply(m2, back)
		if len(m2) != len(m) {
			t.Fatalf("round trip: %d keys, want %d", len(m2), len(m))
		}
		for k, v := range m {
			if !m2[k].Equal(v) {
				t.Fatalf("round trip: key %q differs", k)
			}
		}
	})
}

func FuzzDecodeFile(f *testing.F) {
	for _, p := range []string{"testdata/types/__meta", "testdata/history/__meta"} {
		fs, _ := filepath.Glob(p + "/__*")
		for _, fn := range fs {
			b, _ := os.ReadFile(fn)
			f.Add(b)
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		DecodeFile(b)
	})
}

// TestEmptyFileIsTruncated: a metadata file cut to nothing is corrupt
// (TileDB refuses to open the array), not an array without keys (found by
// the corruption campaign, python_tests/soak/corrupt.py).
func TestEmptyFileIsTruncated(t *testing.T) {
	if _, err := DecodeFile(nil); !errors.Is(err, wire.ErrTruncated) {
		t.Fatalf("empty metadata file: %v, want ErrTruncated", err)
	}
}
