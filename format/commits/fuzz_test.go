package commits

import (
	"bytes"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/tileflight/tileflight/internal/golden"
)

func seedFiles(f *testing.F, ext string) {
	for _, b := range golden.Seeds(f, filepath.Join("testdata", "cases", "*", "files", "*", "*"+ext)) {
		f.Add(b)
	}
}

func FuzzCon(f *testing.F) {
	seedFiles(f, SuffixCon)
	f.Add([]byte("__commits/__1_1_u_22.upd\n\x02\x00\x00\x00\x00\x00\x00\x00ab"))
	f.Fuzz(func(t *testing.T, b []byte) {
		es, err := DecodeCon(b)
		if err != nil {
			return
		}
		enc, err := EncodeCon(es)
		if err != nil {
			t.Fatalf("decoded entries do not encode: %v", err)
		}
		// Only a missing final newline may differ from the input.
		if !bytes.Equal(enc, b) && !bytes.Equal(enc, append(append([]byte(nil), b...), '\n')) {
			t.Fatalf("re-encoding differs:\n%q\n%q", b, enc)
		}
		for _, e := range es {
			if e.Tile != nil {
				DecodeDelete(e.Tile)
			}
		}
	})
}

func fuzzLines(f *testing.F, ext string, dec func([]byte) []string, enc func([]string) []byte) {
	seedFiles(f, ext)
	f.Fuzz(func(t *testing.T, b []byte) {
		lines := dec(b)
		out := enc(lines)
		if !bytes.Equal(out, b) && !bytes.Equal(out, append(append([]byte(nil), b...), '\n')) {
			t.Fatalf("re-encoding differs:\n%q\n%q", b, out)
		}
		if !reflect.DeepEqual(dec(out), lines) {
			t.Fatal("not stable")
		}
		for _, l := range lines {
			VacuumTarget(l)
		}
	})
}

func FuzzIgn(f *testing.F) { fuzzLines(f, SuffixIgnore, DecodeIgnore, EncodeIgnore) }
func FuzzVac(f *testing.F) { fuzzLines(f, SuffixVacuum, DecodeVacuum, EncodeVacuum) }

// FuzzDel feeds both whole .del files and bare condition payloads.
func FuzzDel(f *testing.F) {
	seedFiles(f, SuffixDelete)
	for _, n := range submittedDeletes {
		if b, err := EncodeCondition(n); err == nil {
			f.Add(b)
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if n, err := DecodeDelete(b); err == nil {
			if _, err := EncodeCondition(n); err != nil {
				t.Fatalf("decoded delete does not encode: %v", err)
			}
		}
		n, err := DecodeCondition(b)
		if err != nil {
			return
		}
		enc, err := EncodeCondition(n)
		if err != nil || !bytes.Equal(enc, b) {
			t.Fatalf("condition re-encodes differently: %v", err)
		}
		n.Negated()
		n.Members()
	})
}

func FuzzUpd(f *testing.F) {
	for _, n := range submittedDeletes {
		u := &Update{Condition: n, Values: []UpdateValue{{Field: "a", Value: []byte{1, 0, 0, 0}}}}
		if b, err := EncodeUpdatePayload(u); err == nil {
			f.Add(b)
		}
	}
	seedFiles(f, SuffixDelete)
	f.Fuzz(func(t *testing.T, b []byte) {
		DecodeUpdate(b)
		u, err := DecodeUpdatePayload(b)
		if err != nil {
			return
		}
		enc, err := EncodeUpdatePayload(u)
		if err != nil || !bytes.Equal(enc, b) {
			t.Fatalf("update re-encodes differently: %v", err)
		}
	})
}

// FuzzResolve runs the visibility rules over arbitrary commit-file bytes.
func FuzzResolve(f *testing.F) {
	seedFiles(f, SuffixCon)
	f.Fuzz(func(t *testing.T, b []byte) {
		l := Listing{
			Root:     []Entry{{Name: nm(1, 1, 10) + ".vac"}, {Name: nm(1, 1, 10), Dir: true}, {Name: nm(1, 1, 10) + ".ok"}},
			Commits:  []Entry{{Name: nm(1, 9, 22) + ".con"}, {Name: nm(1, 9, 22) + ".ign"}, {Name: nm(2, 3, 22) + ".vac"}, {Name: nm(2, 2, 22) + ".wrt"}},
			ReadFile: func(string) ([]byte, error) { return b, nil },
		}
		Resolve(l, Options{Start: 0, End: 5})
	})
}
