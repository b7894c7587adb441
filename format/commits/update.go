package commits

import (
	"fmt"

	"github.com/tileflight/tileflight/format/wire"
)

// UpdateValue is one field assignment of an update commit: the raw bytes of
// the new value in the field's type.
type UpdateValue struct {
	Field string
	Value []byte
}

// Update is the content of an update commit file (.upd): the condition of
// the cells left untouched (TileDB stores the negation of what the user
// selected, as for deletes) and the values to assign. TileDB writes update
// commits as an experimental feature and does not apply them when reading.
type Update struct {
	Condition *Node
	Values    []UpdateValue
}

// minimum bytes per update value: two uint64 sizes.
const minUpdateValueSize = 16

// DecodeUpdate reads an update commit file: a generic tile holding a
// serialized condition followed by the update values.
func DecodeUpdate(file []byte) (*Update, error) {
	payload, err := tilePayload(file)
	if err != nil {
		return nil, fmt.Errorf("update commit: %w", err)
	}
	u, err := DecodeUpdatePayload(payload)
	if err != nil {
		return nil, fmt.Errorf("update commit: %w", err)
	}
	return u, nil
}

// DecodeUpdatePayload reads the payload of an update commit's tile.
func DecodeUpdatePayload(b []byte) (*Update, error) {
	r := wire.NewReader(b)
	u := &Update{Condition: decodeNode(r, 0)}
	cnt := r.Count(8, minUpdateValueSize, "update values")
	if r.Err() == nil {
		u.Values = make([]UpdateValue, 0, cnt)
	}
	for i := 0; i < cnt && r.Err() == nil; i++ {
		var v UpdateValue
		v.Field = string(r.BytesU64(r.Uint64("update value: field name size"), "update value: field name"))
		if val := r.BytesU64(r.Uint64("update value: value size"), "update value: value"); len(val) > 0 {
			v.Value = append([]byte(nil), val...)
		}
		u.Values = append(u.Values, v)
	}
	if err := r.Err(); err != nil {
		return nil, err
	}
	if r.Len() != 0 {
		return nil, fmt.Errorf("%w: %d bytes after the update values", wire.ErrCorrupt, r.Len())
	}
	return u, nil
}

// EncodeUpdatePayload serializes an update the way TileDB lays it out in
// the tile of an update commit.
func EncodeUpdatePayload(u *Update) ([]byte, error) {
	w := wire.NewWriter(nil)
	if err := encodeNode(w, u.Condition, 0); err != nil {
		return nil, fmt.Errorf("update commit: %w", err)
	}
	w.Uint64(uint64(len(u.Values)))
	for _, v := range u.Values {
		w.Uint64(uint64(len(v.Field)))
		w.String(v.Field)
		w.Uint64(uint64(len(v.Value)))
		w.Write(v.Value)
	}
	return w.Bytes(), nil
}
