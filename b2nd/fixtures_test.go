package b2nd

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/tileflight/tileflight/storage"
)

// FixtureCase is one case of python_tests/gen_b2nd.py's index.json.
type fixtureCase struct {
	Case          string  `json:"case"`
	Dtype         string  `json:"dtype"`
	Shape         []int64 `json:"shape"`
	Special       []string
	SkipUnwritten bool `json:"skip_unwritten"`
}

// fixtureDirs returns the committed golden subset and, with
// TILEFLIGHT_FIXTURES set (make test), the full matrix.
func fixtureDirs(t *testing.T) []string {
	dirs := []string{filepath.Join("..", "testdata", "b2nd")}
	if env := os.Getenv("TILEFLIGHT_FIXTURES"); env != "" {
		d := filepath.Join(env, "b2nd")
		if _, err := os.Stat(filepath.Join(d, "index.json")); err != nil {
			t.Fatalf("TILEFLIGHT_FIXTURES=%s but %s/index.json is missing (make fixtures)", env, d)
		}
		dirs = append(dirs, d)
	}
	return dirs
}

func loadCases(t *testing.T, dir string) []fixtureCase {
	b, err := os.ReadFile(filepath.Join(dir, "index.json"))
	if err != nil {
		t.Fatal(err)
	}
	var idx struct {
		Cases []fixtureCase `json:"cases"`
	}
	if err := json.Unmarshal(b, &idx); err != nil {
		t.Fatal(err)
	}
	return idx.Cases
}

func TestFixturesReadAll(t *testing.T) {
	ctx := context.Background()
	for _, dir := range fixtureDirs(t) {
		st, err := storage.NewLocal(filepath.Join(dir, "arrays"))
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range loadCases(t, dir) {
			t.Run(c.Case, func(t *testing.T) {
				want, err := os.ReadFile(filepath.Join(dir, "expect", c.Case+".raw"))
				if err != nil {
					t.Fatal(err)
				}
				a, err := Open(ctx, st, c.Case+".b2nd")
				if err != nil {
					t.Fatal(err)
				}
				got, err := a.ReadAll(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if c.SkipUnwritten {
					return // uninitialized items are unspecified
				}
				if !bytes.Equal(got, want) {
					n := 0
					for n < len(got) && n < len(want) && got[n] == want[n] {
						n++
					}
					t.Fatalf("%s: %d bytes differ from python-blosc2's (first at byte %d of %d/%d)", c.Case, countDiff(got, want), n, len(got), len(want))
				}
			})
		}
	}
}

func countDiff(a, b []byte) int {
	n := 0
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			n++
		}
	}
	return n + max(len(a), len(b)) - min(len(a), len(b))
}
