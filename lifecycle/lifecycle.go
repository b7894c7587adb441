// Package lifecycle owns what TileDB calls consolidation and vacuuming:
// rewriting an array's many small commit, fragment-metadata, array-metadata
// and fragment files into fewer, and removing what that made obsolete,
// producing exactly the files TileDB 2.30's consolidator and vacuum
// produce, so that TileDB and tileflight read the result alike. It is
// policy over the format packages, the array opener, the read engine
// (fragment merging) and the writer (fragment writing); it copies none of
// them.
//
// Every step is crash safe the way writes are: new objects are complete
// before the one object that makes them count is written, and vacuuming
// removes only what nothing visible needs any more, references before
// the things they reference.
package lifecycle

import (
	"context"
	"fmt"
	"strings"

	"github.com/tileflight/tileflight/errkind"
	"github.com/tileflight/tileflight/format/names"
	"github.com/tileflight/tileflight/storage"
)

// Mode is what a consolidation or vacuum works on.
type Mode string

// The modes of TileDB's sm.consolidation.mode / sm.vacuum.mode.
const (
	Fragments    Mode = "fragments"
	Commits      Mode = "commits"
	FragmentMeta Mode = "fragment_meta"
	ArrayMeta    Mode = "array_meta"
)

// ParseMode checks a mode name.
func ParseMode(s string) (Mode, error) {
	switch m := Mode(s); m {
	case Fragments, Commits, FragmentMeta, ArrayMeta:
		return m, nil
	}
	return "", errkind.Errorf(errkind.InvalidArgument, "mode %q: want fragments, commits, fragment_meta or array_meta", s)
}

// Options tune a consolidation or vacuum.
type Options struct {
	// Start and End bound the timestamps consolidated (inclusive, ms since
	// the epoch); End 0 means now.
	Start, End uint64
	// EncryptionKey is the array's key when it is encrypted.
	EncryptionKey []byte
	// MaxFragmentBytes bounds the memory of a fragment consolidation's
	// writer (see writer.Options); 0 = the writer's default.
	MaxFragmentBytes int64
	// Workers bounds the tiles the consolidation's read fetches and
	// unfilters in parallel (0: one per CPU); a background compaction
	// sets it low to leave the CPUs to queries.
	Workers int
	// Timestamp stamps nothing: consolidated names carry the timestamps of
	// what they consolidate, as TileDB's do.
}

// Result says what a consolidation wrote.
type Result struct {
	Mode Mode `json:"mode"`
	// Consolidated lists what was consolidated (commit paths, fragment
	// names or metadata file names, relative to the array).
	Consolidated []string `json:"consolidated"`
	// Written lists the new files (relative to the array), "" if none:
	// nothing needed consolidating.
	Written []string `json:"written"`
}

// VacuumResult says what a vacuum removed.
type VacuumResult struct {
	Mode    Mode     `json:"mode"`
	Removed []string `json:"removed"`
	// Uncommitted lists fragments removed because no commit names them
	// and they are older than the grace period.
	Uncommitted []string `json:"uncommitted"`
}

// Consolidate consolidates the array at dir in the given mode.
func Consolidate(ctx context.Context, st storage.Store, dir string, mode Mode, opt Options) (*Result, error) {
	if opt.End != 0 && opt.Start > opt.End {
		return nil, errkind.Errorf(errkind.InvalidArgument, "array %q: timestamp start %d is after end %d", dir, opt.Start, opt.End)
	}
	var (
		res *Result
		err error
	)
	switch mode {
	case Commits:
		res, err = consolidateCommits(ctx, st, dir, opt.EncryptionKey)
	case FragmentMeta:
		res, err = consolidateFragmentMeta(ctx, st, dir, opt)
	case ArrayMeta:
		res, err = consolidateArrayMeta(ctx, st, dir, opt)
	case Fragments:
		res, err = consolidateFragments(ctx, st, dir, opt)
	default:
		_, err = ParseMode(string(mode))
	}
	if err != nil {
		return nil, fmt.Errorf("consolidate %s of array %q: %w", mode, dir, err)
	}
	res.Mode = mode
	if res.Consolidated == nil {
		res.Consolidated = []string{}
	}
	if res.Written == nil {
		res.Written = []string{}
	}
	return res, nil
}

// listFiles lists the objects (not directories) of dir/sub, by name.
func listFiles(ctx context.Context, st storage.Store, dir, sub string) ([]string, error) {
	es, err := st.List(ctx, storage.Join(dir, sub))
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range es {
		if !e.IsDir {
			out = append(out, e.Name)
		}
	}
	return out, nil
}

// consolidatedName is TileDB's generate_consolidated_fragment_name: the
// start of the first item, the end of the last, a new UUID, the version.
// Items sorted by name (commit paths) can put a later start first
// ("__10_..." sorts before "__1_..."), where TileDB 2.30 fails with "start
// timestamp cannot be after end timestamp"; the name then spans the
// smallest start and largest end of all the items instead.
func consolidatedName(items []string, version uint32) (names.Name, error) {
	ns := make([]names.Name, len(items))
	for i, it := range items {
		n, err := names.Parse(lastSeg(it))
		if err != nil {
			return names.Name{}, err
		}
		ns[i] = n
	}
	t1, _ := ns[0].Range()
	_, t2 := ns[len(ns)-1].Range()
	if t1 > t2 {
		for _, n := range ns {
			a, b := n.Range()
			t1, t2 = min(t1, a), max(t2, b)
		}
	}
	return names.New(t1, t2, version), nil
}

func lastSeg(p string) string {
	if i := strings.LastIndexByte(p, '/'); i >= 0 {
		return p[i+1:]
	}
	return p
}
