package commits

import (
	"bytes"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/tileflight/tileflight/format/gentile"
	"github.com/tileflight/tileflight/internal/golden"
)

// The cases under testdata/cases were written by TileDB 2.30 with
// python_tests/golden/commits_cases.py.

type goldenEntry struct {
	Name string `json:"name"`
	Dir  bool   `json:"dir"`
	Size int64  `json:"size"`
}

type goldenCase struct {
	Case    string                   `json:"case"`
	Dense   bool                     `json:"dense"`
	Listing map[string][]goldenEntry `json:"listing"`
	Writes  []struct {
		ID int    `json:"id"`
		TS uint64 `json:"ts"`
	} `json:"writes"`
	Deletes []struct {
		Cond string `json:"cond"`
		TS   uint64 `json:"ts"`
	} `json:"deletes"`
	Fragments []struct {
		URI            string    `json:"uri"`
		Version        uint32    `json:"version"`
		TimestampRange [2]uint64 `json:"timestamp_range"`
	} `json:"fragments"`
	ToVacuum []string `json:"to_vacuum"`
	Reads    []struct {
		Timestamp [2]uint64 `json:"timestamp"`
		IDs       []int     `json:"ids"`
	} `json:"reads"`
}

type loadedCase struct {
	goldenCase
	dir     string
	listing Listing
}

func loadCases(t *testing.T) []loadedCase {
	t.Helper()
	var out []loadedCase
	for _, d := range golden.Glob(t, "testdata/cases/*") {
		var c loadedCase
		golden.ReadJSON(t, filepath.Join(d, "case.json"), &c.goldenCase)
		c.dir = d
		conv := func(es []goldenEntry) []Entry {
			var r []Entry
			for _, e := range es {
				r = append(r, Entry{Name: e.Name, Dir: e.Dir})
			}
			return r
		}
		c.listing = Listing{
			Root:         conv(c.Listing["root"]),
			Commits:      conv(c.Listing["__commits"]),
			FragmentMeta: conv(c.Listing["__fragment_meta"]),
			ReadFile: func(p string) ([]byte, error) {
				if !strings.Contains(p, "/") {
					p = "root/" + p
				}
				return os.ReadFile(filepath.Join(d, "files", p))
			},
		}
		out = append(out, c)
	}
	return out
}

// TileDB's own fragment list (tiledb.array_fragments, i.e. the range [0,
// now]) must be exactly what Resolve selects, in the same order, and the
// fragments it reports as to be vacuumed must match.
func TestResolveMatchesTileDBFragmentList(t *testing.T) {
	for _, c := range loadCases(t) {
		t.Run(c.Case, func(t *testing.T) {
			v, err := Resolve(c.listing, Options{Start: 0, End: math.MaxUint64, FullOverlapOnly: c.Dense})
			if err != nil {
				t.Fatal(err)
			}
			if len(v.Fragments) != len(c.Fragments) {
				t.Fatalf("got %d fragments %v, TileDB lists %d", len(v.Fragments), v.Fragments, len(c.Fragments))
			}
			for i, f := range c.Fragments {
				g := v.Fragments[i]
				if g.Path != f.URI || g.Start != f.TimestampRange[0] || g.End != f.TimestampRange[1] || g.Version != f.Version {
					t.Errorf("fragment %d: got %+v, TileDB %+v", i, g, f)
				}
			}
			vv, err := Resolve(c.listing, Options{Start: 0, End: math.MaxUint64, FullOverlapOnly: true})
			if err != nil {
				t.Fatal(err)
			}
			if !sameSet(vv.ToVacuum, c.ToVacuum) {
				t.Errorf("to vacuum: got %v, TileDB %v", vv.ToVacuum, c.ToVacuum)
			}
			// Every fragment on disk is either read or to be vacuumed,
			// unless its commit is gone.
			if len(c.Listing["__fragment_meta"]) > 0 && len(v.FragmentMeta) != len(c.Listing["__fragment_meta"]) {
				t.Errorf("fragment meta: got %v", v.FragmentMeta)
			}
		})
	}
}

func sameSet(a, b []string) bool {
	a = append([]string(nil), a...)
	b = append([]string(nil), b...)
	sort.Strings(a)
	sort.Strings(b)
	return len(a) == len(b) && (len(a) == 0 || reflect.DeepEqual(a, b))
}

// Each write put its id in a cell of its own. A read at [a, b] returns the
// ids of the writes held by the fragments TileDB selected, limited to the
// range (the reader filters cells of partly overlapping fragments
// consolidated with timestamps). Resolve's selection must explain exactly
// what TileDB read.
func TestResolveExplainsTimestampedReads(t *testing.T) {
	n := 0
	for _, c := range loadCases(t) {
		for _, r := range c.Reads {
			v, err := Resolve(c.listing, Options{Start: r.Timestamp[0], End: r.Timestamp[1], FullOverlapOnly: c.Dense})
			if err != nil {
				t.Fatalf("%s %v: %v", c.Case, r.Timestamp, err)
			}
			got := map[int]bool{}
			for _, f := range v.Fragments {
				for _, w := range c.Writes {
					if w.TS >= f.Start && w.TS <= f.End && w.TS >= r.Timestamp[0] && w.TS <= r.Timestamp[1] {
						got[w.ID] = true
					}
				}
			}
			ids := []int{}
			for id := range got {
				ids = append(ids, id)
			}
			sort.Ints(ids)
			want := append([]int{}, r.IDs...)
			if !reflect.DeepEqual(ids, want) {
				t.Errorf("%s at %v: fragments %v explain ids %v, TileDB read %v", c.Case, r.Timestamp, paths(v.Fragments), ids, want)
			}
			n++
		}
	}
	if n < 50 {
		t.Fatalf("only %d reads checked", n)
	}
}

func paths(fs []Fragment) []string {
	var out []string
	for _, f := range fs {
		out = append(out, f.Path)
	}
	return out
}

// Every commit-type file TileDB wrote decodes and re-encodes to the same
// bytes.
func TestCommitFilesRoundTrip(t *testing.T) {
	kinds := map[string]int{}
	for _, c := range loadCases(t) {
		files, _ := filepath.Glob(filepath.Join(c.dir, "files", "*", "*"))
		for _, p := range files {
			b, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			ext := filepath.Ext(p)
			kinds[ext]++
			var enc []byte
			switch ext {
			case SuffixWrite, SuffixOK:
				if len(b) != 0 {
					t.Errorf("%s: commit marker of %d bytes", p, len(b))
				}
				continue
			case SuffixIgnore:
				enc = EncodeIgnore(DecodeIgnore(b))
			case SuffixVacuum:
				lines := DecodeVacuum(b)
				for _, l := range lines {
					tgt, err := VacuumTarget(l)
					if err != nil || !strings.HasPrefix(tgt, DirFragments+"/") {
						t.Errorf("%s: line %q -> %q, %v", p, l, tgt, err)
					}
					if VacuumLine(tgt, 22, "") != l {
						t.Errorf("%s: VacuumLine(%q) = %q, TileDB wrote %q", p, tgt, VacuumLine(tgt, 22, ""), l)
					}
				}
				enc = EncodeVacuum(lines)
			case SuffixCon:
				es, err := DecodeCon(b)
				if err != nil {
					t.Fatalf("%s: %v", p, err)
				}
				for _, e := range es {
					if e.IsDelete() {
						if _, err := DecodeDelete(e.Tile); err != nil {
							t.Errorf("%s: %s: %v", p, e.Path, err)
						}
						// the embedded tile is the .del file, verbatim
						if own, err := os.ReadFile(filepath.Join(c.dir, "files", e.Path)); err == nil && !bytes.Equal(own, e.Tile) {
							t.Errorf("%s: %s differs from the .del file", p, e.Path)
						}
					}
				}
				if enc, err = EncodeCon(es); err != nil {
					t.Fatal(err)
				}
			case SuffixDelete:
				n, err := DecodeDelete(b)
				if err != nil {
					t.Fatalf("%s: %v", p, err)
				}
				_, payload, _, _ := gentile.Decode(b, nil)
				pe, err := EncodeCondition(n)
				if err != nil || !bytes.Equal(pe, payload) {
					t.Errorf("%s: condition re-encodes differently: %v", p, err)
				}
				// The tile envelope: same header; deflate bytes may differ
				// from zlib's, so compare by decoding.
				enc2, err := EncodeDelete(n, 22)
				if err != nil {
					t.Fatal(err)
				}
				n2, err := DecodeDelete(enc2)
				if err != nil || !reflect.DeepEqual(n, n2) {
					t.Errorf("%s: EncodeDelete does not round-trip: %v", p, err)
				}
				h1, _ := gentile.DecodeHeader(b)
				h2, _ := gentile.DecodeHeader(enc2)
				h1.PersistedSize, h2.PersistedSize = 0, 0
				if !reflect.DeepEqual(h1, h2) {
					t.Errorf("%s: header %+v, TileDB %+v", p, h2, h1)
				}
				continue
			default:
				t.Errorf("%s: unexpected file", p)
				continue
			}
			if !bytes.Equal(enc, b) {
				t.Errorf("%s: re-encoded bytes differ:\n%q\n%q", p, enc, b)
			}
		}
	}
	for _, k := range []string{SuffixWrite, SuffixIgnore, SuffixVacuum, SuffixCon, SuffixDelete} {
		if kinds[k] == 0 {
			t.Errorf("no %s file among the golden cases", k)
		}
	}
}
