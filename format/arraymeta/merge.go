package arraymeta

import (
	"math"
	"sort"
	"strings"

	"github.com/tileflight/tileflight/format/names"
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

// Listing sorts the entries of an array's __meta directory for opening
// the array at [start, end], as TileDB does: files still being written
// (".tmp"), names TileDB would not parse and directories (the caller
// leaves those out) are ignored; every metadata file is kept in Metas (a
// vacuum file may name any of them), and the vacuum files whose timestamp
// range lies within [start, end] in Vacuums.
func Listing(fileNames []string, start, end uint64) (metas, vacuums []names.Name) {
	for _, name := range fileNames {
		n, err := names.Parse(name)
		if err != nil {
			continue
		}
		switch n.Ext {
		case names.ExtNone:
			metas = append(metas, n)
		case names.ExtVacuum:
			if inRange(n, start, end) {
				vacuums = append(vacuums, n)
			}
		}
	}
	return metas, vacuums
}

// VacuumedNames returns the names of the metadata files a vacuum file's
// contents list (to be hidden: a consolidated file replaces them).
func VacuumedNames(vacuumFile []byte) []string {
	var out []string
	for _, line := range strings.Split(string(vacuumFile), "\n") {
		if base, ok := vacuumedMetaName(line); ok {
			out = append(out, base)
		}
	}
	return out
}

// ToApply returns, of metas (from Listing), the files to read and merge
// for [start, end]: those not hidden (by name) whose timestamp range
// lies within [start, end]; and the hidden ones, for Snapshot.Vacuumed.
func ToApply(metas []names.Name, hidden map[string]bool, start, end uint64) (apply, vacuumed []names.Name) {
	for _, n := range metas {
		if hidden[n.String()] {
			vacuumed = append(vacuumed, n)
			continue
		}
		if inRange(n, start, end) {
			apply = append(apply, n)
		}
	}
	return apply, vacuumed
}

// NewSnapshot merges the decoded files (Merge) into a Snapshot.
func NewSnapshot(files []File, vacuumed []names.Name) *Snapshot {
	snap := &Snapshot{Values: Merge(files), Vacuumed: vacuumed}
	for _, f := range files {
		snap.Applied = append(snap.Applied, f.Name)
	}
	return snap
}

func inRange(n names.Name, start, end uint64) bool {
	lo, hi := n.Range()
	return lo >= start && hi <= end
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
