package commits

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"strings"

	"github.com/tileflight/tileflight/format/wire"
)

// splitLines splits text the way TileDB reads these files (getline): on
// '\n', keeping empty lines, with a final unterminated line counted only
// when it is not empty.
func splitLines(b []byte) []string {
	var out []string
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			out = append(out, string(b))
			break
		}
		out = append(out, string(b[:i]))
		b = b[i+1:]
	}
	return out
}

func joinLines(lines []string) []byte {
	n := 0
	for _, l := range lines {
		n += len(l) + 1
	}
	out := make([]byte, 0, n)
	for _, l := range lines {
		out = append(out, l...)
		out = append(out, '\n')
	}
	return out
}

// DecodeIgnore reads an ignore file (.ign): one commit path per line,
// relative to the array (e.g. "__commits/__1_1_<uuid>_22.wrt"). Any bytes
// are a valid ignore file, so there is no error.
func DecodeIgnore(b []byte) []string { return splitLines(b) }

// EncodeIgnore writes an ignore file exactly as TileDB does.
func EncodeIgnore(paths []string) []byte { return joinLines(paths) }

// DecodeVacuum reads a vacuum file (.vac): one superseded fragment per
// line. Format version 19 and later write paths relative to the array
// (TileDB writes them with a leading '/', "/__fragments/NAME"); older
// versions wrote absolute URIs. VacuumTarget maps either to a path.
func DecodeVacuum(b []byte) []string { return splitLines(b) }

// EncodeVacuum writes a vacuum file exactly as TileDB does; lines are
// written as given (see VacuumLine for what TileDB puts in them).
func EncodeVacuum(lines []string) []byte { return joinLines(lines) }

// VacuumLine is the line TileDB writes in a vacuum file for a fragment
// (path relative to the array) at the given write version: the path with a
// leading '/' from version 19 on; older versions wrote the absolute URI,
// for which arrayURI (without a trailing slash) is prefixed.
func VacuumLine(fragmentPath string, writeVersion uint32, arrayURI string) string {
	if writeVersion >= VersionRelativeVacuum {
		return "/" + fragmentPath
	}
	return strings.TrimRight(arrayURI, "/") + "/" + fragmentPath
}

// VacuumTarget turns a vacuum file line into the path, relative to the
// array, that TileDB matches against fragments: from "__fragments" on if
// the line holds it, else from "__meta" on, else the last path segment.
// A line with none of these and no '/' makes TileDB refuse to open the
// array; it is an error here too.
func VacuumTarget(line string) (string, error) {
	if i := strings.Index(line, DirFragments); i >= 0 {
		return line[i:], nil
	}
	if i := strings.Index(line, DirMeta); i >= 0 {
		return line[i:], nil
	}
	i := strings.LastIndexByte(line, '/')
	if i < 0 {
		return "", fmt.Errorf("%w: vacuum file line %q is not a path", wire.ErrCorrupt, line)
	}
	return line[i+1:], nil
}

// ConEntry is one item of a consolidated commits file: the path of a
// commit relative to the array and, for delete and update commits, the
// complete bytes of the commit file (a generic tile) copied into it.
type ConEntry struct {
	Path string
	// Tile is the embedded commit file for .del and .upd entries, nil for
	// fragment commits (.wrt, .ok).
	Tile []byte
	// Offset is where Tile starts in the consolidated file.
	Offset int
}

// IsDelete reports whether the entry is a delete commit.
func (e ConEntry) IsDelete() bool { return strings.HasSuffix(e.Path, SuffixDelete) }

// IsUpdate reports whether the entry is an update commit.
func (e ConEntry) IsUpdate() bool { return strings.HasSuffix(e.Path, SuffixUpdate) }

func (e ConEntry) hasTile() bool { return e.IsDelete() || e.IsUpdate() }

// DecodeCon reads a consolidated commits file (.con). Lines are commit
// paths; a line ending in .del or .upd is followed by a uint64 size and that
// many bytes of the commit file. Tiles alias b.
//
// TileDB itself only writes .wrt, .ok and .del entries, and its reader
// skips a tile after .del lines only; the format description gives .upd
// entries the same layout, which is what is followed here.
func DecodeCon(b []byte) ([]ConEntry, error) {
	var out []ConEntry
	off := 0
	for off < len(b) {
		i := bytes.IndexByte(b[off:], '\n')
		var line string
		if i < 0 {
			line = string(b[off:])
			off = len(b)
		} else {
			line = string(b[off : off+i])
			off += i + 1
		}
		e := ConEntry{Path: line}
		if e.hasTile() {
			if len(b)-off < 8 {
				return out, fmt.Errorf("consolidated commits: entry %q: %w: tile size needs 8 bytes, %d left", line, wire.ErrTruncated, len(b)-off)
			}
			n := binary.LittleEndian.Uint64(b[off:])
			off += 8
			if n > uint64(len(b)-off) {
				return out, fmt.Errorf("consolidated commits: entry %q: %w: tile of %d bytes, %d left", line, wire.ErrTruncated, n, len(b)-off)
			}
			e.Offset = off
			e.Tile = b[off : off+int(n) : off+int(n)]
			off += int(n)
		}
		out = append(out, e)
	}
	return out, nil
}

// EncodeCon writes a consolidated commits file exactly as TileDB does.
// Entries for .del and .upd commits must carry their commit file in Tile.
func EncodeCon(entries []ConEntry) ([]byte, error) {
	n := 0
	for _, e := range entries {
		if strings.IndexByte(e.Path, '\n') >= 0 {
			return nil, fmt.Errorf("consolidated commits: path %q holds a newline", e.Path)
		}
		n += len(e.Path) + 1
		if e.hasTile() {
			n += 8 + len(e.Tile)
		} else if e.Tile != nil {
			return nil, fmt.Errorf("consolidated commits: entry %q is not a delete or update but carries a tile", e.Path)
		}
	}
	out := make([]byte, 0, n)
	for _, e := range entries {
		out = append(out, e.Path...)
		out = append(out, '\n')
		if e.hasTile() {
			out = binary.LittleEndian.AppendUint64(out, uint64(len(e.Tile)))
			out = append(out, e.Tile...)
		}
	}
	return out, nil
}
