package names

import (
	"path"
	"strings"
)

// Fixed names in an array directory.
const (
	SchemaDir        = "__schema"        // timestamped schema files (v10+)
	EnumerationsDir  = "__enumerations"  // inside SchemaDir (v20+)
	FragmentsDir     = "__fragments"     // fragment directories (v12+)
	CommitsDir       = "__commits"       // .wrt/.del/.upd/.con/.ign/.vac (v12+)
	FragmentMetaDir  = "__fragment_meta" // consolidated fragment metadata (v12+)
	MetaDir          = "__meta"          // array metadata
	LabelsDir        = "__labels"        // dimension label arrays (v18+)
	LegacySchemaFile = "__array_schema.tdb"
	// FragmentMetadataFile is the metadata file inside a fragment directory.
	FragmentMetadataFile = "__fragment_metadata.tdb"
	// LockFile is the empty file TileDB 1.x-2.x wrote into arrays for
	// process locking; 2.30 writes none, and readers ignore it.
	LockFile = "__lock.tdb"
	// GroupFile marks a TileDB group directory (not an array).
	GroupFile = "__tiledb_group.tdb"
	// ReservedPrefix starts every name TileDB reserves for itself.
	ReservedPrefix = "__"
)

// Format versions at which the directory layout changed.
const (
	// VersionCommitFiles: .ok commit files exist (earlier fragments count
	// as committed when their metadata file exists).
	VersionCommitFiles = 5
	// VersionIndexedDataFiles: data files are a<i>.tdb / d<i>.tdb.
	VersionIndexedDataFiles = 9
	// VersionSchemaDir: schemas live in __schema.
	VersionSchemaDir = 10
	// VersionSubdirs: fragments, commits and consolidated fragment
	// metadata live in their own directories; commits end in .wrt.
	VersionSubdirs = 12
)

// IsReserved reports whether a directory entry is one of TileDB's own
// names rather than something a user created.
func IsReserved(name string) bool { return strings.HasPrefix(name, ReservedPrefix) }

// FragmentKey is the path of a fragment's directory relative to the
// array: in __fragments from version 12, in the array directory before.
func FragmentKey(n Name) string {
	b := n.WithExt("").String()
	if n.FormatVersion() >= VersionSubdirs {
		return FragmentsDir + "/" + b
	}
	return b
}

// CommitKey is the path of the file that marks fragment n committed,
// relative to the array, and false for fragments older than version 5,
// which have none.
func CommitKey(n Name) (string, bool) {
	v := n.FormatVersion()
	switch {
	case v >= VersionSubdirs:
		return CommitsDir + "/" + n.WithExt(ExtWrite).String(), true
	case v >= VersionCommitFiles:
		return n.WithExt(ExtOK).String(), true
	}
	return "", false
}

// SchemaKey is the path of a schema file relative to the array.
func SchemaKey(n Name) string { return SchemaDir + "/" + n.WithExt("").String() }

// MetaKey is the path of an array metadata file relative to the array.
func MetaKey(n Name) string { return MetaDir + "/" + n.WithExt("").String() }

// CompareSchemaFiles orders schema file names (base names) the way TileDB
// lists them: the legacy __array_schema.tdb first, then byte order of the
// names, which TileDB's sorted listing gives. When opening at time t,
// TileDB takes the last schema in this order whose T2 <= t, and the first
// one if none qualifies.
func CompareSchemaFiles(a, b string) int {
	a, b = path.Base(a), path.Base(b)
	switch {
	case a == b:
		return 0
	case a == LegacySchemaFile:
		return -1
	case b == LegacySchemaFile:
		return 1
	}
	return strings.Compare(a, b)
}
