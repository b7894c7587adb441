package writer

import (
	"context"
	"errors"
	"fmt"
	"path"
	"sort"
	"strings"

	"github.com/tileflight/tileflight/errkind"
	"github.com/tileflight/tileflight/format/commits"
	"github.com/tileflight/tileflight/format/names"
	"github.com/tileflight/tileflight/storage"
)

// Staged writes: a writer's Stage leaves its fragments in the store
// without a commit; CommitFragments later makes any set of them (from one
// or many writers, on one or many daemons) visible with one commit
// object, and AbortFragments deletes them. Both only ever touch
// fragments of this format version that no commit names, so neither can
// hide or remove data that readers already see.
//
// A fragment is complete once its __fragment_metadata.tdb exists: the
// writer stores it after every data file, and removeFragment deletes it
// before anything else, so a fragment half-written or half-removed (a
// crash) is never complete and never committed.

// CommitState is what CommitFragments did.
type CommitState struct {
	// Fragments are the committed fragments, in the order given.
	Fragments []string
	// Commit is the key (relative to the array) of the commit object
	// written, "" when every fragment was already committed (a retry).
	Commit string
}

// commitIndex is which fragment commits an array's __commits directory
// holds: .wrt files, entries of consolidated commits files and of ignore
// files (all as paths relative to the array).
type commitIndex struct {
	named map[string]bool
}

func loadCommitIndex(ctx context.Context, st storage.Store, dir string) (*commitIndex, error) {
	es, err := st.List(ctx, storage.Join(dir, names.CommitsDir))
	if err != nil {
		return nil, err
	}
	ix := &commitIndex{named: map[string]bool{}}
	for _, e := range es {
		if e.IsDir {
			continue
		}
		p := names.CommitsDir + "/" + e.Name
		switch {
		case strings.HasSuffix(e.Name, commits.SuffixWrite):
			ix.named[p] = true
		case strings.HasSuffix(e.Name, commits.SuffixCon):
			b, err := st.Get(ctx, storage.Join(dir, p))
			if err != nil {
				return nil, fmt.Errorf("consolidated commits file %s: %w", p, err)
			}
			ents, err := commits.DecodeCon(b)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", p, err)
			}
			for _, ce := range ents {
				ix.named[ce.Path] = true
			}
		case strings.HasSuffix(e.Name, commits.SuffixIgnore):
			b, err := st.Get(ctx, storage.Join(dir, p))
			if err != nil {
				return nil, fmt.Errorf("ignore file %s: %w", p, err)
			}
			for _, l := range commits.DecodeIgnore(b) {
				ix.named[l] = true
			}
		}
	}
	return ix, nil
}

func (ix *commitIndex) committed(n names.Name) bool {
	k, _ := names.CommitKey(n)
	return ix.named[k]
}

// parseStaged checks a list of fragment names as given by a client.
func parseStaged(dir string, frags []string) ([]names.Name, error) {
	if len(frags) == 0 {
		return nil, invalidf("array %q: no fragments given", dir)
	}
	seen := map[string]bool{}
	out := make([]names.Name, 0, len(frags))
	for _, f := range frags {
		n, err := names.Parse(f)
		if err != nil || n.Ext != "" || n.Form != names.Form3 || path.Base(f) != f {
			return nil, invalidf("array %q: %q is not a fragment name (want __t1_t2_uuid_v as DoPut returned it)", dir, f)
		}
		if n.Version < commits.VersionCommitsDir {
			return nil, invalidf("array %q: fragment %q has format version %d; only fragments in __fragments (version %d and later) are staged", dir, f, n.Version, commits.VersionCommitsDir)
		}
		if seen[f] {
			return nil, invalidf("array %q: fragment %q listed twice", dir, f)
		}
		seen[f] = true
		out = append(out, n)
	}
	return out, nil
}

// complete reports whether the fragment's metadata file exists.
func complete(ctx context.Context, st storage.Store, dir string, n names.Name) (bool, error) {
	_, err := st.Stat(ctx, storage.Join(dir, names.FragmentKey(n), names.FragmentMetadataFile))
	if errors.Is(err, storage.ErrNotFound) {
		return false, nil
	}
	return err == nil, err
}

// CommitFragments makes the staged fragments frags of the array at dir
// visible at once: one .wrt for a single fragment, otherwise one
// consolidated commits file naming them all, stamped with the range of
// their timestamps. Every fragment must be complete (NotFound if not).
// When every one is already committed (a retried call whose reply was
// lost) nothing is written; when only some are, it is FailedPrecondition
// and nothing is written either.
func CommitFragments(ctx context.Context, st storage.Store, dir string, frags []string) (*CommitState, error) {
	ns, err := parseStaged(dir, frags)
	if err != nil {
		return nil, err
	}
	ix, err := loadCommitIndex(ctx, st, dir)
	if err != nil {
		return nil, fmt.Errorf("array %q: %w", dir, err)
	}
	var done, todo []string
	for i, n := range ns {
		if ix.committed(n) {
			done = append(done, frags[i])
		} else {
			todo = append(todo, frags[i])
		}
	}
	st0 := &CommitState{Fragments: append([]string(nil), frags...)}
	if len(todo) == 0 {
		return st0, nil
	}
	if len(done) > 0 {
		return nil, errkind.Errorf(errkind.FailedPrecondition, "array %q: fragment(s) %s are already committed and %s are not; commit a set that is wholly staged", dir, strings.Join(done, ", "), strings.Join(todo, ", "))
	}
	for _, n := range ns {
		ok, err := complete(ctx, st, dir, n)
		if err != nil {
			return nil, fmt.Errorf("array %q: fragment %s: %w", dir, n, err)
		}
		if !ok {
			return nil, errkind.Errorf(errkind.NotFound, "array %q: no staged fragment %s (never written, aborted, vacuumed, or its write did not finish)", dir, n)
		}
	}
	var key string
	body := []byte{}
	if len(ns) == 1 {
		key, _ = names.CommitKey(ns[0])
	} else {
		lo, hi := ns[0].T1, ns[0].T2
		es := make([]commits.ConEntry, 0, len(ns))
		for _, n := range ns {
			lo, hi = min(lo, n.T1), max(hi, n.T2)
			k, _ := names.CommitKey(n)
			es = append(es, commits.ConEntry{Path: k})
		}
		sort.Slice(es, func(i, j int) bool { return es[i].Path < es[j].Path })
		if body, err = commits.EncodeCon(es); err != nil {
			return nil, err
		}
		key = names.CommitsDir + "/" + names.New(lo, hi, FormatVersion).WithExt(names.ExtCon).String()
	}
	if err := st.Put(ctx, storage.Join(dir, key), body); err != nil {
		return nil, fmt.Errorf("array %q: commit %s: %w", dir, key, err)
	}
	st0.Commit = key
	return st0, nil
}

// AbortFragments deletes the staged fragments frags of the array at dir.
// A fragment that a commit names is refused (FailedPrecondition) before
// anything is deleted; one that is not there counts as aborted already,
// so a retried abort succeeds.
func AbortFragments(ctx context.Context, st storage.Store, dir string, frags []string) ([]string, error) {
	ns, err := parseStaged(dir, frags)
	if err != nil {
		return nil, err
	}
	ix, err := loadCommitIndex(ctx, st, dir)
	if err != nil {
		return nil, fmt.Errorf("array %q: %w", dir, err)
	}
	var done []string
	for i, n := range ns {
		if ix.committed(n) {
			done = append(done, frags[i])
		}
	}
	if len(done) > 0 {
		return nil, errkind.Errorf(errkind.FailedPrecondition, "array %q: fragment(s) %s are committed; abort deletes only staged fragments", dir, strings.Join(done, ", "))
	}
	var errs []error
	for _, n := range ns {
		if err := removeFragment(ctx, st, dir, n); err != nil {
			errs = append(errs, fmt.Errorf("array %q: removing staged fragment %s: %w", dir, n, err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return append([]string(nil), frags...), nil
}

// removeFragment deletes a fragment's directory, its metadata file first
// so that whatever a failure leaves is incomplete.
func removeFragment(ctx context.Context, st storage.Store, dir string, n names.Name) error {
	key := storage.Join(dir, names.FragmentKey(n))
	if err := st.Delete(ctx, storage.Join(key, names.FragmentMetadataFile)); err != nil {
		return err
	}
	return st.DeletePrefix(ctx, key)
}

// IsCommitted reports whether a commit names the fragment (a v12+
// fragment name) of the array at dir.
func IsCommitted(ctx context.Context, st storage.Store, dir, fragment string) (bool, error) {
	n, err := names.Parse(fragment)
	if err != nil {
		return false, invalidf("array %q: %q is not a fragment name", dir, fragment)
	}
	ix, err := loadCommitIndex(ctx, st, dir)
	if err != nil {
		return false, err
	}
	return ix.committed(n), nil
}

// Committed returns a test of whether a commit of the array at dir names a
// fragment (by name), from one reading of its __commits directory.
func Committed(ctx context.Context, st storage.Store, dir string) (func(fragment string) bool, error) {
	ix, err := loadCommitIndex(ctx, st, dir)
	if err != nil {
		return nil, err
	}
	return func(fragment string) bool {
		n, err := names.Parse(fragment)
		return err == nil && ix.committed(n)
	}, nil
}
