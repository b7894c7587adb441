package lifecycle

import (
	"context"
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/tileflight/tileflight/format/commits"
	"github.com/tileflight/tileflight/format/names"
	"github.com/tileflight/tileflight/storage"
	"github.com/tileflight/tileflight/tdbarray"
	"github.com/tileflight/tileflight/writer"
)

// VacuumOptions tune a vacuum.
type VacuumOptions struct {
	// EncryptionKey is the array's key when it is encrypted.
	EncryptionKey []byte
	// Grace is how old an uncommitted fragment (a staged write never
	// committed, or the leftovers of a write that died) must be before a
	// fragments vacuum removes it. <= 0 removes none.
	Grace time.Duration
	// Now is the time the grace is measured from (zero: time.Now).
	Now time.Time
}

// Vacuum removes what consolidation in the given mode made obsolete, as
// TileDB's vacuum of that mode does; a fragments vacuum also removes
// uncommitted fragments older than opt.Grace.
func Vacuum(ctx context.Context, st storage.Store, dir string, mode Mode, opt VacuumOptions) (*VacuumResult, error) {
	// The key is checked (and a damaged array refused) before anything is
	// removed.
	if _, err := writer.LoadSchemaWith(ctx, st, dir, writer.ArrayOptions{EncryptionKey: opt.EncryptionKey}); err != nil {
		return nil, fmt.Errorf("vacuum %s of array %q: %w", mode, dir, err)
	}
	res := &VacuumResult{Mode: mode}
	var err error
	switch mode {
	case Commits:
		res.Removed, err = vacuumCommits(ctx, st, dir)
	case FragmentMeta:
		res.Removed, err = vacuumFragmentMeta(ctx, st, dir)
	case ArrayMeta:
		res.Removed, err = vacuumArrayMeta(ctx, st, dir)
	case Fragments:
		if err = rollForward(ctx, st, dir); err == nil {
			res.Removed, err = vacuumFragments(ctx, st, dir, opt)
		}
		if err == nil && opt.Grace > 0 {
			res.Uncommitted, err = vacuumUncommitted(ctx, st, dir, opt)
		}
	default:
		_, err = ParseMode(string(mode))
	}
	if err != nil {
		return nil, fmt.Errorf("vacuum %s of array %q: %w", mode, dir, err)
	}
	if res.Removed == nil {
		res.Removed = []string{}
	}
	sort.Strings(res.Removed)
	return res, nil
}

// vacuumFragments removes the fragments that .vac files supersede, as
// TileDB's fragment vacuum does: an ignore file first for those whose
// commit a consolidated commits file holds, then each fragment's commit
// file and directory, then the .vac files whose every fragment is gone.
func vacuumFragments(ctx context.Context, st storage.Store, dir string, opt VacuumOptions) ([]string, error) {
	a, err := tdbarray.Open(ctx, st, dir, tdbarray.Options{Start: 0, End: math.MaxUint64, FullOverlapOnly: true, EncryptionKey: opt.EncryptionKey})
	if err != nil {
		return nil, err
	}
	v := a.View
	var gone, ignore []string
	for _, p := range v.ToVacuum {
		cp, err := commits.CommitPath(p)
		if err != nil {
			return nil, err
		}
		if v.Consolidated[cp] {
			ignore = append(ignore, cp)
		}
	}
	if len(ignore) > 0 {
		n, err := consolidatedName(ignore, writer.FormatVersion)
		if err != nil {
			return nil, err
		}
		key := names.CommitsDir + "/" + n.WithExt(names.ExtIgnore).String()
		if err := st.Put(ctx, storage.Join(dir, key), commits.EncodeIgnore(ignore)); err != nil {
			return nil, err
		}
	}
	for _, p := range v.ToVacuum {
		cp, _ := commits.CommitPath(p)
		if err := st.Delete(ctx, storage.Join(dir, cp)); err != nil {
			return gone, err
		}
		key := storage.Join(dir, p)
		// The metadata file first: what a failure leaves is incomplete.
		if err := st.Delete(ctx, storage.Join(key, names.FragmentMetadataFile)); err != nil {
			return gone, err
		}
		if err := st.DeletePrefix(ctx, key); err != nil {
			return gone, err
		}
		gone = append(gone, p)
	}
	for _, vf := range v.VacFilesToVacuum {
		if err := st.Delete(ctx, storage.Join(dir, vf)); err != nil {
			return gone, err
		}
		gone = append(gone, vf)
	}
	return gone, nil
}

// vacuumUncommitted removes fragments that no commit names and whose
// newest file is older than the grace period, and the intent files of
// consolidations that never committed.
func vacuumUncommitted(ctx context.Context, st storage.Store, dir string, opt VacuumOptions) ([]string, error) {
	now := opt.Now
	if now.IsZero() {
		now = time.Now()
	}
	cutoff := now.Add(-opt.Grace)
	es, err := st.List(ctx, storage.Join(dir, names.FragmentsDir))
	if err != nil {
		return nil, err
	}
	committed, err := writer.Committed(ctx, st, dir)
	if err != nil {
		return nil, err
	}
	var old []string
	for _, e := range es {
		if !e.IsDir {
			continue
		}
		n, err := names.Parse(e.Name)
		if err != nil || n.Ext != "" || n.Form != names.Form3 || committed(e.Name) {
			continue
		}
		files, err := st.List(ctx, storage.Join(dir, names.FragmentsDir, e.Name))
		if err != nil {
			return nil, err
		}
		var newest time.Time
		for _, f := range files {
			if f.ModTime.After(newest) {
				newest = f.ModTime
			}
		}
		if len(files) > 0 && (newest.IsZero() || newest.After(cutoff)) {
			continue // too young, or of unknown age
		}
		old = append(old, e.Name)
	}
	gone := []string{}
	if len(old) > 0 {
		// AbortFragments checks the commits again just before deleting.
		if _, err := writer.AbortFragments(ctx, st, dir, old); err != nil {
			return nil, err
		}
		gone = old
	}
	// Intent files of consolidations whose fragment is gone.
	files, err := listFiles(ctx, st, dir, names.CommitsDir)
	if err != nil {
		return gone, err
	}
	for _, f := range files {
		if !strings.HasSuffix(f, pendingVac) {
			continue
		}
		base := strings.TrimSuffix(f, pendingVac)
		if _, err := st.Stat(ctx, storage.Join(dir, names.FragmentsDir, base, names.FragmentMetadataFile)); err == nil {
			continue
		}
		if committed(base) {
			continue
		}
		if err := st.Delete(ctx, storage.Join(dir, names.CommitsDir, f)); err != nil {
			return gone, err
		}
	}
	return gone, nil
}
