// Package arraymeta owns TileDB array metadata: the `__meta/` files of an
// array (their payload of key/value entries and the generic tile around
// it), merging several files into the current key -> value map the way
// TileDB does (timestamp order, later wins, deletions remove, vacuum files
// hide consolidated-away files), typed access to values and their JSON
// form.
package arraymeta

import (
	"bytes"
	"fmt"
	"sort"

	"github.com/tileflight/tileflight/format/datatype"
	"github.com/tileflight/tileflight/format/gentile"
	"github.com/tileflight/tileflight/format/wire"
)

// Value is one metadata value: Num values of Type, little-endian, in Raw
// (len(Raw) == Num * Type.Size()). Num may be 0: TileDB stores an empty
// string that way.
type Value struct {
	Type datatype.Datatype
	Num  uint32
	Raw  []byte
}

// Entry is one record of a metadata file: a put of Value under Key, or,
// when Deleted, the removal of Key.
type Entry struct {
	Key     string
	Deleted bool
	Value   Value
}

// DecodePayload decodes the entries of one metadata tile payload, in file
// order. Keys may repeat; the later entry wins.
func DecodePayload(b []byte) ([]Entry, error) {
	r := wire.NewReader(b)
	var out []Entry
	for i := 0; r.Len() > 0; i++ {
		var e Entry
		klen := r.Uint32("key length")
		key := r.BytesU64(uint64(klen), "key")
		del := r.Uint8("deletion flag")
		if err := r.Err(); err != nil {
			return nil, fmt.Errorf("array metadata entry %d: %w", i, err)
		}
		e.Key = string(key)
		switch del {
		case 0:
		case 1:
			e.Deleted = true
			out = append(out, e)
			continue
		default:
			return nil, fmt.Errorf("array metadata entry %d (key %q): %w: deletion flag %d", i, e.Key, wire.ErrCorrupt, del)
		}
		t := datatype.Datatype(r.Uint8("value type"))
		num := r.Uint32("number of values")
		if err := r.Err(); err != nil {
			return nil, fmt.Errorf("array metadata entry %d (key %q): %w", i, e.Key, err)
		}
		if !t.Valid() || t.Size() == 0 {
			return nil, fmt.Errorf("array metadata entry %d (key %q): %w: value type %d", i, e.Key, wire.ErrCorrupt, uint8(t))
		}
		// At most 2^32 * 8 bytes, so no overflow; BytesU64 slices the
		// input without allocating, so a forged count costs nothing.
		raw := r.BytesU64(uint64(num)*uint64(t.Size()), "value")
		if err := r.Err(); err != nil {
			return nil, fmt.Errorf("array metadata entry %d (key %q): %d values of %s: %w", i, e.Key, num, t, err)
		}
		e.Value = Value{Type: t, Num: num, Raw: raw}
		out = append(out, e)
	}
	return out, nil
}

// EncodePayload serializes entries the way TileDB does: in byte order of
// the keys, each key once. The result is byte-identical to the payload
// TileDB writes for the same entries. Entries are not modified.
func EncodePayload(entries []Entry) ([]byte, error) {
	es := append([]Entry(nil), entries...)
	sort.SliceStable(es, func(i, j int) bool { return es[i].Key < es[j].Key })
	w := wire.NewWriter(nil)
	for i, e := range es {
		if i > 0 && es[i-1].Key == e.Key {
			return nil, fmt.Errorf("array metadata: key %q given twice", e.Key)
		}
		if uint64(len(e.Key)) > 0xFFFFFFFF {
			return nil, fmt.Errorf("array metadata: key of %d bytes is too long", len(e.Key))
		}
		w.Uint32(uint32(len(e.Key)))
		w.String(e.Key)
		if e.Deleted {
			w.Uint8(1)
			continue
		}
		if err := e.Value.check(); err != nil {
			return nil, fmt.Errorf("array metadata: key %q: %w", e.Key, err)
		}
		w.Uint8(0)
		w.Uint8(uint8(e.Value.Type))
		w.Uint32(e.Value.Num)
		w.Write(e.Value.Raw)
	}
	return w.Bytes(), nil
}

func (v Value) check() error {
	if !v.Type.Valid() || v.Type.Size() == 0 {
		return fmt.Errorf("invalid value type %d", uint8(v.Type))
	}
	if v.Type == datatype.Any {
		return fmt.Errorf("value type ANY is not allowed")
	}
	if uint64(len(v.Raw)) != uint64(v.Num)*uint64(v.Type.Size()) {
		return fmt.Errorf("%d values of %s need %d bytes, have %d", v.Num, v.Type, uint64(v.Num)*uint64(v.Type.Size()), len(v.Raw))
	}
	return nil
}

// DecodeFile decodes a whole metadata file: one generic tile (TileDB
// writes exactly one) whose payload holds the entries.
func DecodeFile(b []byte) ([]Entry, error) { return DecodeFileWith(b, nil) }

// DecodeFileWith is DecodeFile with the generic tile codec of an encrypted
// array (nil: unencrypted).
func DecodeFileWith(b []byte, u gentile.Unfilterer) ([]Entry, error) {
	if len(b) == 0 {
		// TileDB never writes an empty metadata file (and refuses to open
		// one): it is a file truncated to nothing, not "no keys".
		return nil, fmt.Errorf("%w: array metadata file: empty (at least one generic tile expected)", wire.ErrTruncated)
	}
	tiles, err := gentile.DecodeAll(b, u)
	if err != nil {
		return nil, fmt.Errorf("array metadata file: %w", err)
	}
	var out []Entry
	for i, t := range tiles {
		es, err := DecodePayload(t)
		if err != nil {
			return nil, fmt.Errorf("array metadata file: tile %d: %w", i, err)
		}
		out = append(out, es...)
	}
	return out, nil
}

// EncodeFile writes entries as a metadata file of the given array format
// version. TileDB writes no file at all when there is nothing to write, so
// for no entries EncodeFile returns nil and the caller should write
// nothing.
func EncodeFile(entries []Entry, version uint32) ([]byte, error) {
	if len(entries) == 0 {
		return nil, nil
	}
	p, err := EncodePayload(entries)
	if err != nil {
		return nil, err
	}
	return gentile.Encode(p, version, nil)
}

// Equal reports whether two values are the same type, count and bytes.
func (v Value) Equal(o Value) bool {
	return v.Type == o.Type && v.Num == o.Num && bytes.Equal(v.Raw, o.Raw)
}
