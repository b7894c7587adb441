package tileio

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/tileflight/tileflight/array"
	"github.com/tileflight/tileflight/internal/fixtures"
	"github.com/tileflight/tileflight/storage"
)

// Every tile of every field of every fragment TileDB wrote loads, has the
// cell count the fragment metadata promises, and var offsets stay inside
// their values.
func TestLoadEveryTile(t *testing.T) {
	for _, c := range fixtures.Cases(t) {
		t.Run(c.Name, func(t *testing.T) {
			st, err := storage.NewLocal(filepath.Dir(c.Dir))
			if err != nil {
				t.Fatal(err)
			}
			opt := array.Options{}
			if c.Expect.Encryption != nil {
				opt.EncryptionKey = []byte(c.Expect.Encryption.Key)
			}
			a, err := array.Open(context.Background(), st, filepath.Base(c.Dir), opt)
			if err != nil {
				t.Fatal(err)
			}
			l := NewLoader(a, Options{MemoryBudget: 1 << 20, EncryptionKey: opt.EncryptionKey})
			for _, f := range a.Fragments {
				n, err := f.Meta.TileNum()
				if err != nil {
					t.Fatal(err)
				}
				var fields []string
				for _, d := range f.Schema.Dimensions {
					if !f.Meta.Footer().Dense {
						fields = append(fields, d.Name)
					}
				}
				for _, at := range f.Schema.Attributes {
					fields = append(fields, at.Name)
				}
				if f.Meta.Footer().HasTimestamps {
					fields = append(fields, FieldTimestamps)
				}
				for _, name := range fields {
					var cells uint64
					for ti := uint64(0); ti < n; ti++ {
						tile, err := l.Load(context.Background(), f, name, ti)
						if err != nil {
							t.Fatal(err)
						}
						want, err := f.Meta.TileCellNum(ti)
						if err != nil {
							t.Fatal(err)
						}
						if tile.Cells != want {
							t.Errorf("fragment %s: %s: tile %d has %d cells, metadata says %d", f.Name, name, ti, tile.Cells, want)
						}
						cells += tile.Cells
						tile.Release()
					}
					total, _ := f.CellNum()
					if cells != total {
						t.Errorf("fragment %s: %s: %d cells in tiles, fragment has %d", f.Name, name, cells, total)
					}
				}
			}
		})
	}
}

func TestBudgetBlocksAndReleases(t *testing.T) {
	b := newBudget(100)
	ctx := context.Background()
	if err := b.acquire(ctx, 60); err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := b.acquire(cctx, 60); err == nil {
		t.Fatal("over-budget acquire did not wait")
	}
	b.release(60)
	if err := b.acquire(ctx, 1000); err != nil { // larger than the budget: takes it all
		t.Fatal(err)
	}
	b.release(1000)
}
