package storage

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tileflight/tileflight/errkind"
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

func TestParseSyncPolicy(t *testing.T) {
	for _, c := range []struct {
		in   string
		want SyncPolicy
		ok   bool
	}{
		{"always", SyncAlways, true},
		{"never", SyncNever, true},
		{"", 0, false},
		{"commit", 0, false},
		{"Always", 0, false},
	} {
		got, err := ParseSyncPolicy(c.in)
		if (err == nil) != c.ok || (c.ok && got != c.want) {
			t.Errorf("ParseSyncPolicy(%q) = %v, %v; want %v (ok %v)", c.in, got, err, c.want, c.ok)
		}
		if c.ok && got.String() != c.in {
			t.Errorf("%v.String() = %q, want %q", got, got.String(), c.in)
		}
	}
}

// TestLocalPutEveryPolicy: whatever the fsync policy, a Put into a new
// or an existing directory and an overwrite land whole, are listed, and
// leave no temporary entry behind.
func TestLocalPutEveryPolicy(t *testing.T) {
	for _, p := range []SyncPolicy{SyncAlways, SyncNever} {
		t.Run(p.String(), func(t *testing.T) {
			ctx := context.Background()
			root := t.TempDir()
			l, err := NewLocal(root)
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			l.SetSync(p)
			puts := []struct{ key, data string }{
				{"a/__fragments/f1/a0.tdb", "one"},
				{"a/__fragments/f1/a1.tdb", "two"},
				{"a/__fragments/f1/a0.tdb", "three"},
				{"a/__commits/f1.wrt", ""},
			}
			for _, c := range puts {
				if err := l.Put(ctx, c.key, []byte(c.data)); err != nil {
					t.Fatalf("Put %s: %v", c.key, err)
				}
			}
			for key, want := range map[string]string{"a/__fragments/f1/a0.tdb": "three", "a/__fragments/f1/a1.tdb": "two", "a/__commits/f1.wrt": ""} {
				got, err := l.Get(ctx, key)
				if err != nil || string(got) != want {
					t.Errorf("Get %s = %q, %v; want %q", key, got, err, want)
				}
			}
			es, err := l.List(ctx, "a/__fragments/f1")
			if err != nil || len(es) != 2 {
				t.Errorf("List = %v, %v; want a0.tdb and a1.tdb", es, err)
			}
			des, err := os.ReadDir(root)
			if err != nil {
				t.Fatal(err)
			}
			for _, d := range des {
				if strings.HasPrefix(d.Name(), tempPrefix) {
					t.Errorf("temporary entry %s left at the root", d.Name())
				}
			}
		})
	}
}

// TestPutDir: a directory of objects appears whole, on a local store (one
// rename) and through the fallback of concurrent Puts (the in-memory
// store); an existing directory is refused on a local store, and bad file
// names everywhere.
func TestPutDir(t *testing.T) {
	ctx := context.Background()
	files := []File{{Name: "a0.tdb", Data: []byte("zero")}, {Name: "a1.tdb", Data: []byte{}}, {Name: "__fragment_metadata.tdb", Data: []byte("meta")}}
	for _, p := range []SyncPolicy{SyncAlways, SyncNever} {
		t.Run("local/"+p.String(), func(t *testing.T) {
			root := t.TempDir()
			l, err := NewLocal(root)
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			l.SetSync(p)
			// The parent (a/__fragments) does not exist yet.
			if err := PutDir(ctx, l, "a/__fragments/f1", files); err != nil {
				t.Fatal(err)
			}
			checkDir(t, l, "a/__fragments/f1", files)
			err = PutDir(ctx, l, "a/__fragments/f1", files[:1])
			if !errors.Is(err, errkind.AlreadyExists) {
				t.Errorf("PutDir over an existing directory: %v, want AlreadyExists", err)
			}
			checkDir(t, l, "a/__fragments/f1", files)
			des, err := os.ReadDir(root)
			if err != nil {
				t.Fatal(err)
			}
			for _, d := range des {
				if strings.HasPrefix(d.Name(), tempPrefix) {
					t.Errorf("temporary entry %s left at the root", d.Name())
				}
			}
		})
	}
	t.Run("mem", func(t *testing.T) {
		m := NewMem()
		if err := PutDir(ctx, m, "a/__fragments/f1", files); err != nil {
			t.Fatal(err)
		}
		checkDir(t, m, "a/__fragments/f1", files)
	})
	for _, bad := range []string{"", "x/y"} {
		if err := PutDir(ctx, NewMem(), "a/f", []File{{Name: bad}}); !errors.Is(err, ErrInvalidPath) {
			t.Errorf("PutDir with file name %q: %v, want ErrInvalidPath", bad, err)
		}
	}
}

func checkDir(t *testing.T, st Store, dir string, files []File) {
	t.Helper()
	es, err := st.List(context.Background(), dir)
	if err != nil || len(es) != len(files) {
		t.Fatalf("List %s = %v, %v; want %d files", dir, es, err, len(files))
	}
	for _, f := range files {
		got, err := st.Get(context.Background(), dir+"/"+f.Name)
		if err != nil || !bytes.Equal(got, f.Data) {
			t.Errorf("Get %s/%s = %q, %v; want %q", dir, f.Name, got, err, f.Data)
		}
	}
}
