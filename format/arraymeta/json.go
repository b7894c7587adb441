package arraymeta

import (
	"fmt"
	"strings"
)

// tiledb-py stores a numpy array under "__np_flat_<key>" (the flattened
// values) and, for more than one dimension, "__np_shape_<key>" (INT64
// shape), and shows both as one entry <key>. These are conventions of the
// Python package, not of the format, but they are what a TileDB user sees.
const (
	NumpyDataPrefix  = "__np_flat_"
	NumpyShapePrefix = "__np_shape_"
)

// JSONMap returns the metadata map in the JSON form of the get_metadata
// action, keyed as tiledb-py's Array.meta shows it: numpy arrays appear
// under their own key as (nested) lists, their shape keys are hidden, and
// a plain key wins over a numpy array of the same name. Each value is
// otherwise Value.JSON.
func JSONMap(m map[string]Value) (map[string]any, error) {
	out := make(map[string]any, len(m))
	for k, v := range m {
		if strings.HasPrefix(k, NumpyShapePrefix) {
			continue
		}
		if name, ok := strings.CutPrefix(k, NumpyDataPrefix); ok {
			if _, plain := m[name]; plain {
				continue
			}
			j, err := numpyJSON(v, m[NumpyShapePrefix+name], hasKey(m, NumpyShapePrefix+name))
			if err != nil {
				return nil, fmt.Errorf("metadata key %q: %w", name, err)
			}
			out[name] = j
			continue
		}
		j, err := v.JSON()
		if err != nil {
			return nil, fmt.Errorf("metadata key %q: %w", k, err)
		}
		out[k] = j
	}
	return out, nil
}

// RawJSONMap is JSONMap without tiledb-py's numpy conventions: every
// stored key as it is.
func RawJSONMap(m map[string]Value) (map[string]any, error) {
	out := make(map[string]any, len(m))
	for k, v := range m {
		j, err := v.JSON()
		if err != nil {
			return nil, fmt.Errorf("metadata key %q: %w", k, err)
		}
		out[k] = j
	}
	return out, nil
}

func hasKey(m map[string]Value, k string) bool { _, ok := m[k]; return ok }

// numpyJSON renders a numpy array's values as a list (always a list, even
// for one element), nested by shape when one is stored and consistent.
func numpyJSON(v Value, shape Value, hasShape bool) (any, error) {
	if v.IsText() || v.IsBytes() {
		return v.JSON()
	}
	if err := v.sane(); err != nil {
		return nil, err
	}
	items := make([]any, v.Num)
	for i := range items {
		items[i] = v.item(i)
	}
	if !hasShape {
		return items, nil
	}
	dims, err := shape.Int64s()
	if err != nil || len(dims) == 0 || len(dims) > maxNumpyDims {
		return items, nil
	}
	n := int64(1)
	for _, d := range dims {
		if d < 0 || (d > 0 && n > int64(len(items))/d+1) {
			return items, nil
		}
		n *= d
	}
	if n != int64(len(items)) {
		return items, nil // inconsistent: show the flat values
	}
	return reshape(items, dims), nil
}

// maxNumpyDims is numpy's own limit on dimensions; a longer stored shape
// is not one tiledb-py wrote, and would make reshape recurse as deep as the
// file is long.
const maxNumpyDims = 64

func reshape(items []any, dims []int64) any {
	if len(dims) == 1 {
		return items
	}
	step := len(items) / max(int(dims[0]), 1)
	out := make([]any, dims[0])
	for i := range out {
		out[i] = reshape(items[i*step:(i+1)*step], dims[1:])
	}
	return out
}
