package names

import (
	"bufio"
	"errors"
	"os"
	"regexp"
	"sort"
	"strings"
	"testing"
)

func TestParseForms(t *testing.T) {
	cases := []struct {
		in      string
		want    Name
		lo, hi  uint64 // Range()
		fmtVers uint32
	}{
		// Legacy arrays in TileDB's own test inputs (format v1, TileDB 1.4).
		{"__5dc2cc9cce204a189f825fd4919d0c55_1541540586869",
			Name{T1: 1541540586869, T2: 1541540586869, UUID: "5dc2cc9cce204a189f825fd4919d0c55", Form: Form1, SingleT: true},
			1541540586869, 1541540586869, 2},
		{"__b4cae15e1a294904a1296510c34f19ec_1538747712566",
			Name{T1: 1538747712566, T2: 1538747712566, UUID: "b4cae15e1a294904a1296510c34f19ec", Form: Form1, SingleT: true},
			1538747712566, 1538747712566, 2},
		{"__b4cae15e1a294904a1296510c34f19ec_100_200",
			Name{T1: 100, T2: 200, UUID: "b4cae15e1a294904a1296510c34f19ec", Form: Form1},
			200, 200, 2},
		{"__1_2_0fcdefaa40d34ff2a4b09153472fbdc2",
			Name{T1: 1, T2: 2, UUID: "0fcdefaa40d34ff2a4b09153472fbdc2", Form: Form2}, 1, 2, 4},
		{"__1693562063524_1693562063524_0fcdefaa40d34ff2a4b09153472fbdc2_10.ok",
			Name{T1: 1693562063524, T2: 1693562063524, UUID: "0fcdefaa40d34ff2a4b09153472fbdc2", Version: 10, Form: Form3, Ext: ".ok"},
			1693562063524, 1693562063524, 10},
		{"__1657562300109_1657562300109_8dc3a927a28e445080d5dfd288825e1d_4294967295",
			Name{T1: 1657562300109, T2: 1657562300109, UUID: "8dc3a927a28e445080d5dfd288825e1d", Version: 4294967295, Form: Form3},
			1657562300109, 1657562300109, 4294967295},
		{"__10_20_4ed3a7f6c891fe4539a31b2496b85bed.vac",
			Name{T1: 10, T2: 20, UUID: "4ed3a7f6c891fe4539a31b2496b85bed", Form: Form2, Ext: ".vac"}, 10, 20, 4},
		{"__0_0_abc_22.wrt", Name{UUID: "abc", Version: 22, Form: Form3, Ext: ".wrt"}, 0, 0, 22},
	}
	for _, c := range cases {
		got, err := Parse(c.in)
		if err != nil {
			t.Errorf("Parse(%q): %v", c.in, err)
			continue
		}
		if got != c.want {
			t.Errorf("Parse(%q) = %+v, want %+v", c.in, got, c.want)
		}
		if s := got.String(); s != c.in {
			t.Errorf("String() = %q, want %q", s, c.in)
		}
		if lo, hi := got.Range(); lo != c.lo || hi != c.hi {
			t.Errorf("%q: Range() = %d,%d want %d,%d", c.in, lo, hi, c.lo, c.hi)
		}
		if v := got.FormatVersion(); v != c.fmtVers {
			t.Errorf("%q: FormatVersion() = %d want %d", c.in, v, c.fmtVers)
		}
	}
}

func TestParseRejects(t *testing.T) {
	for _, s := range []string{
		"", "__", "a0.tdb", "__array_schema.tdb", "__fragment_metadata.tdb", "__schema", "__meta",
		"__commits", "__lock.tdb", "__enumerations", "_1_2_abc_3", "__1_2_abc_3_4",
		"__2_1_0fcdefaa40d34ff2a4b09153472fbdc2", // t1 > t2
		"__01_2_abc_3", "__1_2_abc_03", "__1_2_abc_4294967296", "__18446744073709551616_1_abc_1",
		"__-1_2_abc_3", "__1_2__3", "__1_2_a.b_3", "__1_2_abc_3.wrt.ok", "__1_2_abc_3.txt",
		"__1_x_abc_3", "__abc_x", "__abc_1_x",
	} {
		if n, err := Parse(s); err == nil {
			t.Errorf("Parse(%q) accepted: %+v", s, n)
		} else if !errors.Is(err, ErrNotTimestamped) {
			t.Errorf("Parse(%q): error does not wrap ErrNotTimestamped: %v", s, err)
		}
	}
}

var tsName = regexp.MustCompile(`^__[0-9]`)

// Every name TileDB 2.30 wrote in the golden arrays parses, renders back
// byte for byte, and has the form and version TileDB uses for its kind.
func TestTileDBNames(t *testing.T) {
	f, err := os.Open("testdata/names_tiledb230.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	seen := map[string]int{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		_, p, _ := strings.Cut(sc.Text(), " ")
		p = strings.TrimSuffix(p, "/")
		segs := strings.Split(p, "/")
		top, last := segs[0], segs[len(segs)-1]
		if len(segs) == 1 {
			switch top {
			case SchemaDir, FragmentsDir, CommitsDir, FragmentMetaDir, MetaDir, LabelsDir:
				seen["dir"]++
				continue
			}
			t.Errorf("unexpected top-level entry %q", p)
			continue
		}
		if len(segs) == 3 { // a file inside a fragment
			n, err := Parse(segs[1])
			if err != nil {
				t.Fatal(err)
			}
			if last == FragmentMetadataFile {
				continue
			}
			df, err := ParseDataFile(n.FormatVersion(), last)
			if err != nil {
				t.Errorf("%s: %v", p, err)
			}
			want := AttrFile(n.FormatVersion(), df.Index, "", df.Kind)
			if df.Dim {
				want = DimFile(n.FormatVersion(), df.Index, "", df.Kind)
			}
			if want != last {
				t.Errorf("%s: parsed as %+v, which renders as %q", p, df, want)
			}
			seen["data"]++
			continue
		}
		if last == EnumerationsDir {
			continue
		}
		if !tsName.MatchString(last) {
			t.Errorf("%s: not a timestamped name", p)
			continue
		}
		n, err := Parse(last)
		if err != nil {
			t.Errorf("%s: %v", p, err)
			continue
		}
		if n.String() != last {
			t.Errorf("%s: renders as %q", p, n.String())
		}
		if len(n.UUID) != 32 || strings.ToLower(n.UUID) != n.UUID {
			t.Errorf("%s: uuid %q is not 32 lower-case hex digits", p, n.UUID)
		}
		switch top {
		case SchemaDir, MetaDir:
			// Schema and metadata names carry no version.
			if n.Form != Form2 || n.Version != 0 {
				t.Errorf("%s: form %d version %d", p, n.Form, n.Version)
			}
			if top == MetaDir && n.Ext != "" && n.Ext != ExtVacuum {
				t.Errorf("%s: extension %q", p, n.Ext)
			}
			if top == MetaDir && n.Ext == "" && MetaKey(n) != p {
				t.Errorf("%s: MetaKey = %q", p, MetaKey(n))
			}
			if top == SchemaDir && SchemaKey(n) != p {
				t.Errorf("%s: SchemaKey = %q", p, SchemaKey(n))
			}
		case FragmentsDir:
			if n.Form != Form3 || n.Version != 22 || n.Ext != "" {
				t.Errorf("%s: %+v", p, n)
			}
			if FragmentKey(n) != p {
				t.Errorf("%s: FragmentKey = %q", p, FragmentKey(n))
			}
			if k, ok := CommitKey(n); !ok || !strings.HasPrefix(k, CommitsDir+"/") || !strings.HasSuffix(k, ExtWrite) {
				t.Errorf("%s: CommitKey = %q", p, k)
			}
		case CommitsDir, FragmentMetaDir:
			if n.Form != Form3 || n.Version != 22 || n.Ext == "" {
				t.Errorf("%s: %+v", p, n)
			}
		}
		seen[top+n.Ext]++
	}
	for _, k := range []string{"dir", "data", "__schema", "__meta", "__meta.vac", "__fragments",
		"__commits.wrt", "__commits.con", "__commits.ign", "__commits.vac", "__commits.del", "__fragment_meta.meta"} {
		if seen[k] == 0 {
			t.Errorf("golden file has no %q entries (%v)", k, seen)
		}
	}
}

func TestNew(t *testing.T) {
	hex32 := regexp.MustCompile(`^[0-9a-f]{32}$`)
	n := New(5, 7, 22)
	if n.Form != Form3 || n.T1 != 5 || n.T2 != 7 || n.Version != 22 || !hex32.MatchString(n.UUID) {
		t.Fatalf("New: %+v", n)
	}
	if p, err := Parse(n.String()); err != nil || p != n {
		t.Fatalf("round trip %q: %+v %v", n, p, err)
	}
	if m := New(3, 3, 0); m.Form != Form2 || m.Version != 0 || strings.Count(m.String(), "_") != 4 {
		t.Fatalf("unversioned New: %q", m)
	}
	if m := New(9, 2, 1); m.T1 != 2 || m.T2 != 9 {
		t.Fatalf("New with t1 > t2: %+v", m)
	}
	z := New(0, 0, 22)
	if z.T1 == 0 || z.T1 != z.T2 {
		t.Fatalf("New(0,0) should use the clock: %+v", z)
	}
	// Within one millisecond the counter prefix increases, so the names
	// sort in creation order.
	old := now
	now = func() uint64 { return 1700000000000 }
	defer func() { now = old }()
	var us []string
	for i := 0; i < 50; i++ {
		us = append(us, NewUUID())
	}
	if !sort.StringsAreSorted(us) {
		// The counter may wrap past 0xffffffff only after 2^31 names.
		t.Fatalf("uuids from one millisecond are not in creation order: %v", us)
	}
	if us[0][0] >= '8' {
		t.Fatalf("counter top bit set: %s", us[0])
	}
	seen := map[string]bool{}
	for _, u := range us {
		if seen[u] {
			t.Fatalf("duplicate uuid %s", u)
		}
		seen[u] = true
	}
}

func TestCompare(t *testing.T) {
	mk := func(s string) Name {
		n, err := Parse(s)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	in := []Name{
		mk("__20_20_4512862f92f9f363c03ef9ba7727e060_22"),
		mk("__10_20_03bba77df91b0d864e10b46322640ee8_22"),
		mk("__10_10_689cc5a375c5d2993b99fe50c7ba6f66_22"),
		mk("__9_30_ffffffffffffffffffffffffffffffff_22"),
		mk("__5dc2cc9cce204a189f825fd4919d0c55_15"),
		mk("__100_100_00000000000000000000000000000000_22"),
	}
	sort.Slice(in, func(i, j int) bool { return Less(in[i], in[j]) })
	var got []string
	for _, n := range in {
		got = append(got, n.String())
	}
	want := []string{
		"__9_30_ffffffffffffffffffffffffffffffff_22",
		"__10_10_689cc5a375c5d2993b99fe50c7ba6f66_22",
		"__10_20_03bba77df91b0d864e10b46322640ee8_22",
		"__5dc2cc9cce204a189f825fd4919d0c55_15",
		"__20_20_4512862f92f9f363c03ef9ba7727e060_22",
		"__100_100_00000000000000000000000000000000_22",
	}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("order:\n got %v\nwant %v", got, want)
	}
	schemas := []string{"__2_2_bb", "__array_schema.tdb", "__10_10_aa", "__1_1_cc"}
	sort.Slice(schemas, func(i, j int) bool { return CompareSchemaFiles(schemas[i], schemas[j]) < 0 })
	if strings.Join(schemas, " ") != "__array_schema.tdb __10_10_aa __1_1_cc __2_2_bb" {
		t.Fatalf("schema order: %v", schemas)
	}
}

func TestDataFiles(t *testing.T) {
	cases := []struct {
		version uint32
		dim     bool
		idx     int
		name    string
		kind    FileKind
		want    string
	}{
		{22, false, 0, "a", Fixed, "a0.tdb"},
		{22, false, 1, "s", Var, "a1_var.tdb"},
		{22, false, 1, "s", Validity, "a1_validity.tdb"},
		{9, true, 1, "name", Fixed, "d1.tdb"},
		{9, true, 1, "name", Var, "d1_var.tdb"},
		{8, false, 0, `a!#$%&'()*+,/:;=?@[]"<>\|z`, Fixed,
			"a%21%23%24%25%26%27%28%29%2A%2B%2C%2F%3A%3B%3D%3F%40%5B%5D%22%20%2D%30%3Cz.tdb"},
		{8, false, 0, "plain name", Var, "plain name_var.tdb"},
		{7, false, 2, "a/b", Validity, "a/b_validity.tdb"},
		{1, false, 0, "a", Fixed, "a.tdb"},
	}
	for _, c := range cases {
		var got string
		if c.dim {
			got = DimFile(c.version, c.idx, c.name, c.kind)
		} else {
			got = AttrFile(c.version, c.idx, c.name, c.kind)
		}
		if got != c.want {
			t.Errorf("v%d %q %v: got %q want %q", c.version, c.name, c.kind, got, c.want)
			continue
		}
		if strings.Contains(c.name, "/") && c.version != 8 {
			continue
		}
		df, err := ParseDataFile(c.version, got)
		if err != nil {
			t.Errorf("ParseDataFile(%d, %q): %v", c.version, got, err)
			continue
		}
		if df.Kind != c.kind {
			t.Errorf("ParseDataFile(%d, %q): kind %v", c.version, got, df.Kind)
		}
		if c.version >= 9 && (df.Index != c.idx || df.Dim != c.dim) {
			t.Errorf("ParseDataFile(%d, %q): %+v", c.version, got, df)
		}
		if c.version < 9 && df.Field != c.name {
			t.Errorf("ParseDataFile(%d, %q): field %q want %q", c.version, got, df.Field, c.name)
		}
	}
	for _, f := range []string{"t.tdb", "dt.tdb", "dci.tdb", "__coords.tdb"} {
		df, err := ParseDataFile(22, f)
		if err != nil || df.Field == "" || df.Index != -1 {
			t.Errorf("%s: %+v %v", f, df, err)
		}
	}
	for _, f := range []string{"__fragment_metadata.tdb", "x0.tdb", "a.tdb", "a01.tdb", ".tdb", "a0", "a-1.tdb"} {
		if df, err := ParseDataFile(22, f); err == nil {
			t.Errorf("ParseDataFile(22, %q) accepted: %+v", f, df)
		}
	}
	for _, s := range []string{"%", "%2", "%41", "%2a", "abc%zz"} {
		if _, err := DecodeV8(s); !errors.Is(err, ErrBadEscape) {
			t.Errorf("DecodeV8(%q): %v", s, err)
		}
	}
}

func TestLayoutKeys(t *testing.T) {
	v22, _ := Parse("__10_10_689cc5a375c5d2993b99fe50c7ba6f66_22")
	v10, _ := Parse("__1693562063524_1693562063524_0fcdefaa40d34ff2a4b09153472fbdc2_10")
	v1, _ := Parse("__5dc2cc9cce204a189f825fd4919d0c55_1541540586869")
	for _, c := range []struct {
		n            Name
		frag, commit string
		hasCommit    bool
	}{
		{v22, "__fragments/__10_10_689cc5a375c5d2993b99fe50c7ba6f66_22", "__commits/__10_10_689cc5a375c5d2993b99fe50c7ba6f66_22.wrt", true},
		{v10, "__1693562063524_1693562063524_0fcdefaa40d34ff2a4b09153472fbdc2_10", "__1693562063524_1693562063524_0fcdefaa40d34ff2a4b09153472fbdc2_10.ok", true},
		{v1, "__5dc2cc9cce204a189f825fd4919d0c55_1541540586869", "", false},
	} {
		if got := FragmentKey(c.n); got != c.frag {
			t.Errorf("FragmentKey: %q want %q", got, c.frag)
		}
		got, ok := CommitKey(c.n)
		if got != c.commit || ok != c.hasCommit {
			t.Errorf("CommitKey: %q %v want %q", got, ok, c.commit)
		}
	}
	if !IsReserved("__meta") || IsReserved("data") {
		t.Error("IsReserved")
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"__5dc2cc9cce204a189f825fd4919d0c55_1541540586869",
		"__1_2_0fcdefaa40d34ff2a4b09153472fbdc2",
		"__1693562063524_1693562063524_0fcdefaa40d34ff2a4b09153472fbdc2_10.ok",
		"__10_20_4ed3a7f6c891fe4539a31b2496b85bed.vac", "__abc_1_2", "__1_2_x_3.wrt",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := Parse(s)
		if err != nil {
			return
		}
		if got := n.String(); got != s {
			t.Fatalf("Parse(%q).String() = %q", s, got)
		}
		m, err := Parse(n.String())
		if err != nil || m != n {
			t.Fatalf("reparse %q: %+v %v", s, m, err)
		}
		if lo, hi := n.Range(); lo > hi {
			t.Fatalf("%q: range %d > %d", s, lo, hi)
		}
	})
}

func FuzzDecodeV8(f *testing.F) {
	f.Add("a%21b")
	f.Add(`x!#<>|\`)
	f.Fuzz(func(t *testing.T, s string) {
		DecodeV8(s) // must not panic
		if d, err := DecodeV8(EncodeV8(s)); err != nil || d != s {
			t.Fatalf("round trip %q: %q %v", s, d, err)
		}
	})
}
