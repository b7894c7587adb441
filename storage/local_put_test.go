package storage

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestLocalPutMakesDirectoriesWithTheObject: a Put into a new directory
// makes the directory appear with the object (staged and renamed), so a
// crash never leaves an empty __schema/ that TileDB takes for an array;
// what a crash can leave is hidden from List.
func TestLocalPutMakesDirectoriesWithTheObject(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	l, err := NewLocal(root)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if err := l.Put(ctx, "g/arr/__schema/__enumerations/e1", []byte("e")); err != nil {
		t.Fatal(err)
	}
	if err := l.Put(ctx, "g/arr/__schema/s1", []byte("s")); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(root, "g/empty/__schema"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := l.Put(ctx, "g/empty/__schema/s1", []byte("x")); err != nil {
		t.Fatal(err)
	}
	for key, want := range map[string]string{"g/arr/__schema/__enumerations/e1": "e", "g/arr/__schema/s1": "s", "g/empty/__schema/s1": "x"} {
		if b, err := l.Get(ctx, key); err != nil || string(b) != want {
			t.Errorf("%s: %q %v", key, b, err)
		}
	}
	// No staging directory is left, and one a crash left is not listed.
	if err := os.MkdirAll(filepath.Join(root, "g", tempPrefix+"crashed", "__schema"), 0o755); err != nil {
		t.Fatal(err)
	}
	ents, err := l.List(ctx, "g")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name)
	}
	if strings.Join(names, ",") != "arr,empty" {
		t.Fatalf("g lists %v", names)
	}
	des, _ := os.ReadDir(filepath.Join(root, "g", "arr"))
	if len(des) != 1 || des[0].Name() != "__schema" {
		t.Fatalf("g/arr holds %v", des)
	}
}
