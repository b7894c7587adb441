package plan

import (
	"github.com/tileflight/tileflight/format/datatype"
	"github.com/tileflight/tileflight/format/schema"
	"github.com/tileflight/tileflight/tdbarray"
)

// B2NDTypedSchema is the synthesized dense schema of the .b2nd array a
// with each dtype field that has a TileDB counterpart typed as it (bool,
// signed and unsigned integers, float32 and float64; either byte order:
// readers hand little-endian values to whoever reads them). Other fields
// (float16, complex, datetimes, bytes, strings, void, subarrays) stay opaque bytes:
// a filter or an aggregate over them is refused when it is bound. Filters
// (package query/cond) and aggregates are bound against it.
func B2NDTypedSchema(a *tdbarray.Array) *schema.ArraySchema {
	s := *a.Schema
	s.Attributes = append([]schema.Attribute(nil), a.Schema.Attributes...)
	for i, f := range a.B2ND.Dtype.Fields {
		if i >= len(s.Attributes) {
			break
		}
		if f.Count > 0 {
			continue // a subarray field: a list per cell
		}
		if t, ok := b2ndDatatype(byte(f.Kind), f.Size); ok {
			s.Attributes[i].Type = t
			s.Attributes[i].CellValNum = 1
		}
	}
	return &s
}

func b2ndDatatype(kind byte, size int) (datatype.Datatype, bool) {
	switch kind {
	case 'b':
		return datatype.Bool, size == 1
	case 'i', 'u':
		return datatype.IntOfSize(size, kind == 'i')
	case 'f':
		switch size {
		case 4:
			return datatype.Float32, true
		case 8:
			return datatype.Float64, true
		}
	}
	return 0, false
}
