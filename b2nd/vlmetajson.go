package b2nd

// This file converts vlmeta values (msgpack, as python-blosc2 writes
// them) from and to JSON, for the service's get_metadata/put_metadata.

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"

	"github.com/vmihailenco/msgpack/v5"
)

// VLMetaJSON decodes a's vlmeta to JSON-ready values; a value msgpack
// cannot decode is returned as {"msgpack_base64": ...}, bytes as base64
// strings, non-finite floats as their names.
func (a *Array) VLMetaJSON() (map[string]any, error) {
	vals, err := a.VLMetaValues()
	if err != nil {
		return nil, err
	}
	out := map[string]any{}
	for k, v := range vals {
		var x any
		dec := msgpack.NewDecoder(bytes.NewReader(v))
		dec.SetMapDecoder(func(d *msgpack.Decoder) (any, error) { return d.DecodeUntypedMap() })
		if err := dec.Decode(&x); err != nil {
			out[k] = map[string]string{"msgpack_base64": base64.StdEncoding.EncodeToString(v)}
			continue
		}
		out[k] = jsonable(x)
	}
	return out, nil
}

// VLMetaFromJSON encodes one JSON value as the msgpack bytes of a vlmeta
// value (integers stay integers).
func VLMetaFromJSON(raw []byte) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var x any
	if err := dec.Decode(&x); err != nil {
		return nil, err
	}
	return msgpack.Marshal(fromJSONNumbers(x))
}

func jsonable(x any) any {
	switch v := x.(type) {
	case map[any]any:
		m := map[string]any{}
		for k, e := range v {
			m[fmt.Sprint(k)] = jsonable(e)
		}
		return m
	case map[string]any:
		for k, e := range v {
			v[k] = jsonable(e)
		}
		return v
	case []any:
		for i, e := range v {
			v[i] = jsonable(e)
		}
		return v
	case []byte:
		return base64.StdEncoding.EncodeToString(v)
	case float64:
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return fmt.Sprint(v)
		}
	}
	return x
}

func fromJSONNumbers(x any) any {
	switch v := x.(type) {
	case json.Number:
		if i, err := v.Int64(); err == nil {
			return i
		}
		f, _ := v.Float64()
		return f
	case map[string]any:
		for k, e := range v {
			v[k] = fromJSONNumbers(e)
		}
		return v
	case []any:
		for i, e := range v {
			v[i] = fromJSONNumbers(e)
		}
		return v
	}
	return x
}
