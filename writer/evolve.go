package writer

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/tileflight/tileflight/errkind"
	"github.com/tileflight/tileflight/format/names"
	"github.com/tileflight/tileflight/format/schema"
	"github.com/tileflight/tileflight/storage"
)

// EvolveSchema writes what TileDB's ArraySchemaEvolution writes: a new
// schema file __schema/__t_t_<uuid> (t: the evolution's timestamp, 0 =
// now), the newest schema with the attributes of drop removed and those
// of addJSON (attribute objects of the schema JSON, docs/protocol.md, "Schema JSON")
// appended. Fragments keep naming the schema they were written with, so
// reads at any time see them through their own schema; a read with the
// new schema shows added attributes' fill values in older fragments.
// It is one object, so it is atomic. It returns the new schema.
func EvolveSchema(ctx context.Context, st storage.Store, dir string, addJSON []json.RawMessage, drop []string, t uint64, opt ArrayOptions) (*schema.ArraySchema, error) {
	if len(addJSON) == 0 && len(drop) == 0 {
		return nil, invalidf("evolve schema of %q: nothing to add or drop", dir)
	}
	old, err := LoadSchemaWith(ctx, st, dir, opt)
	if err != nil {
		return nil, err
	}
	ns := *old
	ns.Attributes = nil
	dropSet := map[string]bool{}
	for _, d := range drop {
		if dropSet[d] {
			return nil, invalidf("evolve schema of %q: attribute %q dropped twice", dir, d)
		}
		dropSet[d] = true
		if _, ok := old.FieldByName(d); !ok || old.DimensionIndex(d) >= 0 {
			what := "no attribute"
			if old.DimensionIndex(d) >= 0 {
				what = "a dimension, which cannot be dropped:"
			}
			return nil, invalidf("evolve schema of %q: %s %q", dir, what, d)
		}
	}
	for _, a := range old.Attributes {
		if !dropSet[a.Name] {
			ns.Attributes = append(ns.Attributes, a)
		}
	}
	if len(addJSON) > 0 {
		added, err := attributesFromJSON(old, addJSON)
		if err != nil {
			return nil, errkind.Wrap(errkind.InvalidArgument, fmt.Errorf("evolve schema of %q: add_attributes: %w", dir, err))
		}
		for _, a := range added {
			if _, ok := ns.FieldByName(a.Name); ok {
				return nil, invalidf("evolve schema of %q: attribute %q: the array already has a field of that name", dir, a.Name)
			}
			ns.Attributes = append(ns.Attributes, a)
		}
	}
	if len(ns.Attributes) == 0 {
		return nil, invalidf("evolve schema of %q: the schema would have no attribute left", dir)
	}
	ns.Version = schema.CurrentVersion
	if err := ns.Validate(); err != nil {
		return nil, errkind.Wrap(errkind.InvalidArgument, fmt.Errorf("evolve schema of %q: %w", dir, err))
	}
	p, err := schema.Encode(&ns)
	if err != nil {
		return nil, errkind.Wrap(errkind.InvalidArgument, fmt.Errorf("evolve schema of %q: %w", dir, err))
	}
	b, err := encodeGeneric(p, ns.Version, opt.EncryptionKey)
	if err != nil {
		return nil, err
	}
	n := names.New(t, t, 0)
	if err := st.Put(ctx, storage.Join(dir, names.SchemaKey(n)), b); err != nil {
		return nil, fmt.Errorf("evolve schema of %q: %w", dir, err)
	}
	ns.Name = n.String()
	return &ns, nil
}

// attributesFromJSON decodes attribute objects of the schema JSON, with
// TileDB's defaults, by decoding them in a schema of old's dimensions.
func attributesFromJSON(old *schema.ArraySchema, add []json.RawMessage) ([]schema.Attribute, error) {
	js, err := schema.ToJSON(old)
	if err != nil {
		return nil, err
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(js, &obj); err != nil {
		return nil, err
	}
	list, err := json.Marshal(add)
	if err != nil {
		return nil, err
	}
	obj["attributes"] = list
	for _, k := range []string{"enumerations"} {
		delete(obj, k)
	}
	b, err := json.Marshal(obj)
	if err != nil {
		return nil, err
	}
	s, err := schema.FromJSON(b)
	if err != nil {
		return nil, err
	}
	for _, a := range s.Attributes {
		if strings.HasPrefix(a.Name, "__") {
			return nil, fmt.Errorf("attribute %q: names starting with __ are TileDB's", a.Name)
		}
	}
	return s.Attributes, nil
}
