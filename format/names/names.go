// Package names owns everything about names inside a TileDB array
// directory: the three historical forms of timestamped names (fragments,
// schemas, metadata, commit files), how fresh names are generated, the
// order TileDB sorts them in, the names of the data files inside a
// fragment for every format version, and the fixed names of the array
// directory layout.
package names

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/tileflight/tileflight/errkind"
)

// ErrNotTimestamped is wrapped by Parse errors: the string is not a
// timestamped name.
// Kind: Internal until a caller wraps it with the kind it knows
// (errkind.Fallback): whether the user or the stored data is at fault.
var ErrNotTimestamped error = errkind.New(errkind.Internal, errkind.Fallback, "not a timestamped name")

// Form is the shape of a timestamped name. The numbering follows TileDB's
// "name version".
type Form int

const (
	// Form1 is `__uuid_t1` or `__uuid_t1_t2`, written by format versions
	// 1 and 2 (TileDB 1.4-1.5).
	Form1 Form = 1
	// Form2 is `__t1_t2_uuid`, written by format versions 3 and 4, and
	// still used by TileDB for names that carry no version: array schemas
	// and array metadata files.
	Form2 Form = 2
	// Form3 is `__t1_t2_uuid_v`, written for fragments and commit files
	// since format version 5 (TileDB 2.0).
	Form3 Form = 3
)

// Extensions a timestamped name may carry.
const (
	ExtWrite  = ".wrt"  // fragment commit (v12+, in __commits)
	ExtOK     = ".ok"   // fragment commit (v5-v11, next to the fragment)
	ExtCon    = ".con"  // consolidated commits
	ExtIgnore = ".ign"  // ignore file for consolidated commits
	ExtVacuum = ".vac"  // vacuum file (commits or metadata)
	ExtDelete = ".del"  // delete commit
	ExtUpdate = ".upd"  // update commit
	ExtMeta   = ".meta" // consolidated fragment metadata
	ExtTmp    = ".tmp"  // array metadata still being written (TileDB skips it)
	ExtNone   = ""
)

var knownExts = []string{ExtWrite, ExtOK, ExtCon, ExtIgnore, ExtVacuum, ExtDelete, ExtUpdate, ExtMeta, ExtTmp}

// Name is a parsed timestamped name.
type Name struct {
	// T1 and T2 are the timestamps as written (milliseconds since the
	// epoch). A Form1 name with one timestamp has T2 == T1.
	T1, T2 uint64
	// UUID is the unique part: 32 lower-case hex digits for every name
	// TileDB writes.
	UUID string
	// Version is the format version written in a Form3 name, else 0.
	Version uint32
	// Form is the shape the name was parsed from or will be rendered in.
	Form Form
	// SingleT is set for a Form1 name that holds only one timestamp.
	SingleT bool
	// Ext is the extension including its dot ("" for none).
	Ext string
}

// Parse parses a timestamped name, optionally followed by one of the known
// extensions. It accepts a bare name, not a path; use path.Base first.
//
// The form is decided the way TileDB decides it: four fields after the
// leading "__" make Form3; three fields whose last is exactly 32
// characters make Form2; anything else with two or three fields is Form1.
// Numbers must be canonical decimal (no sign, no leading zeros) so that
// String reproduces the input byte for byte.
func Parse(s string) (Name, error) {
	var n Name
	base := s
	if i := strings.LastIndexByte(s, '.'); i >= 0 {
		ext := s[i:]
		if !knownExt(ext) {
			return n, fmt.Errorf("%w: %q: unknown extension %q", ErrNotTimestamped, s, ext)
		}
		n.Ext = ext
		base = s[:i]
	}
	if !strings.HasPrefix(base, "__") {
		return n, fmt.Errorf("%w: %q does not start with \"__\"", ErrNotTimestamped, s)
	}
	parts := strings.Split(base[2:], "_")
	bad := func(what string) (Name, error) {
		return Name{}, fmt.Errorf("%w: %q: %s", ErrNotTimestamped, s, what)
	}
	var err error
	switch {
	case len(parts) == 4:
		n.Form = Form3
		if n.T1, err = parseU64(parts[0]); err != nil {
			return bad("first timestamp " + err.Error())
		}
		if n.T2, err = parseU64(parts[1]); err != nil {
			return bad("second timestamp " + err.Error())
		}
		n.UUID = parts[2]
		v, err := parseU64(parts[3])
		if err != nil || v > 0xFFFFFFFF {
			return bad("format version is not a 32-bit number")
		}
		n.Version = uint32(v)
	case len(parts) == 3 && len(parts[2]) == 32:
		n.Form = Form2
		if n.T1, err = parseU64(parts[0]); err != nil {
			return bad("first timestamp " + err.Error())
		}
		if n.T2, err = parseU64(parts[1]); err != nil {
			return bad("second timestamp " + err.Error())
		}
		n.UUID = parts[2]
	case len(parts) == 2 || len(parts) == 3:
		n.Form = Form1
		n.UUID = parts[0]
		if n.T1, err = parseU64(parts[1]); err != nil {
			return bad("timestamp " + err.Error())
		}
		n.T2, n.SingleT = n.T1, true
		if len(parts) == 3 {
			if n.T2, err = parseU64(parts[2]); err != nil {
				return bad("second timestamp " + err.Error())
			}
			n.SingleT = false
		}
	default:
		return bad(fmt.Sprintf("%d underscore-separated fields", len(parts)))
	}
	if err := checkUUID(n.UUID); err != nil {
		return bad(err.Error())
	}
	if n.T1 > n.T2 {
		return bad(fmt.Sprintf("start timestamp %d after end timestamp %d", n.T1, n.T2))
	}
	return n, nil
}

// IsTimestamped reports whether s parses as a timestamped name.
func IsTimestamped(s string) bool {
	_, err := Parse(s)
	return err == nil
}

func knownExt(e string) bool {
	for _, k := range knownExts {
		if e == k {
			return true
		}
	}
	return false
}

func parseU64(s string) (uint64, error) {
	if s == "" {
		return 0, errors.New("is empty")
	}
	if len(s) > 1 && s[0] == '0' {
		return 0, fmt.Errorf("%q has a leading zero", s)
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, fmt.Errorf("%q is not a decimal number", s)
		}
	}
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%q does not fit 64 bits", s)
	}
	return v, nil
}

// checkUUID accepts letters, digits and dashes: TileDB has only ever
// written hex digits, but nothing in the format forbids more, and any
// other byte ('_', '.', '/') would break the name's structure.
func checkUUID(u string) error {
	if u == "" {
		return errors.New("empty uuid")
	}
	for i := 0; i < len(u); i++ {
		c := u[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '-') {
			return fmt.Errorf("uuid %q has byte %q", u, c)
		}
	}
	return nil
}

// Base renders the name without its extension.
func (n Name) Base() string {
	var b strings.Builder
	b.Grow(2 + 20 + 1 + 20 + 1 + len(n.UUID) + 11)
	b.WriteString("__")
	switch n.Form {
	case Form1:
		b.WriteString(n.UUID)
		b.WriteByte('_')
		b.WriteString(strconv.FormatUint(n.T1, 10))
		if !n.SingleT {
			b.WriteByte('_')
			b.WriteString(strconv.FormatUint(n.T2, 10))
		}
	default:
		b.WriteString(strconv.FormatUint(n.T1, 10))
		b.WriteByte('_')
		b.WriteString(strconv.FormatUint(n.T2, 10))
		b.WriteByte('_')
		b.WriteString(n.UUID)
		if n.Form == Form3 {
			b.WriteByte('_')
			b.WriteString(strconv.FormatUint(uint64(n.Version), 10))
		}
	}
	return b.String()
}

// String renders the name with its extension, byte-identical to what
// Parse read.
func (n Name) String() string { return n.Base() + n.Ext }

// WithExt returns n with another extension ("" for none).
func (n Name) WithExt(ext string) Name {
	n.Ext = ext
	return n
}

// Range is the timestamp range TileDB assigns to the name when it decides
// what an open at [start, end] sees. For Form1 TileDB reads only the last
// field, so `__uuid_t1_t2` counts as [t2, t2]; every other name is
// [T1, T2].
func (n Name) Range() (uint64, uint64) {
	if n.Form == Form1 {
		return n.T2, n.T2
	}
	return n.T1, n.T2
}

// FormatVersion is the array format version that the name implies for a
// fragment, as TileDB infers it: the written version for Form3, 4 for
// Form2 and 2 for Form1. (Form1 fragments may be version 1 or 2; only
// their metadata file says which.) It means nothing for schema and
// metadata names, which are Form2 in every format version.
func (n Name) FormatVersion() uint32 {
	switch n.Form {
	case Form3:
		return n.Version
	case Form2:
		return 4
	}
	return 2
}

// Compare orders names the way TileDB orders fragments and metadata files
// before it applies them: by start timestamp (TileDB compares nothing
// else). TileDB's sort is not stable, but it sorts a listing that is in
// byte order, and for the short lists it handles that order survives; so
// ties are broken by the rendered name, which also makes the order total.
func Compare(a, b Name) int {
	at, _ := a.Range()
	bt, _ := b.Range()
	switch {
	case at < bt:
		return -1
	case at > bt:
		return 1
	}
	return strings.Compare(a.String(), b.String())
}

// Less is Compare(a, b) < 0, for sort.Slice.
func Less(a, b Name) bool { return Compare(a, b) < 0 }
