package storage_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/tileflight/tileflight/internal/s3test"
	"github.com/tileflight/tileflight/storage"
	"github.com/tileflight/tileflight/storage/errorfs"
)

type factory struct {
	name string
	new  func(t *testing.T) storage.Store
}

var factories = []factory{
	{"local", func(t *testing.T) storage.Store {
		s, err := storage.NewLocal(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}},
	{"mem", func(t *testing.T) storage.Store { return storage.NewMem() }},
	{"errorfs(mem)", func(t *testing.T) storage.Store { return errorfs.Wrap(storage.NewMem(), errorfs.Never) }},
	// A real S3-compatible server (moto), under a prefix so that the
	// store's root is not the bucket's.
	{"s3", func(t *testing.T) storage.Store { return s3test.Open(t, "root/pre", nil) }},
}

func TestMain(m *testing.M) {
	code := m.Run()
	s3test.Stop()
	os.Exit(code)
}

func names(es []storage.Entry) []string {
	var out []string
	for _, e := range es {
		n := e.Name
		if e.IsDir {
			n += "/"
		}
		out = append(out, n)
	}
	return out
}

func TestConformance(t *testing.T) {
	ctx := context.Background()
	type step func(t *testing.T, s storage.Store)
	put := func(key, data string) step {
		return func(t *testing.T, s storage.Store) {
			if err := s.Put(ctx, key, []byte(data)); err != nil {
				t.Fatalf("put %q: %v", key, err)
			}
		}
	}
	cases := []struct {
		name  string
		setup []step
		check step
	}{
		{"get returns what put stored", []step{put("a/b/c", "hello")}, func(t *testing.T, s storage.Store) {
			b, err := s.Get(ctx, "a/b/c")
			if err != nil || string(b) != "hello" {
				t.Fatalf("got %q, %v", b, err)
			}
		}},
		{"put replaces", []step{put("k", "one"), put("k", "two!")}, func(t *testing.T, s storage.Store) {
			b, err := s.Get(ctx, "k")
			if err != nil || string(b) != "two!" {
				t.Fatalf("got %q, %v", b, err)
			}
			e, err := s.Stat(ctx, "k")
			if err != nil || e.Size != 4 || e.IsDir || e.Name != "k" {
				t.Fatalf("stat %+v, %v", e, err)
			}
		}},
		{"empty object", []step{put("z", "")}, func(t *testing.T, s storage.Store) {
			b, err := s.Get(ctx, "z")
			if err != nil || len(b) != 0 {
				t.Fatalf("got %q, %v", b, err)
			}
			b, err = s.GetRange(ctx, "z", 0, 0)
			if err != nil || len(b) != 0 {
				t.Fatalf("range got %q, %v", b, err)
			}
		}},
		{"missing key names the key and is ErrNotFound", nil, func(t *testing.T, s storage.Store) {
			for _, f := range []func() error{
				func() error { _, err := s.Get(ctx, "no/such"); return err },
				func() error { _, err := s.GetRange(ctx, "no/such", 0, 1); return err },
				func() error { _, err := s.Stat(ctx, "no/such"); return err },
			} {
				err := f()
				if !errors.Is(err, storage.ErrNotFound) || !errors.Is(err, os.ErrNotExist) {
					t.Fatalf("want ErrNotFound, got %v", err)
				}
				if !bytes.Contains([]byte(err.Error()), []byte("no/such")) {
					t.Fatalf("error does not name the key: %v", err)
				}
			}
		}},
		{"get of a directory is not found", []step{put("d/x", "1")}, func(t *testing.T, s storage.Store) {
			if _, err := s.Get(ctx, "d"); !errors.Is(err, storage.ErrNotFound) {
				t.Fatalf("got %v", err)
			}
		}},
		{"ranges", []step{put("r", "0123456789")}, func(t *testing.T, s storage.Store) {
			for _, c := range []struct {
				off, n int64
				want   string
				eof    bool
			}{
				{0, 10, "0123456789", false}, {3, 4, "3456", false}, {10, 0, "", false},
				{9, 1, "9", false}, {9, 2, "", true}, {11, 0, "", true}, {0, 11, "", true},
			} {
				b, err := s.GetRange(ctx, "r", c.off, c.n)
				if c.eof {
					if !errors.Is(err, io.ErrUnexpectedEOF) {
						t.Errorf("[%d,+%d): want ErrUnexpectedEOF, got %q, %v", c.off, c.n, b, err)
					}
					continue
				}
				if err != nil || string(b) != c.want {
					t.Errorf("[%d,+%d): got %q, %v", c.off, c.n, b, err)
				}
			}
			if _, err := s.GetRange(ctx, "r", -1, 1); err == nil {
				t.Error("negative offset accepted")
			}
		}},
		{"list immediate children sorted", []step{
			put("arr/__schema/__1_1_abc", "s"), put("arr/__meta/m", "mm"), put("arr/b", "bb"),
			put("arr/a", "a"), put("arr/__commits/x.wrt", ""), put("other", "o"),
		}, func(t *testing.T, s storage.Store) {
			es, err := s.List(ctx, "arr")
			if err != nil {
				t.Fatal(err)
			}
			got := fmt.Sprint(names(es))
			if want := "[__commits/ __meta/ __schema/ a b]"; got != want {
				t.Fatalf("list: got %s want %s", got, want)
			}
			for _, e := range es {
				if e.Name == "b" && e.Size != 2 {
					t.Errorf("size of b: %d", e.Size)
				}
				if e.IsDir && e.Size != 0 {
					t.Errorf("dir %s has size %d", e.Name, e.Size)
				}
			}
			root, err := s.List(ctx, "")
			if err != nil || fmt.Sprint(names(root)) != "[arr/ other]" {
				t.Fatalf("root list: %v %v", names(root), err)
			}
			slash, err := s.List(ctx, "arr/")
			if err != nil || len(slash) != len(es) {
				t.Fatalf("trailing slash list: %v %v", names(slash), err)
			}
			e, err := s.Stat(ctx, "arr/__meta")
			if err != nil || !e.IsDir || e.Name != "__meta" {
				t.Fatalf("stat dir: %+v %v", e, err)
			}
		}},
		{"list of a missing dir is empty", nil, func(t *testing.T, s storage.Store) {
			es, err := s.List(ctx, "nope/deeper")
			if err != nil || len(es) != 0 {
				t.Fatalf("got %v, %v", es, err)
			}
		}},
		{"list of an object is empty", []step{put("f", "x")}, func(t *testing.T, s storage.Store) {
			es, err := s.List(ctx, "f")
			if err != nil || len(es) != 0 {
				t.Fatalf("got %v, %v", es, err)
			}
		}},
		{"delete", []step{put("a/x", "1"), put("a/y", "2")}, func(t *testing.T, s storage.Store) {
			if err := s.Delete(ctx, "a/x"); err != nil {
				t.Fatal(err)
			}
			if err := s.Delete(ctx, "a/x"); err != nil {
				t.Fatalf("deleting a missing key: %v", err)
			}
			if err := s.Delete(ctx, "never/was"); err != nil {
				t.Fatalf("deleting a missing key: %v", err)
			}
			if _, err := s.Get(ctx, "a/x"); !errors.Is(err, storage.ErrNotFound) {
				t.Fatalf("deleted key still there: %v", err)
			}
			if es, _ := s.List(ctx, "a"); fmt.Sprint(names(es)) != "[y]" {
				t.Fatalf("list after delete: %v", names(es))
			}
			if err := s.Delete(ctx, "a"); err == nil {
				t.Fatal("Delete removed a directory")
			}
		}},
		{"delete prefix", []step{put("arr/__fragments/f1/a0.tdb", "1"), put("arr/__fragments/f1/__fragment_metadata.tdb", "2"),
			put("arr/__fragments/f2/a0.tdb", "3"), put("arr2/x", "4")}, func(t *testing.T, s storage.Store) {
			if err := s.DeletePrefix(ctx, "arr/__fragments/f1"); err != nil {
				t.Fatal(err)
			}
			if es, _ := s.List(ctx, "arr/__fragments"); fmt.Sprint(names(es)) != "[f2/]" {
				t.Fatalf("after delete prefix: %v", names(es))
			}
			if err := s.DeletePrefix(ctx, "arr"); err != nil {
				t.Fatal(err)
			}
			if err := s.DeletePrefix(ctx, "missing"); err != nil {
				t.Fatalf("delete prefix of a missing dir: %v", err)
			}
			if es, _ := s.List(ctx, ""); fmt.Sprint(names(es)) != "[arr2/]" {
				t.Fatalf("root after delete prefix: %v", names(es))
			}
			if err := s.DeletePrefix(ctx, ""); err != nil {
				t.Fatal(err)
			}
			if es, err := s.List(ctx, ""); err != nil || len(es) != 0 {
				t.Fatalf("root after deleting everything: %v %v", names(es), err)
			}
		}},
		{"put below an object fails", []step{put("file", "x")}, func(t *testing.T, s storage.Store) {
			if err := s.Put(ctx, "file/child", []byte("y")); err == nil {
				t.Fatal("put below an object succeeded")
			}
		}},
		{"invalid keys", nil, func(t *testing.T, s storage.Store) {
			for _, k := range []string{"", "/abs", "a/../b", "..", ".", "a//b", "a/./b", "a\x00b", `a\b`, "a/", "../x"} {
				errs := []error{
					s.Put(ctx, k, []byte("x")),
					func() error { _, err := s.Get(ctx, k); return err }(),
					func() error { _, err := s.GetRange(ctx, k, 0, 0); return err }(),
					s.Delete(ctx, k),
				}
				for i, err := range errs {
					if !errors.Is(err, storage.ErrInvalidPath) {
						t.Errorf("key %q op %d: want ErrInvalidPath, got %v", k, i, err)
					}
				}
			}
			for _, d := range []string{"/abs", "..", "a/../b", "a\x00"} {
				if _, err := s.List(ctx, d); !errors.Is(err, storage.ErrInvalidPath) {
					t.Errorf("list %q: want ErrInvalidPath, got %v", d, err)
				}
				if err := s.DeletePrefix(ctx, d); !errors.Is(err, storage.ErrInvalidPath) {
					t.Errorf("delete prefix %q: want ErrInvalidPath, got %v", d, err)
				}
			}
		}},
		{"cancelled context", []step{put("k", "v")}, func(t *testing.T, s storage.Store) {
			cctx, cancel := context.WithCancel(ctx)
			cancel()
			errs := []error{
				s.Put(cctx, "k2", []byte("x")),
				func() error { _, err := s.Get(cctx, "k"); return err }(),
				func() error { _, err := s.GetRange(cctx, "k", 0, 1); return err }(),
				func() error { _, err := s.List(cctx, ""); return err }(),
				func() error { _, err := s.Stat(cctx, "k"); return err }(),
				s.Delete(cctx, "k"),
				s.DeletePrefix(cctx, ""),
			}
			for i, err := range errs {
				if !errors.Is(err, context.Canceled) {
					t.Errorf("op %d: want context.Canceled, got %v", i, err)
				}
			}
			if b, err := s.Get(ctx, "k"); err != nil || string(b) != "v" {
				t.Fatalf("cancelled ops changed the store: %q %v", b, err)
			}
			if _, err := s.Stat(ctx, "k2"); !errors.Is(err, storage.ErrNotFound) {
				t.Fatalf("cancelled put stored k2: %v", err)
			}
		}},
		{"returned bytes are the caller's", []step{put("k", "abc")}, func(t *testing.T, s storage.Store) {
			b, _ := s.Get(ctx, "k")
			b[0] = 'X'
			b2, _ := s.Get(ctx, "k")
			if string(b2) != "abc" {
				t.Fatalf("mutating a Get result changed the store: %q", b2)
			}
		}},
	}
	for _, f := range factories {
		for _, c := range cases {
			t.Run(f.name+"/"+c.name, func(t *testing.T) {
				s := f.new(t)
				for _, st := range c.setup {
					st(t, s)
				}
				c.check(t, s)
			})
		}
	}
}

func TestConcurrent(t *testing.T) {
	ctx := context.Background()
	for _, f := range factories {
		t.Run(f.name, func(t *testing.T) {
			s := f.new(t)
			var wg sync.WaitGroup
			const workers, rounds = 4, 25
			for w := 0; w < workers; w++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := 0; i < rounds; i++ {
						// Everyone rewrites one shared key with a
						// self-describing value; readers must see a whole one.
						v := bytes.Repeat([]byte{byte('a' + w)}, 100+w*37)
						if err := s.Put(ctx, "shared/k", v); err != nil {
							t.Error(err)
							return
						}
						got, err := s.Get(ctx, "shared/k")
						if err != nil {
							t.Error(err)
							return
						}
						if len(got) == 0 || !bytes.Equal(got, bytes.Repeat(got[:1], len(got))) || len(got) != 100+int(got[0]-'a')*37 {
							t.Errorf("torn read: %d bytes", len(got))
							return
						}
						own := fmt.Sprintf("w%d/%d", w, i)
						if err := s.Put(ctx, own, []byte(own)); err != nil {
							t.Error(err)
							return
						}
						if _, err := s.List(ctx, fmt.Sprintf("w%d", w)); err != nil {
							t.Error(err)
						}
						if i%5 == 0 {
							if err := s.Delete(ctx, own); err != nil {
								t.Error(err)
							}
						}
					}
				}()
			}
			wg.Wait()
			for w := 0; w < workers; w++ {
				es, err := s.List(ctx, fmt.Sprintf("w%d", w))
				if err != nil || len(es) != rounds-rounds/5 {
					t.Fatalf("worker %d: %d entries, %v", w, len(es), err)
				}
			}
		})
	}
}

func TestLocalEscapes(t *testing.T) {
	ctx := context.Background()
	base := t.TempDir()
	outside := filepath.Join(base, "outside")
	rootDir := filepath.Join(base, "root")
	if err := os.MkdirAll(outside, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(outside, "secret"), []byte("secret"), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := storage.NewLocal(rootDir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Put(ctx, "arr/inside", []byte("ok")); err != nil {
		t.Fatal(err)
	}
	// Links pointing out of the root, by absolute and relative path, and a
	// link inside the root, which is allowed.
	if err := os.Symlink(outside, filepath.Join(rootDir, "arr", "out_abs")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../../outside", filepath.Join(rootDir, "arr", "out_rel")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(outside, "secret"), filepath.Join(rootDir, "arr", "secret_link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("inside", filepath.Join(rootDir, "arr", "in_link")); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"arr/out_abs/secret", "arr/out_rel/secret", "arr/secret_link"} {
		if b, err := s.Get(ctx, k); err == nil {
			t.Errorf("get %q escaped the root: %q", k, b)
		} else if !errors.Is(err, storage.ErrInvalidPath) {
			t.Errorf("get %q: want ErrInvalidPath, got %v", k, err)
		}
		if _, err := s.GetRange(ctx, k, 0, 1); err == nil {
			t.Errorf("get range %q escaped the root", k)
		}
		if _, err := s.Stat(ctx, k); err == nil {
			t.Errorf("stat %q escaped the root", k)
		}
	}
	if err := s.Put(ctx, "arr/out_abs/planted", []byte("x")); err == nil {
		t.Error("put through a link escaped the root")
	}
	if _, err := os.Stat(filepath.Join(outside, "planted")); err == nil {
		t.Error("file planted outside the root")
	}
	if es, err := s.List(ctx, "arr/out_abs"); err == nil && len(es) > 0 {
		t.Errorf("list through a link escaped the root: %v", names(es))
	}
	if err := s.DeletePrefix(ctx, "arr/out_abs"); err != nil {
		t.Logf("delete prefix on an escaping link: %v", err)
	}
	if _, err := os.Stat(filepath.Join(outside, "secret")); err != nil {
		t.Errorf("delete prefix through a link removed a file outside the root: %v", err)
	}
	if b, err := s.Get(ctx, "arr/in_link"); err != nil || string(b) != "ok" {
		t.Errorf("link inside the root: %q %v", b, err)
	}
	es, err := s.List(ctx, "arr")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range es {
		if e.Name == "out_abs" || e.Name == "out_rel" || e.Name == "secret_link" {
			t.Errorf("list shows an escaping link %q", e.Name)
		}
	}
	// Put's temporary files never show up in List.
	for _, e := range es {
		if len(e.Name) > 0 && e.Name[0] == '.' {
			t.Errorf("list shows %q", e.Name)
		}
	}
}

func TestCleanKey(t *testing.T) {
	for _, c := range []struct {
		key string
		ok  bool
	}{
		{"a", true}, {"a/b/__1_2_abc.wrt", true}, {"a.b/c-d_e", true}, {"...", true},
		{"", false}, {"/a", false}, {"a/", false}, {"a//b", false}, {"./a", false}, {"a/..", false},
		{"a\x00", false}, {`a\b`, false},
	} {
		_, err := storage.CleanKey(c.key)
		if (err == nil) != c.ok {
			t.Errorf("CleanKey(%q): %v", c.key, err)
		}
		if err != nil && !errors.Is(err, storage.ErrInvalidPath) {
			t.Errorf("CleanKey(%q): error does not wrap ErrInvalidPath: %v", c.key, err)
		}
	}
	if got := storage.Join("a/", "", "/b", "c"); got != "a/b/c" {
		t.Errorf("Join: %q", got)
	}
}
