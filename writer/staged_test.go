package writer

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/tileflight/tileflight/errkind"
	"github.com/tileflight/tileflight/format/schema"
	"github.com/tileflight/tileflight/storage"
	"github.com/tileflight/tileflight/storage/errorfs"
)

// stageSparse stages batches [k0, k0+n) of batchCols, several fragments.
func stageSparse(t *testing.T, st storage.Store, s *schema.ArraySchema, ts uint64, k0, n int) []string {
	t.Helper()
	w, err := NewSparseWriter(context.Background(), st, "a", s, Options{Timestamp: ts, MaxFragmentBytes: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Abort()
	for k := k0; k < k0+n; k++ {
		if err := w.AppendColumns(batchCols(k, 30, 0)); err != nil {
			t.Fatal(err)
		}
	}
	res, err := w.Stage()
	if err != nil {
		t.Fatal(err)
	}
	if res.Commit != "" || res.Rows != int64(30*n) {
		t.Fatalf("stage result %+v", res)
	}
	return res.Fragments
}

func TestStagedCommitAbort(t *testing.T) {
	ctx := context.Background()
	st := storage.NewMem()
	s := mustCreate(t, st, "a", sparseJSON)
	f1 := stageSparse(t, st, s, 5, 0, 3)
	f2 := stageSparse(t, st, s, 6, 3, 2)
	if len(f1) < 2 || len(f2) < 2 {
		t.Fatalf("want several fragments per staged write: %v %v", f1, f2)
	}
	if got := readRows(t, st, "a", nil); len(got) != 0 || len(commitsOf(t, st, "a")) != 0 {
		t.Fatalf("staged fragments visible: %d rows, commits %v", len(got), commitsOf(t, st, "a"))
	}
	all := append(append([]string(nil), f1...), f2...)

	cs, err := CommitFragments(ctx, st, "a", all)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(cs.Commit, ".con") || !strings.HasPrefix(cs.Commit, "__commits/__5_6_") {
		t.Fatalf("commit object %q: want __commits/__5_6_*.con", cs.Commit)
	}
	if got := readRows(t, st, "a", nil); len(got) != 150 {
		t.Fatalf("after commit: %d rows, want 150", len(got))
	}
	snap := snapshot(t, st, "a")

	// A retried commit writes nothing and succeeds.
	again, err := CommitFragments(ctx, st, "a", all)
	if err != nil || again.Commit != "" {
		t.Fatalf("retry: %+v %v", again, err)
	}
	requireKept(t, st, snap, "retry")

	f3 := stageSparse(t, st, s, 9, 7, 1)
	bad := []struct {
		name  string
		frags []string
		kind  error
	}{
		{"partly committed", append([]string{f3[0]}, f1[0]), errkind.FailedPrecondition},
		{"missing", []string{"__9_9_0123456789abcdef0123456789abcdef_22"}, errkind.NotFound},
		{"not a name", []string{"../x"}, errkind.InvalidArgument},
		{"with extension", []string{f3[0] + ".wrt"}, errkind.InvalidArgument},
		{"old version", []string{"__9_9_0123456789abcdef0123456789abcdef_11"}, errkind.InvalidArgument},
		{"twice", []string{f3[0], f3[0]}, errkind.InvalidArgument},
		{"empty", nil, errkind.InvalidArgument},
	}
	for _, c := range bad {
		if _, err := CommitFragments(ctx, st, "a", c.frags); !errors.Is(err, c.kind) {
			t.Errorf("commit %s: got %v, want %v", c.name, err, c.kind)
		}
	}
	if _, err := AbortFragments(ctx, st, "a", []string{f3[0], f1[0]}); !errors.Is(err, errkind.FailedPrecondition) {
		t.Fatalf("abort of a committed fragment: %v", err)
	}
	requireKept(t, st, snap, "refused calls")

	// Abort deletes the staged fragment; a retried abort succeeds; the
	// aborted fragment can no longer be committed.
	if _, err := AbortFragments(ctx, st, "a", f3); err != nil {
		t.Fatal(err)
	}
	for _, f := range fragmentsOf(t, st, "a") {
		if f == f3[0] {
			t.Fatalf("aborted fragment %s still there", f)
		}
	}
	if _, err := AbortFragments(ctx, st, "a", f3); err != nil {
		t.Fatalf("retried abort: %v", err)
	}
	if _, err := CommitFragments(ctx, st, "a", f3); !errors.Is(err, errkind.NotFound) {
		t.Fatalf("commit after abort: %v", err)
	}
	requireKept(t, st, snap, "abort")

	// A single staged fragment is committed by its own .wrt.
	f4 := stageSparse(t, st, s, 11, 20, 1)
	cs, err = CommitFragments(ctx, st, "a", f4)
	if err != nil || cs.Commit != "__commits/"+f4[0]+".wrt" {
		t.Fatalf("single commit: %+v %v", cs, err)
	}
	if got := readRows(t, st, "a", nil); len(got) != 180 {
		t.Fatalf("after the second commit: %d rows, want 180", len(got))
	}
}

func TestStagedDense(t *testing.T) {
	ctx := context.Background()
	st := storage.NewMem()
	s := mustCreate(t, st, "a", denseJSON)
	w, err := NewDenseWriter(ctx, st, "a", s, [][2]int64{{1, 20}, {1, 12}}, schema.RowMajor, Options{Timestamp: 3, MaxFragmentBytes: 600})
	if err != nil {
		t.Fatal(err)
	}
	cols := denseCols(240)
	for lo := 0; lo < 240; lo += 50 {
		if err := w.AppendColumns(sliceCols(s, cols, lo, min(lo+50, 240))); err != nil {
			t.Fatal(err)
		}
	}
	res, err := w.Stage()
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Abort(); err != nil { // a no-op after Stage
		t.Fatal(err)
	}
	if len(res.Fragments) < 2 || len(fragmentsOf(t, st, "a")) != len(res.Fragments) {
		t.Fatalf("staged %v, stored %v", res.Fragments, fragmentsOf(t, st, "a"))
	}
	if len(commitsOf(t, st, "a")) != 0 {
		t.Fatal("a staged dense write committed")
	}
	if _, err := CommitFragments(ctx, st, "a", res.Fragments); err != nil {
		t.Fatal(err)
	}
	if got := readRows(t, st, "a", nil); len(got) == 0 {
		t.Fatal("dense staged write not visible after commit")
	}
}

// TestStagedFailEveryStep fails each store operation of CommitFragments
// and AbortFragments in turn (before and after it takes effect): a commit
// makes all of the fragments visible or none; an abort leaves every
// fragment either whole and uncommitted or incomplete (never committable).
func TestStagedFailEveryStep(t *testing.T) {
	ctx := context.Background()
	setup := func() (*storage.Mem, []string) {
		st := storage.NewMem()
		s := mustCreate(t, st, "a", sparseJSON)
		return st, stageSparse(t, st, s, 5, 0, 3)
	}
	for _, op := range []string{"commit", "abort"} {
		for _, late := range []bool{false, true} {
			for i := int64(0); ; i++ {
				st, frags := setup()
				var inj errorfs.Injector = errorfs.FailNth(i, errorfs.AllOps)
				if late {
					inj = errorfs.Late(inj)
				}
				fs := errorfs.Wrap(st, inj)
				var err error
				if op == "commit" {
					_, err = CommitFragments(ctx, fs, "a", frags)
				} else {
					_, err = AbortFragments(ctx, fs, "a", frags)
				}
				if err == nil {
					break // past the last step
				}
				if !errors.Is(err, errorfs.ErrInjected) {
					t.Fatalf("%s step %d: %v", op, i, err)
				}
				rows := len(readRows(t, st, "a", nil))
				if rows != 0 && rows != 90 {
					t.Fatalf("%s step %d (late %v): %d rows visible, want 0 or 90", op, i, late, rows)
				}
				if op == "abort" {
					if rows != 0 {
						t.Fatalf("abort step %d made rows visible", i)
					}
					// Whatever is left is either recommittable whole or refused.
					if _, err := CommitFragments(ctx, st, "a", frags); err == nil {
						if got := len(readRows(t, st, "a", nil)); got != 90 {
							t.Fatalf("abort step %d, then commit: %d rows", i, got)
						}
					} else if !errors.Is(err, errkind.NotFound) {
						t.Fatalf("abort step %d, then commit: %v", i, err)
					}
					continue
				}
				// The commit is retried to completion.
				if _, err := CommitFragments(ctx, st, "a", frags); err != nil {
					t.Fatalf("commit step %d: retry: %v", i, err)
				}
				if got := len(readRows(t, st, "a", nil)); got != 90 {
					t.Fatalf("commit step %d: after retry %d rows", i, got)
				}
			}
		}
	}
}
