package writer

import (
	"encoding/binary"
	"fmt"
	"math"
	"sort"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/tileflight/tileflight/arrowconv"
	"github.com/tileflight/tileflight/errkind"
	"github.com/tileflight/tileflight/format/datatype"
	"github.com/tileflight/tileflight/format/schema"
)

// col is a validated column: starts has n+1 entries for var fields (the
// last is the end of the values).
type col struct {
	data   []byte
	starts []uint64
	valid  []byte
}

// cell returns the bytes of cell i.
func (c *col) cell(i int, cs int) []byte {
	if c.starts != nil {
		return c.data[c.starts[i]:c.starts[i+1]]
	}
	return c.data[i*cs : (i+1)*cs]
}

// checkColumns validates cols against the schema (attributes, and the
// dimensions when withDims) and returns them decoded with the cell count.
// Every error is InvalidArgument and names the column.
func checkColumns(s *schema.ArraySchema, cols map[string]Column, withDims bool) (map[string]*col, int, error) {
	want := map[string]bool{}
	for _, a := range s.Attributes {
		want[a.Name] = true
	}
	if withDims {
		for _, d := range s.Dimensions {
			want[d.Name] = true
		}
	}
	var extra []string
	for name := range cols {
		if !want[name] {
			extra = append(extra, name)
		}
	}
	if len(extra) > 0 {
		sort.Strings(extra)
		kind := "attribute or dimension"
		if !withDims {
			kind = "attribute (dense writes take attributes only)"
		}
		return nil, 0, invalidf("column %q is not an %s of the array", extra[0], kind)
	}
	out := map[string]*col{}
	n := -1
	check := func(name string, t datatype.Datatype, cvn uint32, nullable, dim bool, enumLen int) error {
		c, ok := cols[name]
		if !ok {
			return invalidf("missing column for %s %q", role(dim), name)
		}
		d := &col{data: c.Data}
		var rows int
		if cvn == schema.VarNum {
			if len(c.Offsets)%8 != 0 {
				return invalidf("column %q: offsets buffer of %d bytes is not whole uint64 values", name, len(c.Offsets))
			}
			rows = len(c.Offsets) / 8
			d.starts = make([]uint64, rows+1)
			prev := uint64(0)
			for i := 0; i < rows; i++ {
				o := binary.LittleEndian.Uint64(c.Offsets[8*i:])
				if (i == 0 && o != 0) || o < prev || o > uint64(len(c.Data)) {
					return invalidf("column %q: offset %d of cell %d is out of order or past the %d value bytes", name, o, i, len(c.Data))
				}
				d.starts[i] = o
				prev = o
			}
			d.starts[rows] = uint64(len(c.Data))
			if rows == 0 && len(c.Data) != 0 {
				return invalidf("column %q: %d value bytes but no offsets", name, len(c.Data))
			}
		} else {
			cs := t.Size() * int(cvn)
			if cs == 0 || len(c.Data)%cs != 0 {
				return invalidf("column %q: %d bytes is not a whole number of %d-byte %s cells", name, len(c.Data), cs, t)
			}
			rows = len(c.Data) / cs
			if c.Offsets != nil {
				return invalidf("column %q: offsets given for a fixed-size %s", name, role(dim))
			}
		}
		if nullable {
			if len(c.Validity) != rows {
				return invalidf("column %q: %d validity bytes for %d cells", name, len(c.Validity), rows)
			}
			d.valid = c.Validity
		} else if c.Validity != nil {
			for i, v := range c.Validity {
				if v == 0 {
					return invalidf("column %q: cell %d is null but the %s is not nullable", name, i, role(dim))
				}
			}
		}
		if n >= 0 && rows != n {
			return invalidf("column %q has %d cells, other columns have %d", name, rows, n)
		}
		n = rows
		if enumLen >= 0 {
			for i := 0; i < rows; i++ {
				if d.valid != nil && d.valid[i] == 0 {
					continue
				}
				v := schema.AsUint64(t, d.data[i*t.Size():])
				if t.IsSigned() && int64(v) < 0 || v >= uint64(enumLen) {
					return invalidf("column %q: cell %d: value %s is not an index of enumeration (%d values)", name, i, schema.FormatValue(t, d.data[i*t.Size():]), enumLen)
				}
			}
		}
		out[name] = d
		return nil
	}
	if withDims {
		for _, d := range s.Dimensions {
			if err := check(d.Name, d.Type, d.CellValNum, false, true, -1); err != nil {
				return nil, 0, err
			}
		}
	}
	for _, a := range s.Attributes {
		el := -1
		if a.EnumerationName != "" {
			if ref := s.EnumerationByName(a.EnumerationName); ref != nil && ref.Enum != nil {
				el = ref.Enum.Len()
			}
		}
		if err := check(a.Name, a.Type, a.CellValNum, a.Nullable, false, el); err != nil {
			return nil, 0, err
		}
	}
	if n < 0 {
		n = 0
	}
	return out, n, nil
}

// checkCoords rejects coordinates outside a dimension's domain (NaN
// included), naming the dimension and the value.
func checkCoords(s *schema.ArraySchema, cols map[string]*col, n int) error {
	for i := range s.Dimensions {
		d := &s.Dimensions[i]
		if d.IsVar() {
			continue
		}
		c := cols[d.Name]
		sz := d.Type.Size()
		lo, hi := d.Lo(), d.Hi()
		bad := -1
		switch {
		case d.Type == datatype.Float32 || d.Type == datatype.Float64:
			l, h := schema.AsFloat64(d.Type, lo), schema.AsFloat64(d.Type, hi)
			for j := 0; j < n; j++ {
				v := schema.AsFloat64(d.Type, c.data[j*sz:])
				if !(v >= l && v <= h) || math.IsNaN(v) {
					bad = j
					break
				}
			}
		case d.Type == datatype.Uint64 || !d.Type.IsSigned():
			l, h := schema.AsUint64(d.Type, lo), schema.AsUint64(d.Type, hi)
			for j := 0; j < n; j++ {
				v := schema.AsUint64(d.Type, c.data[j*sz:])
				if v < l || v > h {
					bad = j
					break
				}
			}
		default:
			l, h := schema.AsInt64(d.Type, lo), schema.AsInt64(d.Type, hi)
			for j := 0; j < n; j++ {
				v := schema.AsInt64(d.Type, c.data[j*sz:])
				if v < l || v > h {
					bad = j
					break
				}
			}
		}
		if bad >= 0 {
			lo, hi, _ := d.DomainStrings()
			return invalidf("dimension %q: coordinate %s (row %d) is outside the domain [%s, %s]",
				d.Name, schema.FormatValue(d.Type, c.data[bad*sz:]), bad, lo, hi)
		}
	}
	return nil
}

// ArrowField describes a schema field for package arrowconv.
func ArrowField(s *schema.ArraySchema, name string) (arrowconv.Field, bool) {
	f, ok := s.FieldByName(name)
	if !ok {
		return arrowconv.Field{}, false
	}
	af := arrowconv.Field{Name: f.Name, Type: f.Type, CellValNum: f.CellValNum, Nullable: f.Nullable}
	if f.Dimension {
		af.Role = arrowconv.Dimension
		return af, true
	}
	a := &s.Attributes[f.Index]
	if a.EnumerationName != "" {
		if ref := s.EnumerationByName(a.EnumerationName); ref != nil && ref.Enum != nil {
			e := ref.Enum
			af.Enumeration = &arrowconv.Enumeration{Name: e.Name, Type: e.Type, CellValNum: e.CellValNum, Ordered: e.Ordered, Data: e.Data, Offsets: e.Offsets}
		}
	}
	return af, true
}

// FromArrow converts the columns of an Arrow record into write columns,
// with the conversions of docs/protocol.md, "Queries, tickets and descriptors" (package arrowconv). Unknown
// columns and type mismatches are InvalidArgument.
func FromArrow(s *schema.ArraySchema, rec arrow.RecordBatch) (map[string]Column, error) {
	out := map[string]Column{}
	for i, f := range rec.Schema().Fields() {
		af, ok := ArrowField(s, f.Name)
		if !ok {
			return nil, invalidf("column %q is not a dimension or attribute of the array", f.Name)
		}
		if _, dup := out[f.Name]; dup {
			return nil, invalidf("column %q appears twice", f.Name)
		}
		data, offs, valid, err := arrowconv.ToTileDB(af, rec.Column(i))
		if err != nil {
			return nil, errkind.Wrap(errkind.InvalidArgument, err)
		}
		out[f.Name] = Column{Data: data, Offsets: offs, Validity: valid}
	}
	return out, nil
}

var _ = fmt.Sprintf
