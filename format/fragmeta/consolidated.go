package fragmeta

import (
	"fmt"
	"path"
	"strings"

	"github.com/tileflight/tileflight/format/gentile"
	"github.com/tileflight/tileflight/format/wire"
)

// ConsolidatedEntry locates one fragment's footer in a consolidated
// fragment metadata file.
type ConsolidatedEntry struct {
	// Name is what the file records: the fragment directory name from
	// format v9, an absolute URI before.
	Name   string
	Offset uint64 // footer offset within Consolidated.Payload
}

// FragmentName is the fragment directory name (the last path segment).
func (e ConsolidatedEntry) FragmentName() string {
	return path.Base(strings.TrimRight(e.Name, "/"))
}

// Consolidated is a decoded consolidated fragment metadata file
// (__fragment_meta/<name>.meta, or <name>.meta at the array root for
// older arrays): an index of fragments and their footers.
type Consolidated struct {
	Entries []ConsolidatedEntry
	// Payload is the unfiltered generic tile; entry offsets point into it.
	Payload []byte
}

// DecodeConsolidated decodes a consolidated fragment metadata file.
func DecodeConsolidated(b []byte, u gentile.Unfilterer) (*Consolidated, error) {
	_, p, _, err := gentile.Decode(b, u)
	if err != nil {
		return nil, fmt.Errorf("consolidated fragment metadata: %w", err)
	}
	return DecodeConsolidatedPayload(p)
}

// DecodeConsolidatedPayload decodes the index of an already unfiltered
// consolidated fragment metadata tile.
func DecodeConsolidatedPayload(p []byte) (*Consolidated, error) {
	r := wire.NewReader(p)
	n := r.Count(4, 16, "fragment number")
	c := &Consolidated{Payload: p, Entries: make([]ConsolidatedEntry, 0, n)}
	for i := 0; i < n && r.Err() == nil; i++ {
		name := r.BytesU64(r.Uint64("fragment name size"), "fragment name")
		off := r.Uint64("footer offset")
		if r.Err() == nil && off >= uint64(len(p)) {
			r.Failf("fragment %q: footer offset %d beyond the %d-byte file", name, off, len(p))
		}
		c.Entries = append(c.Entries, ConsolidatedEntry{Name: string(name), Offset: off})
	}
	if r.Err() != nil {
		return nil, fmt.Errorf("consolidated fragment metadata: %w", r.Err())
	}
	return c, nil
}

// Footer decodes entry i's footer; version is the format version in that
// fragment's name.
func (c *Consolidated) Footer(i int, l Layout, version uint32) (*Footer, error) {
	if i < 0 || i >= len(c.Entries) {
		return nil, fmt.Errorf("consolidated fragment metadata: no entry %d", i)
	}
	e := c.Entries[i]
	f, err := DecodeFooter(c.Payload[e.Offset:], l, version)
	if err != nil {
		return nil, fmt.Errorf("consolidated fragment metadata: fragment %s: %w", e.FragmentName(), err)
	}
	return f, nil
}

// Find returns the index of the entry for fragment name (directory name).
func (c *Consolidated) Find(name string) (int, bool) {
	for i, e := range c.Entries {
		if e.FragmentName() == name {
			return i, true
		}
	}
	return -1, false
}

// EncodeConsolidatedPayload builds the payload of a consolidated fragment
// metadata file from fragment names and their encoded footers (without
// length fields), as TileDB does. Wrap it with gentile.Encode.
func EncodeConsolidatedPayload(names []string, footers [][]byte) ([]byte, error) {
	if len(names) != len(footers) {
		return nil, fmt.Errorf("consolidated fragment metadata: %d names for %d footers", len(names), len(footers))
	}
	off := uint64(4)
	for _, n := range names {
		off += 16 + uint64(len(n))
	}
	w := wire.NewWriter(nil)
	w.Uint32(uint32(len(names)))
	for i, n := range names {
		w.Uint64(uint64(len(n)))
		w.String(n)
		w.Uint64(off)
		off += uint64(len(footers[i]))
	}
	for _, f := range footers {
		w.Write(f)
	}
	return w.Bytes(), nil
}
