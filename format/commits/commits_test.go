package commits

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/tileflight/tileflight/format/wire"
)

func TestParseName(t *testing.T) {
	const u = "0123456789abcdef0123456789abcdef"
	tests := []struct {
		in         string
		start, end uint64
		version    uint32
		err        bool
	}{
		{"__10_20_" + u + "_22", 10, 20, 22, false},
		{"__fragments/__10_20_" + u + "_22/", 10, 20, 22, false},
		{"__commits/__10_20_" + u + "_22.wrt", 10, 20, 22, false},
		{"__7_7_" + u + "_5.ok", 7, 7, 5, false},
		{"__7_9_" + u, 7, 9, 4, false},                                        // formats 3-4: no version
		{"__" + u + "_1541540586869", 1541540586869, 1541540586869, 2, false}, // formats 1-2
		{"__20_10_" + u + "_22", 0, 0, 0, true},                               // start after end
		{"nounderscore.wrt", 0, 0, 0, true},
		{"__meta", 0, 0, 2, false},              // parsed like TileDB: no digits, zero
		{"__3_x_" + u + "_22", 3, 0, 0, true},   // end unparsable -> 0 < start
		{"__1_2_" + u + "_abc", 1, 2, 0, false}, // version unparsable -> 0
		{"__99999999999999999999_99999999999999999999_" + u + "_22", math.MaxInt64, math.MaxInt64, 22, false},
	}
	for _, tc := range tests {
		ni, err := parseName(tc.in)
		if (err != nil) != tc.err {
			t.Errorf("%q: err %v", tc.in, err)
			continue
		}
		if tc.err {
			if !errors.Is(err, wire.ErrCorrupt) {
				t.Errorf("%q: error %v does not wrap ErrCorrupt", tc.in, err)
			}
			continue
		}
		if ni.start != tc.start || ni.end != tc.end || ni.version != tc.version {
			t.Errorf("%q: got %d %d v%d, want %d %d v%d", tc.in, ni.start, ni.end, ni.version, tc.start, tc.end, tc.version)
		}
	}
}

func TestCommitAndVacuumPaths(t *testing.T) {
	const u = "0123456789abcdef0123456789abcdef"
	tests := []struct{ frag, commit, vac string }{
		{"__fragments/__1_2_" + u + "_22", "__commits/__1_2_" + u + "_22.wrt", "__commits/__1_2_" + u + "_22.vac"},
		{"__1_2_" + u + "_10", "__1_2_" + u + "_10.ok", "__1_2_" + u + "_10.vac"},
	}
	for _, tc := range tests {
		c, err := CommitPath(tc.frag)
		if err != nil || c != tc.commit {
			t.Errorf("CommitPath(%q) = %q, %v", tc.frag, c, err)
		}
		v, err := VacuumPath(tc.frag)
		if err != nil || v != tc.vac {
			t.Errorf("VacuumPath(%q) = %q, %v", tc.frag, v, err)
		}
	}
}

func TestLines(t *testing.T) {
	tests := []struct {
		in   string
		want []string
	}{
		{"", nil},
		{"a\n", []string{"a"}},
		{"a\nb", []string{"a", "b"}},
		{"a\n\nb\n", []string{"a", "", "b"}},
		{"\n", []string{""}},
	}
	for _, tc := range tests {
		if got := DecodeIgnore([]byte(tc.in)); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%q: got %q", tc.in, got)
		}
	}
	if got := string(EncodeIgnore([]string{"__commits/x.wrt", "__commits/y.wrt"})); got != "__commits/x.wrt\n__commits/y.wrt\n" {
		t.Errorf("EncodeIgnore: %q", got)
	}
}

func TestVacuumTarget(t *testing.T) {
	tests := []struct{ in, want string }{
		{"/__fragments/__1_1_u_22", "__fragments/__1_1_u_22"},
		{"file:///data/arr/__fragments/__1_1_u_18", "__fragments/__1_1_u_18"},
		{"/data/arr/__1_1_u_11", "__1_1_u_11"},
		{"s3://b/arr/__meta/__1_1_u", "__meta/__1_1_u"},
	}
	for _, tc := range tests {
		got, err := VacuumTarget(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("%q: got %q, %v", tc.in, got, err)
		}
	}
	if _, err := VacuumTarget("__1_1_u_11"); !errors.Is(err, wire.ErrCorrupt) {
		t.Errorf("a bare name is refused as TileDB refuses it: %v", err)
	}
	if got := VacuumLine("__1_1_u_11", 11, "file:///data/arr/"); got != "file:///data/arr/__1_1_u_11" {
		t.Errorf("VacuumLine v11: %q", got)
	}
}

func TestConErrors(t *testing.T) {
	tile := []byte{1, 2, 3, '\n', 5}
	good, err := EncodeCon([]ConEntry{
		{Path: "__commits/__1_1_u_22.wrt"},
		{Path: "__commits/__2_2_u_22.del", Tile: tile},
		{Path: "__commits/__3_3_u_22.wrt"},
	})
	if err != nil {
		t.Fatal(err)
	}
	es, err := DecodeCon(good)
	if err != nil || len(es) != 3 || string(es[1].Tile) != string(tile) || es[2].Path != "__commits/__3_3_u_22.wrt" {
		t.Fatalf("round trip: %+v %v", es, err)
	}
	for cut := 1; cut < len(good); cut++ {
		es, err := DecodeCon(good[:cut])
		inTile := cut > len("__commits/__1_1_u_22.wrt\n__commits/__2_2_u_22.del\n") && cut < len(good)-len("__commits/__3_3_u_22.wrt\n")
		if inTile && !errors.Is(err, wire.ErrTruncated) {
			t.Errorf("cut at %d inside the delete tile: %v %+v", cut, err, es)
		}
	}
	huge := append([]byte("__commits/__2_2_u_22.del\n"), binary.LittleEndian.AppendUint64(nil, math.MaxUint64)...)
	if _, err := DecodeCon(huge); !errors.Is(err, wire.ErrTruncated) {
		t.Errorf("huge tile size: %v", err)
	}
	if _, err := EncodeCon([]ConEntry{{Path: "a\nb"}}); err == nil {
		t.Error("a path with a newline was encoded")
	}
	if _, err := EncodeCon([]ConEntry{{Path: "x.wrt", Tile: []byte{1}}}); err == nil {
		t.Error("a tile on a fragment commit was encoded")
	}
}

func val(field string, op Op, v []byte) *Node {
	return &Node{Kind: KindValue, Field: field, Op: op, Value: v}
}

func i32(v int32) []byte { return binary.LittleEndian.AppendUint32(nil, uint32(v)) }
func f64(v float64) []byte {
	return binary.LittleEndian.AppendUint64(nil, math.Float64bits(v))
}
func expr(c Combination, ch ...*Node) *Node {
	return &Node{Kind: KindExpr, Combination: c, Children: ch}
}
func set(field string, op Op, members ...[]byte) *Node {
	n := &Node{Kind: KindValue, Field: field, Op: op}
	for _, m := range members {
		n.Offsets = append(n.Offsets, uint64(len(n.Value)))
		n.Value = append(n.Value, m...)
	}
	return n
}

// The conditions submitted by commits_cases.py, as trees of what is
// deleted; TileDB stores their negation (the cells to keep).
var submittedDeletes = map[uint64]*Node{
	100: val("a", OpLT, i32(5)),
	101: val("a", OpGE, i32(7)),
	102: val("s", OpEQ, []byte("abc")),
	103: set("a", OpIn, i32(1), i32(3), i32(5)),
	104: set("s", OpNotIn, []byte("x"), []byte("yz")),
	105: expr(And, val("a", OpGT, i32(2)), val("a", OpLT, i32(8))),
	106: expr(Or, val("a", OpEQ, i32(1)), val("f", OpEQ, f64(1.5))),
	107: expr(Not, val("a", OpEQ, i32(3))),
	108: expr(And,
		expr(Or, val("a", OpLT, i32(2)), val("a", OpGT, i32(8))),
		expr(Or, val("s", OpNE, []byte("q")), val("f", OpLE, f64(0.5)))),
	109: val("n", OpEQ, nil),
	110: val("n", OpNE, nil),
}

func TestDeleteConditionsFromTileDB(t *testing.T) {
	for _, c := range loadCases(t) {
		if len(c.Deletes) == 0 {
			continue
		}
		v, err := Resolve(c.listing, Options{Start: 0, End: math.MaxUint64})
		if err != nil {
			t.Fatal(err)
		}
		if len(v.Conditions) != len(submittedDeletes) {
			t.Fatalf("%s: %d delete commits in range, want %d", c.Case, len(v.Conditions), len(submittedDeletes))
		}
		for i, dc := range v.Conditions {
			if i > 0 && dc.Timestamp < v.Conditions[i-1].Timestamp {
				t.Errorf("%s: deletes out of timestamp order", c.Case)
			}
			b := dc.Tile
			if b == nil {
				if b, err = os.ReadFile(filepath.Join(c.dir, "files", dc.Container)); err != nil {
					t.Fatal(err)
				}
			}
			got, err := DecodeDelete(b)
			if err != nil {
				t.Fatalf("%s: %s: %v", c.Case, dc.Path, err)
			}
			want := submittedDeletes[dc.Timestamp].Negated()
			if !reflect.DeepEqual(got, want) {
				t.Errorf("%s: %s: got %s, want %s", c.Case, dc.Path, dump(got), dump(want))
			}
			if dc.Timestamp >= 109 && !got.IsNullTest() {
				t.Errorf("%s: %s is not a null test", c.Case, dc.Path)
			}
		}
		if c.Case == "deletes_con" {
			for _, dc := range v.Conditions {
				if !strings.HasSuffix(dc.Container, SuffixCon) || dc.Tile == nil {
					t.Errorf("deletes_con: %s should come from the consolidated commits file", dc.Path)
				}
			}
		}
		// A range covering only some deletes selects exactly those.
		v, _ = Resolve(c.listing, Options{Start: 102, End: 104})
		if len(v.Conditions) != 3 || v.Conditions[0].Timestamp != 102 {
			t.Errorf("%s: deletes in [102,104]: %+v", c.Case, v.Conditions)
		}
	}
}

func dump(n *Node) string {
	if n == nil {
		return "<nil>"
	}
	if n.Kind == KindExpr {
		parts := make([]string, len(n.Children))
		for i, c := range n.Children {
			parts[i] = dump(c)
		}
		return n.Combination.String() + "(" + strings.Join(parts, ", ") + ")"
	}
	return fmt.Sprintf("%s %s %x %v", n.Field, n.Op, n.Value, n.Offsets)
}

func TestConditionErrors(t *testing.T) {
	good, err := EncodeCondition(expr(Or, set("a", OpIn, i32(1), i32(2)), val("b", OpEQ, nil)))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := DecodeCondition(good); err != nil {
		t.Fatal(err)
	}
	for cut := 0; cut < len(good); cut++ {
		if _, err := DecodeCondition(good[:cut]); err == nil {
			t.Errorf("cut at %d accepted", cut)
		}
	}
	if _, err := DecodeCondition(append(good, 0)); !errors.Is(err, wire.ErrCorrupt) {
		t.Errorf("trailing byte: %v", err)
	}
	bad := func(name string, b []byte) {
		if _, err := DecodeCondition(b); !errors.Is(err, wire.ErrCorrupt) && !errors.Is(err, wire.ErrTruncated) {
			t.Errorf("%s: %v", name, err)
		}
	}
	bad("node type", []byte{7})
	bad("op", []byte{1, 9, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0})
	bad("combination", []byte{0, 3, 0, 0, 0, 0, 0, 0, 0, 0})
	bad("children count", []byte{0, 0, 255, 255, 255, 255, 255, 255, 255, 255})
	// offsets not a multiple of 8 / decreasing / past the value
	setNode := func(val []byte, offs []byte) []byte {
		w := wire.NewWriter(nil)
		w.Uint8(1)
		w.Uint8(uint8(OpIn))
		w.Uint32(1)
		w.String("a")
		w.Uint64(uint64(len(val)))
		w.Write(val)
		w.Uint64(uint64(len(offs)))
		w.Write(offs)
		return w.Bytes()
	}
	bad("offsets size", setNode([]byte{1, 2}, []byte{0, 0, 0}))
	o := binary.LittleEndian.AppendUint64(binary.LittleEndian.AppendUint64(nil, 1), 0)
	bad("decreasing offsets", setNode([]byte{1, 2}, o))
	bad("offset past value", setNode([]byte{1, 2}, binary.LittleEndian.AppendUint64(nil, 3)))
	bad("members without offsets", setNode([]byte{1, 2}, nil))

	deep := []byte{}
	for i := 0; i < MaxConditionDepth+2; i++ {
		deep = append(deep, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0)
	}
	deep = append(deep, 1, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
	bad("too deep", deep)

	if _, err := EncodeCondition(nil); err == nil {
		t.Error("nil tree encoded")
	}
	if _, err := EncodeCondition(val("a", Op(42), nil)); err == nil {
		t.Error("unknown op encoded")
	}
}

func TestUpdatePayloadRoundTrip(t *testing.T) {
	u := &Update{
		Condition: val("a", OpGE, i32(5)),
		Values:    []UpdateValue{{Field: "a", Value: i32(9)}, {Field: "s", Value: []byte("new")}},
	}
	b, err := EncodeUpdatePayload(u)
	if err != nil {
		t.Fatal(err)
	}
	got, err := DecodeUpdatePayload(b)
	if err != nil || !reflect.DeepEqual(got, u) {
		t.Fatalf("got %+v, %v", got, err)
	}
	// layout: condition, then count, then (u64 name size, name, u64 size, value)*
	cond, _ := EncodeCondition(u.Condition)
	if n := binary.LittleEndian.Uint64(b[len(cond):]); n != 2 {
		t.Errorf("value count %d", n)
	}
	if _, err := DecodeUpdatePayload(append(b, 0)); err == nil {
		t.Error("trailing byte accepted")
	}
	big := append(cond, binary.LittleEndian.AppendUint64(nil, math.MaxUint64)...)
	if _, err := DecodeUpdatePayload(big); !errors.Is(err, wire.ErrCorrupt) {
		t.Errorf("huge count: %v", err)
	}
}

const uu = "0123456789abcdef0123456789abcdef"

func nm(s, e int, v int) string { return fmt.Sprintf("__%d_%d_%s_%d", s, e, uu, v) }

// Synthetic layouts for what the TileDB 2.30 fixtures cannot show: the
// legacy root hierarchy, mixed with the new one.
func TestResolveLegacyAndMixed(t *testing.T) {
	v1 := "__" + uu + "_5" // format 1-2 name (timestamp 5), no commit file
	v1nometa := "__" + uu + "_6"
	v4 := fmt.Sprintf("__7_7_%s", uu) // format 3-4 name, no commit file
	v10 := nm(8, 8, 10)
	v10uncommitted := nm(9, 9, 10)
	v11con := nm(10, 10, 11) // legacy fragment committed through a .con
	v22 := nm(20, 20, 22)
	files := map[string][]byte{
		"__commits/" + nm(10, 20, 22) + ".con": []byte(v11con + ".ok\n__commits/" + v22 + ".wrt\n"),
	}
	l := Listing{
		Root: []Entry{
			{Name: "__array_schema.tdb"}, {Name: "__lock.tdb"}, {Name: "__schema", Dir: true},
			{Name: "__commits", Dir: true}, {Name: "__fragments", Dir: true}, {Name: "__meta", Dir: true},
			{Name: v1, Dir: true}, {Name: v1nometa, Dir: true}, {Name: v4, Dir: true},
			{Name: v10, Dir: true}, {Name: v10 + ".ok"}, {Name: v10uncommitted, Dir: true},
			{Name: v11con, Dir: true},
			{Name: nm(1, 8, 10) + ".meta"},
		},
		Commits:      []Entry{{Name: nm(10, 20, 22) + ".con"}},
		FragmentMeta: []Entry{{Name: nm(8, 20, 22) + ".meta"}},
		ReadFile: func(p string) ([]byte, error) {
			if b, ok := files[p]; ok {
				return b, nil
			}
			return nil, os.ErrNotExist
		},
		HasFragmentMetadata: func(name string) bool { return name != v1nometa },
	}
	v, err := Resolve(l, Options{Start: 0, End: math.MaxUint64})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{v1, v4, v10, v11con, "__fragments/" + v22}
	if got := paths(v.Fragments); !reflect.DeepEqual(got, want) {
		t.Errorf("fragments %v, want %v", got, want)
	}
	if v.Fragments[0].Version != 2 || v.Fragments[1].Version != 4 || v.Fragments[1].End != 7 {
		t.Errorf("legacy names: %+v", v.Fragments[:2])
	}
	if want := []string{nm(1, 8, 10) + ".meta", "__fragment_meta/" + nm(8, 20, 22) + ".meta"}; !reflect.DeepEqual(v.FragmentMeta, want) {
		t.Errorf("fragment meta %v", v.FragmentMeta)
	}
	if c := v.Fragments[3].CommitPath(); c != v11con+".ok" || !v.Consolidated[c] {
		t.Errorf("commit of %s: %q", v11con, c)
	}

	// An ignore file hides a consolidated commit.
	files["__commits/"+nm(20, 20, 22)+".ign"] = []byte("__commits/" + v22 + ".wrt\n")
	l.Commits = append(l.Commits, Entry{Name: nm(20, 20, 22) + ".ign"})
	v, err = Resolve(l, Options{Start: 0, End: math.MaxUint64})
	if err != nil {
		t.Fatal(err)
	}
	if len(v.Fragments) != 4 || v.Consolidated["__commits/"+v22+".wrt"] {
		t.Errorf("ignored commit still visible: %v", paths(v.Fragments))
	}

	// A legacy vacuum file (absolute URIs) supersedes fragments in the root.
	files[v10+".vac"] = []byte("file:///somewhere/arr/" + v1 + "\nfile:///somewhere/arr/" + v4 + "\n")
	l.Root = append(l.Root, Entry{Name: v10 + ".vac"})
	v, err = Resolve(l, Options{Start: 0, End: math.MaxUint64})
	if err != nil {
		t.Fatal(err)
	}
	if got := paths(v.Fragments); !reflect.DeepEqual(got, []string{v10, v11con}) {
		t.Errorf("after vacuum file: %v", got)
	}
	if !reflect.DeepEqual(v.ToVacuum, []string{v1, v4}) || !reflect.DeepEqual(v.VacFilesToVacuum, []string{v10 + ".vac"}) {
		t.Errorf("to vacuum %v, vac files %v", v.ToVacuum, v.VacFilesToVacuum)
	}
	// Opened on [6,8], the vacuum file (named after v10, at 8) applies:
	// v4 is superseded, but v1 lies outside the range, so the .vac file
	// itself must stay.
	v, _ = Resolve(l, Options{Start: 6, End: 8})
	if got := paths(v.Fragments); !reflect.DeepEqual(got, []string{v10}) || v.VacFilesToVacuum != nil || !reflect.DeepEqual(v.ToVacuum, []string{v4}) {
		t.Errorf("at [6,8]: %v %v %v", got, v.ToVacuum, v.VacFilesToVacuum)
	}
	// Opened before the consolidation, it does not apply.
	v, _ = Resolve(l, Options{Start: 6, End: 7})
	if got := paths(v.Fragments); !reflect.DeepEqual(got, []string{v4}) || v.ToVacuum != nil {
		t.Errorf("at [6,7]: %v %v", got, v.ToVacuum)
	}
}

func TestResolveErrors(t *testing.T) {
	read := func(b []byte) func(string) ([]byte, error) {
		return func(string) ([]byte, error) { return b, nil }
	}
	tests := []struct {
		name string
		l    Listing
	}{
		{"commit name with start after end", Listing{Commits: []Entry{{Name: nm(5, 4, 22) + ".wrt"}}}},
		{"commit without a timestamped name", Listing{Commits: []Entry{{Name: "junk.wrt"}}}},
		{"truncated .con", Listing{Commits: []Entry{{Name: nm(1, 2, 22) + ".con"}}, ReadFile: read([]byte("__commits/" + nm(1, 1, 22) + ".del\n\x05"))}},
		{"unreadable .ign", Listing{Commits: []Entry{{Name: nm(1, 2, 22) + ".ign"}}}},
		{"vacuum line that is not a path", Listing{Commits: []Entry{{Name: nm(1, 2, 22) + ".vac"}}, ReadFile: read([]byte("bare\n"))}},
	}
	for _, tc := range tests {
		if _, err := Resolve(tc.l, Options{End: math.MaxUint64}); err == nil {
			t.Errorf("%s: accepted", tc.name)
		}
	}
}
