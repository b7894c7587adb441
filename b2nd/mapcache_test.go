package b2nd

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/tileflight/tileflight/storage"
)

// TestMapCache: a mapping is shared by reads of one file version, a
// replaced file (another inode) gets a new mapping and the old one is
// unmapped once released, and the cache holds at most max mappings.
func TestMapCache(t *testing.T) {
	src, err := os.ReadFile(filepath.Join("..", "testdata", "b2nd", "arrays", "g_lef8.b2nd"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	st, _ := storage.NewLocal(dir)
	ctx := context.Background()
	c := &mapCache{max: 2}
	write := func(name string) *Array {
		tmp := filepath.Join(dir, name+".tmp")
		if err := os.WriteFile(tmp, src, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
		a, err := Open(ctx, st, name)
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	a := write("a.b2nd")
	d1, r1, ok := c.get(ctx, st, a)
	d2, r2, ok2 := c.get(ctx, st, a)
	if !ok || !ok2 || &d1[0] != &d2[0] || string(d1) != string(src) {
		t.Fatal("one version, two mappings")
	}
	r2()
	a2 := write("a.b2nd") // replaced: a new inode
	d3, r3, ok := c.get(ctx, st, a2)
	if !ok || &d3[0] == &d1[0] || len(c.m) != 1 {
		t.Fatalf("replaced file: same mapping or %d cached", len(c.m))
	}
	_ = d1[0] // the old mapping stays readable until released
	r1()
	r3()
	for _, n := range []string{"b.b2nd", "c.b2nd", "d.b2nd"} {
		_, r, ok := c.get(ctx, st, write(n))
		if !ok {
			t.Fatal(n)
		}
		r()
	}
	if len(c.m) != 2 {
		t.Fatalf("%d mappings cached, max 2", len(c.m))
	}
}
