package tileio

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/tileflight/tileflight/internal/fixtures"
	"github.com/tileflight/tileflight/storage"
	"github.com/tileflight/tileflight/tdbarray"
)

// Every tile of every field of every fragment TileDB wrote loads, has the
// cell count the fragment metadata promises, and var offsets stay inside
// their values.
func TestLoadEveryTile(t *testing.T) {
	for _, c := range fixtures.Cases(t) {
		t.Run(c.Name, func(t *testing.T) {
			a, key := openFixture(t, c)
			l := NewLoader(a, Options{MemoryBudget: 1 << 20, EncryptionKey: key})
			for _, f := range a.Fragments {
				n, err := f.Meta.TileNum()
				if err != nil {
					t.Fatal(err)
				}
				for _, name := range tileFields(f) {
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

func TestBudget(t *testing.T) {
	ctx := context.Background()
	timeout := func(t *testing.T) context.Context {
		c, cancel := context.WithTimeout(ctx, 10*time.Second)
		t.Cleanup(cancel)
		return c
	}
	t.Run("ahead of need waits for room", func(t *testing.T) {
		b := newBudget(100)
		if err := b.acquire(ctx, 60, nil); err != nil {
			t.Fatal(err)
		}
		cctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
		defer cancel()
		if err := b.acquire(cctx, 60, nil); err == nil {
			t.Fatal("over-budget acquire ahead of need did not wait")
		}
		if b.held() != 60 {
			t.Fatalf("a cancelled wait left %d bytes held, want 60", b.held())
		}
		done := make(chan error)
		go func() { done <- b.acquire(timeout(t), 60, nil) }()
		b.release(60)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		b.release(60)
	})
	t.Run("larger than the budget loads alone", func(t *testing.T) {
		b := newBudget(100)
		if err := b.acquire(ctx, 1000, nil); err != nil {
			t.Fatal(err)
		}
		if b.held() != 1000 {
			t.Fatalf("held %d", b.held())
		}
		b.release(1000)
	})
	t.Run("needed now overdraws", func(t *testing.T) {
		b := newBudget(100)
		if err := b.acquire(ctx, 100, nil); err != nil {
			t.Fatal(err)
		}
		if err := b.acquire(timeout(t), 70, Now); err != nil {
			t.Fatal(err)
		}
		if b.held() != 170 {
			t.Fatalf("held %d, want 170", b.held())
		}
		b.release(100)
		b.release(70)
	})
	t.Run("need fires while waiting", func(t *testing.T) {
		b := newBudget(100)
		if err := b.acquire(ctx, 100, nil); err != nil {
			t.Fatal(err)
		}
		need := make(chan struct{})
		done := make(chan error)
		go func() { done <- b.acquire(timeout(t), 50, need) }()
		time.Sleep(10 * time.Millisecond)
		close(need)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if b.held() != 150 {
			t.Fatalf("held %d, want 150", b.held())
		}
	})
	t.Run("first come first served", func(t *testing.T) {
		b := newBudget(100)
		if err := b.acquire(ctx, 90, nil); err != nil {
			t.Fatal(err)
		}
		big := make(chan error)
		go func() { big <- b.acquire(timeout(t), 80, nil) }()
		for b.queued() == 0 {
			time.Sleep(time.Millisecond)
		}
		// A small request fits but must not overtake the queued one.
		small := make(chan error)
		go func() { small <- b.acquire(timeout(t), 5, nil) }()
		for b.queued() < 2 {
			time.Sleep(time.Millisecond)
		}
		b.release(90)
		if err := <-big; err != nil {
			t.Fatal(err)
		}
		if err := <-small; err != nil {
			t.Fatal(err)
		}
		if b.held() != 85 {
			t.Fatalf("held %d, want 85", b.held())
		}
	})
	t.Run("a cancelled head lets the rest through", func(t *testing.T) {
		b := newBudget(100)
		if err := b.acquire(ctx, 90, nil); err != nil {
			t.Fatal(err)
		}
		hctx, cancel := context.WithCancel(ctx)
		head := make(chan error)
		go func() { head <- b.acquire(hctx, 80, nil) }()
		for b.queued() == 0 {
			time.Sleep(time.Millisecond)
		}
		small := make(chan error)
		go func() { small <- b.acquire(timeout(t), 10, nil) }()
		for b.queued() < 2 {
			time.Sleep(time.Millisecond)
		}
		cancel()
		if err := <-head; err == nil {
			t.Fatal("cancelled acquire succeeded")
		}
		if err := <-small; err != nil {
			t.Fatal(err)
		}
		if b.held() != 100 {
			t.Fatalf("held %d, want 100", b.held())
		}
	})
}

// openFixture opens a fixture array, with its encryption key (nil: none).
func openFixture(t *testing.T, c fixtures.Case) (*tdbarray.Array, []byte) {
	t.Helper()
	st, err := storage.NewLocal(filepath.Dir(c.Dir))
	if err != nil {
		t.Fatal(err)
	}
	opt := tdbarray.Options{}
	if c.Expect.Encryption != nil {
		opt.EncryptionKey = []byte(c.Expect.Encryption.Key)
	}
	a, err := tdbarray.Open(context.Background(), st, filepath.Base(c.Dir), opt)
	if err != nil {
		t.Fatal(err)
	}
	return a, opt.EncryptionKey
}

// tileFields lists the fields a fragment stores tiles of: its dimensions
// (sparse fragments), attributes and timestamps.
func tileFields(f *tdbarray.Fragment) []string {
	var fields []string
	if !f.Meta.Footer().Dense {
		for _, d := range f.Schema.Dimensions {
			fields = append(fields, d.Name)
		}
	}
	for _, at := range f.Schema.Attributes {
		fields = append(fields, at.Name)
	}
	if f.Meta.Footer().HasTimestamps {
		fields = append(fields, FieldTimestamps)
	}
	return fields
}
