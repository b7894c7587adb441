// Package commits owns the small files that decide which fragments of a
// TileDB array exist at a given time: commit markers (.wrt, legacy .ok),
// consolidated commits (.con), ignore files (.ign), vacuum files (.vac),
// delete commits (.del) and update commits (.upd), and the rules by which
// TileDB turns a directory listing plus those files into the fragments,
// deletes and consolidated fragment metadata an open array uses (Resolve).
//
// Paths are always relative to the array directory ("__commits/x.wrt",
// "__fragments/x", or "x" for legacy entries in the array root), so the
// package never touches storage itself.
package commits

import (
	"fmt"
	"math"
	"strings"

	"github.com/tileflight/tileflight/format/wire"
)

// File suffixes and directory names of the array layout.
const (
	SuffixWrite     = ".wrt"
	SuffixOK        = ".ok"
	SuffixDelete    = ".del"
	SuffixUpdate    = ".upd"
	SuffixVacuum    = ".vac"
	SuffixCon       = ".con"
	SuffixIgnore    = ".ign"
	SuffixMeta      = ".meta"
	DirCommits      = "__commits"
	DirFragments    = "__fragments"
	DirFragmentMeta = "__fragment_meta"
	DirSchema       = "__schema"
	DirMeta         = "__meta"
	DirLabels       = "__labels"
)

// Format versions where behaviour changes.
const (
	// From this version fragments, commits and consolidated fragment
	// metadata live in their own directories, commits end in .wrt.
	VersionCommitsDir = 12
	// Fragments consolidated at this version or later carry per-cell
	// timestamps, so they may be read when they only partly overlap the
	// open range.
	VersionConsolidationWithTimestamps = 15
	// Vacuum files hold paths relative to the array from this version on.
	VersionRelativeVacuum = 19
)

// nameInfo is what TileDB derives from a timestamped name. The parsing
// mirrors TileDB's deliberately lenient one (a number stops at the first
// non-digit, a version that is not a number reads as 0), because which
// fragments are visible depends on it; only a start after the end or a
// name without '_' is an error, as in TileDB.
type nameInfo struct {
	name       string // last path segment without its final extension
	start, end uint64
	version    uint32
}

func lastSegment(p string) string {
	p = strings.TrimRight(p, "/")
	if i := strings.LastIndexByte(p, '/'); i >= 0 {
		return p[i+1:]
	}
	return p
}

func stripExt(s string) string {
	if i := strings.LastIndexByte(s, '.'); i >= 0 {
		return s[:i]
	}
	return s
}

// hasFragmentName reports whether the last segment of p, without its
// extension, contains '_'.
func hasFragmentName(p string) bool {
	return strings.IndexByte(stripExt(lastSegment(p)), '_') >= 0
}

func parseName(p string) (nameInfo, error) {
	var ni nameInfo
	ni.name = stripExt(lastSegment(p))
	us := strings.LastIndexByte(ni.name, '_')
	if us < 0 {
		return ni, fmt.Errorf("%w: %q: not a timestamped name (no '_')", wire.ErrCorrupt, p)
	}
	tail := ni.name[us+1:]
	ni.version = scanUint32(tail)
	switch {
	case strings.Count(ni.name, "_") == 5: // __t1_t2_uuid_v
		s, rest := scanInt64(strings.TrimPrefix(ni.name, "__"), len(ni.name) >= 2 && ni.name[:2] == "__")
		ni.start = uint64(s)
		if strings.HasPrefix(rest, "_") {
			e, _ := scanInt64(rest[1:], true)
			ni.end = uint64(e)
		}
	case len(tail) == 32: // __t1_t2_uuid, format versions 3 and 4
		ni.version = 4
		s, rest := scanInt64(strings.TrimPrefix(ni.name, "__"), len(ni.name) >= 2 && ni.name[:2] == "__")
		ni.start = uint64(s)
		if strings.HasPrefix(rest, "_") {
			e, _ := scanInt64(rest[1:], true)
			ni.end = uint64(e)
		}
	default: // __uuid_t, format versions 1 and 2
		ni.version = 2
		t, _ := scanInt64(tail, true)
		ni.start, ni.end = uint64(t), uint64(t)
	}
	if ni.start > ni.end {
		return ni, fmt.Errorf("%w: %q: start timestamp %d is after end timestamp %d", wire.ErrCorrupt, p, ni.start, ni.end)
	}
	return ni, nil
}

// scanInt64 reads an optionally signed decimal the way C's scanf %d does
// (leading blanks skipped, saturating on overflow) and returns it with the
// rest of s. ok=false means "do not even try" (a literal prefix mismatch).
func scanInt64(s string, ok bool) (int64, string) {
	if !ok {
		return 0, s
	}
	i := 0
	for i < len(s) && (s[i] == ' ' || (s[i] >= '\t' && s[i] <= '\r')) {
		i++
	}
	neg := false
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		neg = s[i] == '-'
		i++
	}
	j := i
	var v uint64
	over := false
	for j < len(s) && s[j] >= '0' && s[j] <= '9' {
		d := uint64(s[j] - '0')
		if v > (math.MaxUint64-d)/10 {
			over = true
		} else {
			v = v*10 + d
		}
		j++
	}
	if j == i {
		return 0, s
	}
	switch {
	case !neg && (over || v > math.MaxInt64):
		return math.MaxInt64, s[j:]
	case neg && (over || v > 1<<63):
		return math.MinInt64, s[j:]
	case neg:
		return -int64(v), s[j:]
	}
	return int64(v), s[j:]
}

// scanUint32 reads a version number the way a C++ stream extracts an
// unsigned int: no digits gives 0, overflow saturates.
func scanUint32(s string) uint32 {
	i := 0
	for i < len(s) && (s[i] == ' ' || (s[i] >= '\t' && s[i] <= '\r')) {
		i++
	}
	neg := false
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		neg = s[i] == '-'
		i++
	}
	var v uint64
	j := i
	for j < len(s) && s[j] >= '0' && s[j] <= '9' {
		v = v*10 + uint64(s[j]-'0')
		if v > math.MaxUint32 {
			return math.MaxUint32
		}
		j++
	}
	if j == i {
		return 0
	}
	if neg {
		return uint32(-int64(v))
	}
	return uint32(v)
}

// CommitPath returns where the commit marker of a fragment lives, given the
// fragment's path relative to the array: NAME.ok beside a legacy fragment,
// __commits/NAME.wrt from format version 12 on.
func CommitPath(fragmentPath string) (string, error) {
	ni, err := parseName(fragmentPath)
	if err != nil {
		return "", err
	}
	if ni.version < VersionCommitsDir {
		return strings.TrimRight(fragmentPath, "/") + SuffixOK, nil
	}
	return DirCommits + "/" + ni.name + SuffixWrite, nil
}

// VacuumPath returns where the vacuum file written by consolidating into a
// fragment lives (NAME.vac beside a legacy fragment, __commits/NAME.vac).
func VacuumPath(fragmentPath string) (string, error) {
	ni, err := parseName(fragmentPath)
	if err != nil {
		return "", err
	}
	if ni.version < VersionCommitsDir {
		return strings.TrimRight(fragmentPath, "/") + SuffixVacuum, nil
	}
	return DirCommits + "/" + ni.name + SuffixVacuum, nil
}
