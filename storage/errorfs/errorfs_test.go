package errorfs

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/tileflight/tileflight/storage"
)

// workload is a miniature commit: data files, then metadata, then the
// commit marker last.
func workload(ctx context.Context, s storage.Store) error {
	for _, k := range []string{"arr/__fragments/f/a0.tdb", "arr/__fragments/f/__fragment_metadata.tdb"} {
		if err := s.Put(ctx, k, []byte(k)); err != nil {
			return err
		}
	}
	if _, err := s.List(ctx, "arr/__fragments"); err != nil {
		return err
	}
	if err := s.Delete(ctx, "arr/old"); err != nil {
		return err
	}
	return s.Put(ctx, "arr/__commits/f.wrt", nil)
}

func TestFailEveryStepInTurn(t *testing.T) {
	ctx := context.Background()
	probe := Wrap(storage.NewMem(), nil)
	if err := workload(ctx, probe); err != nil {
		t.Fatal(err)
	}
	if probe.MutatingOps() != 4 || probe.Ops() != 5 {
		t.Fatalf("counted %d ops, %d mutating", probe.Ops(), probe.MutatingOps())
	}
	for i := int64(0); i < probe.MutatingOps(); i++ {
		mem := storage.NewMem()
		fs := Wrap(mem, FailNth(i, Mutating))
		err := workload(ctx, fs)
		if !errors.Is(err, ErrInjected) {
			t.Fatalf("step %d: want ErrInjected, got %v", i, err)
		}
		if fs.Injected() != 1 {
			t.Fatalf("step %d: %d faults", i, fs.Injected())
		}
		// The commit marker is the last step: whatever failed, it is absent.
		if _, err := mem.Stat(ctx, "arr/__commits/f.wrt"); !errors.Is(err, storage.ErrNotFound) {
			t.Fatalf("step %d: commit marker written despite a failure: %v", i, err)
		}
	}
}

func TestInjectors(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		name    string
		inj     Injector
		wantErr []bool // per op of ops below
	}{
		{"never", Never, []bool{false, false, false, false, false, false}},
		{"nth put", FailNth(1, OpPut), []bool{false, false, true, false, false, false}},
		{"nth any", FailNth(3, AllOps), []bool{false, false, false, true, false, false}},
		{"from 2nd mutating", FailFrom(1, Mutating), []bool{false, false, true, false, true, false}},
		{"matching wrt puts", FailMatching(OpPut, KeyHasSuffix(".wrt")), []bool{false, false, true, false, false, false}},
		{"matching commits dir", FailMatching(AllOps, KeyContains("__commits")), []bool{false, false, true, true, false, false}},
		{"reads", FailMatching(Reads, nil), []bool{false, true, false, true, false, true}},
		{"any", Any(FailNth(0, OpPut), FailNth(0, OpDelete)), []bool{true, false, false, false, true, false}},
		{"random p=1", Random(1, 7, OpGet), []bool{false, true, false, false, false, false}},
		{"random p=0", Random(0, 7, AllOps), []bool{false, false, false, false, false, false}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			mem := storage.NewMem()
			if err := mem.Put(ctx, "a/x", []byte("0")); err != nil {
				t.Fatal(err)
			}
			fs := Wrap(mem, c.inj)
			ops := []func() error{
				func() error { return fs.Put(ctx, "a/x", []byte("1")) },
				func() error { _, err := fs.Get(ctx, "a/x"); return err },
				func() error { return fs.Put(ctx, "a/__commits/y.wrt", nil) },
				func() error { _, err := fs.List(ctx, "a/__commits"); return err },
				func() error { return fs.Delete(ctx, "a/zz") },
				func() error { _, err := fs.Stat(ctx, "a"); return err },
			}
			for i, op := range ops {
				err := op()
				if got := err != nil; got != c.wantErr[i] {
					t.Errorf("op %d: err = %v, want failure %v", i, err, c.wantErr[i])
				}
				if err != nil && !errors.Is(err, ErrInjected) {
					t.Errorf("op %d: %v does not wrap ErrInjected", i, err)
				}
			}
		})
	}
}

func TestRandomIsReproducible(t *testing.T) {
	run := func(seed uint64) string {
		fs := Wrap(storage.NewMem(), Random(0.3, seed, AllOps))
		var out []byte
		for i := 0; i < 64; i++ {
			_, err := fs.Stat(context.Background(), "k")
			if errors.Is(err, ErrInjected) {
				out = append(out, 'x')
			} else {
				out = append(out, '.')
			}
		}
		return string(out)
	}
	a, b, c := run(1), run(1), run(2)
	if a != b {
		t.Fatalf("same seed, different faults:\n%s\n%s", a, b)
	}
	if a == c {
		t.Fatalf("different seeds, same faults: %s", a)
	}
}

func TestLateFaultAppliesTheWrite(t *testing.T) {
	ctx := context.Background()
	mem := storage.NewMem()
	fs := Wrap(mem, Late(FailMatching(OpPut, nil)))
	err := fs.Put(ctx, "k", []byte("v"))
	if !errors.Is(err, ErrInjected) {
		t.Fatalf("want ErrInjected, got %v", err)
	}
	if b, err := mem.Get(ctx, "k"); err != nil || string(b) != "v" {
		t.Fatalf("late fault: write not applied: %q %v", b, err)
	}
}

func TestSwitch(t *testing.T) {
	sw := &Switch{Inj: FailMatching(AllOps, nil)}
	fs := Wrap(storage.NewMem(), sw)
	ctx := context.Background()
	if err := fs.Put(ctx, "k", nil); err != nil {
		t.Fatal(err)
	}
	sw.Set(true)
	if err := fs.Put(ctx, "k", nil); !errors.Is(err, ErrInjected) {
		t.Fatalf("switched on: %v", err)
	}
	sw.Set(false)
	if _, err := fs.Get(ctx, "k"); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(OpPut|OpDelete) != "put|delete" {
		t.Errorf("Op.String: %s", OpPut|OpDelete)
	}
}
