package arraymeta

import (
	"context"
	"errors"
	"fmt"
	"github.com/tileflight/tileflight/format/gentile"
	"math"
	"sort"
	"strings"

	"github.com/tileflight/tileflight/format/names"
	"github.com/tileflight/tileflight/storage"
)

// File is one decoded metadata file and its name.
type File struct {
	Name    names.Name
	Entries []Entry
}

// Merge applies files in TileDB's order (names.Compare: start timestamp,
// then name) and returns the resulting map: within a file and across
// files a later entry replaces an earlier one, and a deletion removes the
// key. The files slice is sorted in place.
func Merge(files []File) map[string]Value {
	sort.SliceStable(files, func(i, j int) bool { return names.Less(files[i].Name, files[j].Name) })
	m := map[string]Value{}
	for _, f := range files {
		apply(m, f.Entries)
	}
	return m
}

func apply(m map[string]Value, es []Entry) {
	for _, e := range es {
		if e.Deleted {
			delete(m, e.Key)
		} else {
			m[e.Key] = e.Value
		}
	}
}

// Snapshot is the array metadata as TileDB sees it when an array is opened
// over a timestamp range.
type Snapshot struct {
	// Values is the merged key -> value map.
	Values map[string]Value
	// Applied lists the metadata files merged, in the order applied.
	Applied []names.Name
	// Vacuumed lists files skipped because a vacuum file in range names
	// them (they were consolidated into another file that is applied).
	Vacuumed []names.Name
}

// Latest opens at "now": every timestamp.
const Latest = math.MaxUint64

// Load reads the metadata of the array at arrayKey ("" for the store's
// root) as TileDB does when the array is opened at [start, end]:
//
//   - files still being written (".tmp") are skipped;
//   - a vacuum file whose timestamp range lies within [start, end] hides
//     the metadata files it lists (which a consolidated file replaces);
//   - of the rest, the files whose timestamp range lies within
//     [start, end] are merged in timestamp order.
//
// A missing __meta directory is an empty map. Names TileDB would not
// parse are ignored, as are directories.
func Load(ctx context.Context, st storage.Store, arrayKey string, start, end uint64) (*Snapshot, error) {
	return LoadWith(ctx, st, arrayKey, start, end, nil)
}

// LoadWith is Load for an encrypted array: u decodes its generic tiles.
func LoadWith(ctx context.Context, st storage.Store, arrayKey string, start, end uint64, u gentile.Unfilterer) (*Snapshot, error) {
	dir := storage.Join(arrayKey, names.MetaDir)
	ents, err := st.List(ctx, dir)
	if err != nil {
		return nil, fmt.Errorf("array metadata: list %q: %w", dir, err)
	}
	var metas, vacs []names.Name
	for _, e := range ents {
		if e.IsDir {
			continue
		}
		n, err := names.Parse(e.Name)
		if err != nil {
			continue
		}
		lo, hi := n.Range()
		inRange := lo >= start && hi <= end
		switch n.Ext {
		case names.ExtNone:
			metas = append(metas, n)
		case names.ExtVacuum:
			if inRange {
				vacs = append(vacs, n)
			}
		}
	}
	hidden := map[string]bool{}
	for _, v := range vacs {
		key := storage.Join(dir, v.String())
		b, err := st.Get(ctx, key)
		if err != nil {
			if errors.Is(err, storage.ErrNotFound) {
				continue // vacuumed meanwhile
			}
			return nil, fmt.Errorf("array metadata: vacuum file %q: %w", key, err)
		}
		for _, line := range strings.Split(string(b), "\n") {
			if base, ok := vacuumedMetaName(line); ok {
				hidden[base] = true
			}
		}
	}
	snap := &Snapshot{Values: map[string]Value{}}
	var files []File
	for _, n := range metas {
		if hidden[n.String()] {
			snap.Vacuumed = append(snap.Vacuumed, n)
			continue
		}
		lo, hi := n.Range()
		if lo < start || hi > end {
			continue
		}
		key := storage.Join(dir, n.String())
		b, err := st.Get(ctx, key)
		if err != nil {
			return nil, fmt.Errorf("array metadata: %q: %w", key, err)
		}
		es, err := DecodeFileWith(b, u)
		if err != nil {
			return nil, fmt.Errorf("array metadata: %q: %w", key, err)
		}
		files = append(files, File{Name: n, Entries: es})
	}
	snap.Values = Merge(files)
	for _, f := range files {
		snap.Applied = append(snap.Applied, f.Name)
	}
	return snap, nil
}

// vacuumedMetaName extracts the metadata file name from one line of a
// vacuum file. Since format version 19 lines are relative
// ("__meta/<name>"); before, they were absolute URIs. TileDB matches both
// by the part from "__meta" on, else by the last path segment.
func vacuumedMetaName(line string) (string, bool) {
	line = strings.TrimSpace(line)
	if line == "" {
		return "", false
	}
	if i := strings.LastIndex(line, names.MetaDir+"/"); i >= 0 {
		line = line[i+len(names.MetaDir)+1:]
	} else if i := strings.LastIndexByte(line, '/'); i >= 0 {
		line = line[i+1:]
	}
	return strings.TrimSuffix(line, "/"), line != ""
}

// Write stores entries as a new metadata file of the array at arrayKey,
// stamped [t, t] (t = 0: now) and written in the given array format
// version, and returns its name. With no entries it writes nothing, as
// TileDB does, and returns the zero Name.
func Write(ctx context.Context, st storage.Store, arrayKey string, entries []Entry, t uint64, version uint32) (names.Name, error) {
	b, err := EncodeFile(entries, version)
	if err != nil || b == nil {
		return names.Name{}, err
	}
	n := names.New(t, t, 0)
	key := storage.Join(arrayKey, names.MetaKey(n))
	if err := st.Put(ctx, key, b); err != nil {
		return names.Name{}, fmt.Errorf("array metadata: write %q: %w", key, err)
	}
	return n, nil
}
