package tileio

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/tileflight/tileflight/errkind"
	"github.com/tileflight/tileflight/format/names"
	"github.com/tileflight/tileflight/internal/fixtures"
)

// A tile whose fragment was removed whole after the open (a vacuum) is
// ErrVacuumed, Unavailable: read again. A data file missing beside its
// fragment's metadata is damage: DataLoss.
func TestVacuumedUnderRead(t *testing.T) {
	var c fixtures.Case
	for _, k := range fixtures.Cases(t) {
		if k.Expect.Encryption == nil {
			c = k
			break
		}
	}
	for _, tc := range []struct {
		name     string
		remove   func(fragDir string) error
		vacuumed bool
		kind     error
	}{
		{"whole fragment", os.RemoveAll, true, errkind.Unavailable},
		{"data files only", func(fragDir string) error {
			es, err := os.ReadDir(fragDir)
			if err != nil {
				return err
			}
			for _, e := range es {
				if e.Name() != names.FragmentMetadataFile {
					if err := os.RemoveAll(filepath.Join(fragDir, e.Name())); err != nil {
						return err
					}
				}
			}
			return nil
		}, false, errkind.DataLoss},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), filepath.Base(c.Dir))
			if err := os.CopyFS(dir, os.DirFS(c.Dir)); err != nil {
				t.Fatal(err)
			}
			a, _ := openFixture(t, fixtures.Case{Name: c.Name, Dir: dir, Expect: c.Expect})
			if len(a.Fragments) == 0 {
				t.Fatalf("%s: no fragments", c.Name)
			}
			f := a.Fragments[0]
			if err := tc.remove(filepath.Join(dir, f.Path)); err != nil {
				t.Fatal(err)
			}
			_, err := NewLoader(a, Options{}).Load(context.Background(), f, tileFields(f)[0], 0)
			if err == nil {
				t.Fatal("loaded a tile of a removed fragment")
			}
			if got := errors.Is(err, ErrVacuumed); got != tc.vacuumed {
				t.Fatalf("%s: ErrVacuumed %v, want %v: %v", c.Name, got, tc.vacuumed, err)
			}
			if k := errkind.Classify(err); k != tc.kind {
				t.Fatalf("%s: kind %v, want %v: %v", c.Name, k, tc.kind, err)
			}
		})
	}
}
