package names

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/tileflight/tileflight/errkind"
)

// FileKind says which of a field's data files is meant.
type FileKind int

const (
	// Fixed is the values file of a fixed-size field, or the offsets file
	// of a var-sized one.
	Fixed FileKind = iota
	// Var is the values file of a var-sized field (`_var`).
	Var
	// Validity is the validity file of a nullable attribute (`_validity`).
	Validity
)

func (k FileKind) suffix() string {
	switch k {
	case Var:
		return "_var"
	case Validity:
		return "_validity"
	}
	return ""
}

func (k FileKind) String() string {
	switch k {
	case Var:
		return "var"
	case Validity:
		return "validity"
	}
	return "fixed"
}

// FileSuffix ends every data file name.
const FileSuffix = ".tdb"

// Names of the special fields and their data files.
const (
	// CoordsField is the zipped coordinates of fragments before version 5.
	CoordsField = "__coords"
	CoordsFile  = CoordsField + FileSuffix
	// TimestampsFile holds per-cell timestamps in fragments consolidated
	// with timestamps (v14+).
	TimestampsFile = "t" + FileSuffix
	// DeleteTimestampsFile and DeleteConditionIndexFile hold per-cell
	// delete information in fragments consolidated with deletes (v15+).
	DeleteTimestampsFile     = "dt" + FileSuffix
	DeleteConditionIndexFile = "dci" + FileSuffix
)

// AttrFile is the data file of attribute number idx (schema order) named
// name, for a fragment of the given format version.
func AttrFile(version uint32, idx int, name string, kind FileKind) string {
	return fieldFile(version, "a", idx, name, kind)
}

// DimFile is the data file of dimension number idx named name. Fragments
// before version 5 have no per-dimension files: their coordinates are in
// CoordsFile.
func DimFile(version uint32, idx int, name string, kind FileKind) string {
	return fieldFile(version, "d", idx, name, kind)
}

func fieldFile(version uint32, prefix string, idx int, name string, kind FileKind) string {
	var stem string
	switch {
	case version >= VersionIndexedDataFiles:
		stem = prefix + strconv.Itoa(idx)
	case version == 8:
		stem = EncodeV8(name)
	default:
		stem = name
	}
	return stem + kind.suffix() + FileSuffix
}

// TileDB's version 8 escape table. The RFC 3986 reserved characters get
// their true percent codes, but the four extra characters that Windows
// forbids were given codes that belong to other characters (for example
// '<' is written as "%20"). Files on disk use these codes, so they are
// reproduced exactly.
var v8Encode = map[byte]string{
	'!': "%21", '#': "%23", '$': "%24", '%': "%25", '&': "%26", '\'': "%27",
	'(': "%28", ')': "%29", '*': "%2A", '+': "%2B", ',': "%2C", '/': "%2F",
	':': "%3A", ';': "%3B", '=': "%3D", '?': "%3F", '@': "%40", '[': "%5B",
	']': "%5D",
	'"': "%22", '<': "%20", '>': "%2D", '\\': "%30", '|': "%3C",
}

var v8Decode = func() map[string]byte {
	m := make(map[string]byte, len(v8Encode))
	for c, s := range v8Encode {
		m[s] = c
	}
	return m
}()

// EncodeV8 escapes a field name the way format version 8 names its data
// files.
func EncodeV8(name string) string {
	var b strings.Builder
	for i := 0; i < len(name); i++ {
		if e, ok := v8Encode[name[i]]; ok {
			b.WriteString(e)
		} else {
			b.WriteByte(name[i])
		}
	}
	return b.String()
}

// ErrBadEscape is wrapped when a version 8 file name holds an escape
// TileDB never writes.
// Kind: Internal until a caller wraps it with the kind it knows
// (errkind.Fallback): whether the user or the stored data is at fault.
var ErrBadEscape error = errkind.New(errkind.Internal, errkind.Fallback, "invalid escape in data file name")

// DecodeV8 reverses EncodeV8. Escape digits are matched case-sensitively
// (upper-case hex), as TileDB writes them.
func DecodeV8(s string) (string, error) {
	if !strings.Contains(s, "%") {
		return s, nil
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '%' {
			b.WriteByte(s[i])
			continue
		}
		if i+3 > len(s) {
			return "", fmt.Errorf("%w: %q: %q at byte %d", ErrBadEscape, s, s[i:], i)
		}
		c, ok := v8Decode[s[i:i+3]]
		if !ok {
			return "", fmt.Errorf("%w: %q: %q at byte %d", ErrBadEscape, s, s[i:i+3], i)
		}
		b.WriteByte(c)
		i += 2
	}
	return b.String(), nil
}

// DataFile describes a parsed data file name.
type DataFile struct {
	// Dim is true for a dimension file (v9+ "d<i>"); false for attributes
	// and for older, name-based files where the name alone cannot tell.
	Dim bool
	// Index is the attribute or dimension index (v9+), else -1.
	Index int
	// Field is the field name for versions before 9 (decoded for v8), or
	// the special field for "t", "dt", "dci" and "__coords".
	Field string
	Kind  FileKind
}

// ParseDataFile parses the name of a file inside a fragment directory of
// the given format version. The fragment metadata file is not a data file
// and is refused. Before version 9 a field whose own name ends in "_var"
// or "_validity" is ambiguous; the suffix is taken as the kind, and
// callers that know the schema should prefer building names with
// AttrFile/DimFile and comparing.
func ParseDataFile(version uint32, file string) (DataFile, error) {
	df := DataFile{Index: -1}
	stem, ok := strings.CutSuffix(file, FileSuffix)
	if !ok || stem == "" || file == FragmentMetadataFile {
		return df, fmt.Errorf("%q is not a data file", file)
	}
	if s, ok := strings.CutSuffix(stem, "_validity"); ok {
		stem, df.Kind = s, Validity
	} else if s, ok := strings.CutSuffix(stem, "_var"); ok {
		stem, df.Kind = s, Var
	}
	if stem == CoordsField {
		df.Field = CoordsField
		return df, nil
	}
	if version < VersionIndexedDataFiles {
		name := stem
		if version == 8 {
			var err error
			if name, err = DecodeV8(stem); err != nil {
				return df, err
			}
		}
		df.Field = name
		return df, nil
	}
	switch stem {
	case "t", "dt", "dci":
		df.Field = stem
		return df, nil
	}
	if len(stem) < 2 || (stem[0] != 'a' && stem[0] != 'd') {
		return df, fmt.Errorf("data file %q: want a<i> or d<i> in format version %d", file, version)
	}
	idx, err := parseU64(stem[1:])
	if err != nil || idx > 1<<31 {
		return df, fmt.Errorf("data file %q: bad index", file)
	}
	df.Dim, df.Index = stem[0] == 'd', int(idx)
	return df, nil
}
