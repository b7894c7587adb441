package commits

import (
	"fmt"
	"sort"
	"strings"
)

// Entry is one item of a directory listing.
type Entry struct {
	Name string
	Dir  bool
}

// Listing is what Resolve needs to know about an array's directories. Only
// the root, __commits and __fragment_meta are consulted: like TileDB,
// fragments of format 12 and later are found through their commits, never
// by listing __fragments.
type Listing struct {
	Root         []Entry
	Commits      []Entry
	FragmentMeta []Entry

	// ReadFile returns the bytes of a file given its path relative to the
	// array; Resolve calls it for .ign and .con files and for the .vac
	// files that matter for the requested range.
	ReadFile func(path string) ([]byte, error)

	// HasFragmentMetadata reports whether a legacy fragment directory in the
	// root (format version < 5, which had no commit files) holds its
	// __fragment_metadata.tdb; such fragments count as committed when it
	// does. Nil means no.
	HasFragmentMetadata func(name string) bool
}

// Options select the view.
type Options struct {
	// Start and End bound the open range, inclusive, in ms since the epoch.
	Start, End uint64
	// FullOverlapOnly keeps only fragments whose timestamp range lies
	// inside [Start, End]. TileDB sets it when reading dense arrays and when
	// deleting or vacuuming fragments; for sparse reads, fragments
	// consolidated with timestamps (format 15+) are kept when they merely
	// overlap the range, and the reader filters their cells by timestamp.
	FullOverlapOnly bool
}

// Fragment is a committed fragment to read.
type Fragment struct {
	Name  string // timestamped name
	Path  string // relative to the array: "__fragments/NAME" or "NAME"
	Start uint64
	End   uint64
	// Version is the format version as TileDB reads it from the name: the
	// trailing number, 4 for names of formats 3-4 (no version) and 2 for
	// names of formats 1-2; the fragment metadata holds the exact one.
	Version uint32
}

// CommitPath returns the fragment's commit marker path.
func (f Fragment) CommitPath() string {
	if f.Version < VersionCommitsDir {
		return f.Path + SuffixOK
	}
	return DirCommits + "/" + f.Name + SuffixWrite
}

// ConditionCommit locates a delete or update commit within the range.
type ConditionCommit struct {
	// Path is the commit's own path, "__commits/NAME.del" (or .upd), also
	// when it is read from a consolidated commits file.
	Path string
	// Container is the file that holds the commit's tile: Path itself, or
	// the .con file it was consolidated into.
	Container string
	// Offset is where the tile starts in Container (0 for Path itself).
	Offset int
	// Tile is the commit file's bytes when they came from a .con file
	// (aliasing the bytes ReadFile returned); nil when the commit is a file
	// of its own, to be read from Container.
	Tile      []byte
	Timestamp uint64 // start timestamp of the commit's name
	Update    bool
}

// View is what an array opened at a timestamp range sees.
type View struct {
	// Fragments to read, oldest first, as TileDB orders them (by start
	// timestamp; ties keep listing order: legacy root entries first, then
	// consolidated commits, then __commits).
	Fragments []Fragment
	// Deletes and updates whose timestamps lie inside the range, by
	// timestamp.
	Conditions []ConditionCommit
	// FragmentMeta lists consolidated fragment metadata files, root .meta
	// files first, then __fragment_meta; where several describe one
	// fragment, the first wins.
	FragmentMeta []string
	// ToVacuum lists fragments superseded by a consolidation (named in a
	// .vac file that applies to the range); they are not in Fragments.
	ToVacuum []string
	// VacFilesToVacuum lists the .vac files all of whose fragments are
	// superseded within the range.
	VacFilesToVacuum []string
	// Consolidated is the set of commit paths listed in .con files and not
	// ignored; deleting or vacuuming one of these fragments needs an
	// ignore file rather than removing a .wrt file.
	Consolidated map[string]bool
	// Ignored lists every path named in .ign files.
	Ignored map[string]bool
}

// Resolve computes which fragments, deletes and consolidated fragment
// metadata an array opened on [Start, End] uses, following TileDB 2.30's
// rules, from the listing and the commit files it reads through
// l.ReadFile.
func Resolve(l Listing, o Options) (*View, error) {
	v := &View{Consolidated: map[string]bool{}, Ignored: map[string]bool{}}
	root := sortedEntries(l.Root)
	commits := sortedEntries(l.Commits)
	read := l.ReadFile
	if read == nil {
		read = func(p string) ([]byte, error) { return nil, fmt.Errorf("%s: no reader given", p) }
	}

	// Ignore files first: they veto entries of consolidated commits files.
	for _, e := range commits {
		if e.Dir || !strings.HasSuffix(e.Name, SuffixIgnore) {
			continue
		}
		p := DirCommits + "/" + e.Name
		b, err := read(p)
		if err != nil {
			return nil, fmt.Errorf("ignore file %s: %w", p, err)
		}
		for _, line := range DecodeIgnore(b) {
			v.Ignored[line] = true
		}
	}

	// Consolidated commits. Deletes inside them count whether or not they
	// are ignored, as in TileDB.
	for _, e := range commits {
		if e.Dir || !strings.HasSuffix(e.Name, SuffixCon) {
			continue
		}
		p := DirCommits + "/" + e.Name
		b, err := read(p)
		if err != nil {
			return nil, fmt.Errorf("consolidated commits file %s: %w", p, err)
		}
		entries, err := DecodeCon(b)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
		for _, ce := range entries {
			if !v.Ignored[ce.Path] {
				v.Consolidated[ce.Path] = true
			}
			if ce.IsDelete() || ce.IsUpdate() {
				ni, err := parseName(ce.Path)
				if err != nil {
					return nil, fmt.Errorf("%s: %w", p, err)
				}
				if fullyInside(ni, o) {
					v.Conditions = append(v.Conditions, ConditionCommit{
						Path: ce.Path, Container: p, Offset: ce.Offset, Tile: ce.Tile,
						Timestamp: ni.start, Update: ce.IsUpdate(),
					})
				}
			}
		}
	}

	// Candidate fragments and vacuum files, in TileDB's unfiltered order.
	var cands []string
	okSet := map[string]bool{}
	for _, e := range root {
		if !e.Dir && strings.HasSuffix(e.Name, SuffixOK) {
			okSet[strings.TrimSuffix(e.Name, SuffixOK)] = true
		}
	}
	for _, e := range root {
		if strings.HasSuffix(e.Name, ".") {
			continue
		}
		isFrag, err := v.isLegacyFragment(e, okSet, l.HasFragmentMetadata)
		if err != nil {
			return nil, err
		}
		if isFrag || (!e.Dir && strings.HasSuffix(e.Name, SuffixVacuum)) {
			cands = append(cands, e.Name)
		}
	}
	cons := make([]string, 0, len(v.Consolidated))
	for p := range v.Consolidated {
		cons = append(cons, p)
	}
	sort.Strings(cons)
	for _, p := range cons {
		if strings.HasSuffix(p, SuffixWrite) {
			cands = append(cands, DirFragments+"/"+strings.TrimSuffix(lastSegment(p), SuffixWrite))
		}
	}
	for _, e := range commits {
		p := DirCommits + "/" + e.Name
		switch {
		case strings.HasSuffix(e.Name, SuffixWrite):
			if !v.Consolidated[p] {
				cands = append(cands, DirFragments+"/"+strings.TrimSuffix(e.Name, SuffixWrite))
			}
		case strings.HasSuffix(e.Name, SuffixVacuum):
			cands = append(cands, p)
		case strings.HasSuffix(e.Name, SuffixDelete), strings.HasSuffix(e.Name, SuffixUpdate):
			ni, err := parseName(p)
			if err != nil {
				return nil, err
			}
			if fullyInside(ni, o) && !v.Consolidated[p] {
				v.Conditions = append(v.Conditions, ConditionCommit{
					Path: p, Container: p, Timestamp: ni.start,
					Update: strings.HasSuffix(e.Name, SuffixUpdate),
				})
			}
		}
	}
	sort.SliceStable(v.Conditions, func(i, j int) bool { return v.Conditions[i].Timestamp < v.Conditions[j].Timestamp })

	if err := v.filter(cands, o, read); err != nil {
		return nil, err
	}

	for _, e := range root {
		if strings.HasSuffix(e.Name, SuffixMeta) {
			v.FragmentMeta = append(v.FragmentMeta, e.Name)
		}
	}
	for _, e := range sortedEntries(l.FragmentMeta) {
		v.FragmentMeta = append(v.FragmentMeta, DirFragmentMeta+"/"+e.Name)
	}
	return v, nil
}

func sortedEntries(es []Entry) []Entry {
	out := append([]Entry(nil), es...)
	sort.SliceStable(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// overlaps applies TileDB's timestamp test: full containment, or any
// overlap for fragments consolidated with timestamps when allowed.
func overlaps(ni nameInfo, o Options) bool {
	if !o.FullOverlapOnly && ni.version >= VersionConsolidationWithTimestamps {
		return ni.start <= o.End && o.Start <= ni.end
	}
	return fullyInside(ni, o)
}

func fullyInside(ni nameInfo, o Options) bool { return ni.start >= o.Start && ni.end <= o.End }

var knownDirs = map[string]bool{
	DirSchema: true, DirCommits: true, DirMeta: true, DirFragments: true, DirFragmentMeta: true,
}

// isLegacyFragment decides whether a root entry is a committed fragment of
// the pre-12 layout.
func (v *View) isLegacyFragment(e Entry, okSet map[string]bool, hasMeta func(string) bool) (bool, error) {
	if !hasFragmentName(e.Name) {
		return false, nil
	}
	ni, err := parseName(e.Name)
	if err != nil {
		return false, fmt.Errorf("array root entry %q: %w", e.Name, err)
	}
	if strings.IndexByte(ni.name, '.') >= 0 || knownDirs[ni.name] {
		return false, nil
	}
	if okSet[e.Name] || v.Consolidated[e.Name+SuffixOK] {
		return true, nil
	}
	if ni.version >= 5 {
		return false, nil
	}
	return e.Dir && hasMeta != nil && hasMeta(e.Name), nil
}

// filter drops vacuumed fragments and those outside the range, then orders
// the rest by start timestamp.
func (v *View) filter(cands []string, o Options, read func(string) ([]byte, error)) error {
	infos := make([]nameInfo, len(cands))
	isVac := make([]bool, len(cands))
	outside := map[string]bool{}
	inside := map[string]int{}
	var vacFiles []string
	for i, p := range cands {
		ni, err := parseName(p)
		if err != nil {
			return err
		}
		infos[i] = ni
		ov := overlaps(ni, o)
		if strings.HasSuffix(p, SuffixVacuum) {
			isVac[i] = true
			if ov {
				vacFiles = append(vacFiles, p)
			}
		} else if !ov {
			outside[p] = true
		} else {
			inside[p] = i
		}
	}

	vacuumed := make([]bool, len(cands))
	for _, vf := range vacFiles {
		b, err := read(vf)
		if err != nil {
			return fmt.Errorf("vacuum file %s: %w", vf, err)
		}
		whole := true
		for _, line := range DecodeVacuum(b) {
			t, err := VacuumTarget(line)
			if err != nil {
				return fmt.Errorf("vacuum file %s: %w", vf, err)
			}
			if i, ok := inside[t]; ok {
				vacuumed[i] = true
			}
			if outside[t] {
				whole = false
			}
		}
		if whole {
			v.VacFilesToVacuum = append(v.VacFilesToVacuum, vf)
		}
	}

	for i, p := range cands {
		switch {
		case vacuumed[i]:
			v.ToVacuum = append(v.ToVacuum, p)
		case isVac[i]:
		case overlaps(infos[i], o):
			v.Fragments = append(v.Fragments, Fragment{
				Name: infos[i].name, Path: p, Start: infos[i].start, End: infos[i].end, Version: infos[i].version,
			})
		}
	}
	// TileDB sorts by start timestamp alone with an unstable sort, which
	// for the small counts seen in practice keeps equal starts in order.
	sort.SliceStable(v.Fragments, func(i, j int) bool { return v.Fragments[i].Start < v.Fragments[j].Start })
	return nil
}
