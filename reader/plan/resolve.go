package plan

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/tileflight/tileflight/errkind"
	"github.com/tileflight/tileflight/format/datatype"
	"github.com/tileflight/tileflight/format/fragmeta"
	"github.com/tileflight/tileflight/format/schema"
	"github.com/tileflight/tileflight/query"
	"github.com/tileflight/tileflight/query/cond"
	"github.com/tileflight/tileflight/tdbarray"
)

// Resolve checks q against the opened array a and types its subarray.
func Resolve(a *tdbarray.Array, q *query.Query) (*Plan, error) {
	s := a.Schema
	p := &Plan{Array: a, Query: q, BatchRows: q.BatchRows, Limit: q.Limit}
	if p.BatchRows <= 0 {
		p.BatchRows = query.DefaultBatchRows
	}
	if p.Limit < 0 {
		p.Limit = -1
	}
	if q.Columns == nil {
		for _, d := range s.Dimensions {
			p.Columns = append(p.Columns, d.Name)
		}
		for _, at := range s.Attributes {
			p.Columns = append(p.Columns, at.Name)
		}
	} else {
		for _, c := range q.Columns {
			if _, ok := s.FieldByName(c); !ok {
				return nil, errkind.Errorf(errkind.InvalidArgument, "array %s: no column %q (columns: %s)", q.Array, c, strings.Join(fieldNames(s), ", "))
			}
		}
		p.Columns = append([]string(nil), q.Columns...)
	}

	if q.Filter != "" {
		cs := s
		if a.B2ND != nil {
			// The condition binds against the typed fields of the dtype.
			cs = B2NDTypedSchema(a)
		}
		c, err := cond.Compile(q.Filter, cs)
		if err != nil {
			return nil, fmt.Errorf("array %s: %w", q.Array, err)
		}
		p.Cond = c
	}

	switch q.Layout {
	case query.LayoutDefault:
		p.Layout = query.LayoutRowMajor
		if !s.IsDense() {
			p.Layout = query.LayoutUnordered
		}
	case query.LayoutRowMajor, query.LayoutColMajor, query.LayoutGlobal, query.LayoutUnordered:
		p.Layout = q.Layout
	default:
		return nil, errkind.Errorf(errkind.InvalidArgument, "array %s: layout %q is not one of row-major, col-major, global, unordered", q.Array, q.Layout)
	}

	p.Subarray = make(Subarray, len(s.Dimensions))
	p.Given = make([]bool, len(s.Dimensions))
	for _, dr := range q.Subarray {
		i := s.DimensionIndex(dr.Dim)
		if i < 0 {
			var dims []string
			for _, d := range s.Dimensions {
				dims = append(dims, d.Name)
			}
			return nil, errkind.Errorf(errkind.InvalidArgument, "array %s: subarray: no dimension %q (dimensions: %s)", q.Array, dr.Dim, strings.Join(dims, ", "))
		}
		d := &s.Dimensions[i]
		rs := make([]Range, 0, len(dr.Ranges))
		for k, r := range dr.Ranges {
			rr, err := resolveRange(s, i, r)
			if err != nil {
				return nil, errkind.Errorf(errkind.InvalidArgument, "array %s: subarray: dimension %q: range %d %s: %v", q.Array, d.Name, k, formatQueryRange(r), err)
			}
			rs = append(rs, rr)
		}
		p.Subarray[i] = rs
		p.Given[i] = true
	}
	ned := NonEmptyDomain(a)
	for i := range s.Dimensions {
		if p.Given[i] {
			continue
		}
		if ned == nil {
			p.Empty = true
			d := &s.Dimensions[i]
			if d.IsVar() {
				p.Subarray[i] = []Range{{Lo: []byte{}, Hi: []byte{}}}
			} else {
				p.Subarray[i] = []Range{{Lo: clone(d.Lo()), Hi: clone(d.Hi())}}
			}
			continue
		}
		p.Subarray[i] = []Range{{Lo: clone(ned[i].Start), Hi: clone(ned[i].End)}}
	}
	return p, nil
}

func clone(b []byte) []byte { return append([]byte{}, b...) }

func fieldNames(s *schema.ArraySchema) []string {
	var out []string
	for _, f := range s.Fields() {
		out = append(out, f.Name)
	}
	return out
}

func formatQueryRange(r query.Range) string {
	v := func(x query.Value) string {
		if x.IsStr {
			return strconv.Quote(x.Str)
		}
		return string(x.Num)
	}
	return "[" + v(r.Lo) + ", " + v(r.Hi) + "]"
}

// NonEmptyDomain is the union of the non-empty domains of a's visible
// fragments, one range per dimension; nil when no fragment has one.
func NonEmptyDomain(a *tdbarray.Array) fragmeta.MBR {
	var out fragmeta.MBR
	dims := a.Schema.Dimensions
	if a.B2ND != nil {
		// Every cell of a .b2nd exists (chunks never written read as
		// their special values).
		for i := range dims {
			if dims[i].Lo() == nil {
				return nil
			}
			out = append(out, fragmeta.Range{Start: dims[i].Lo(), End: dims[i].Hi()})
		}
		return out
	}
	for _, f := range a.Fragments {
		ned := f.NonEmptyDomain()
		if len(ned) != len(dims) {
			continue
		}
		if out == nil {
			out = make(fragmeta.MBR, len(dims))
			for i, r := range ned {
				out[i] = fragmeta.Range{Start: r.Start, End: r.End}
			}
			continue
		}
		for i, r := range ned {
			fd := dimField(&dims[i])
			if fragmeta.Compare(fd, r.Start, out[i].Start) < 0 {
				out[i].Start = r.Start
			}
			if fragmeta.Compare(fd, r.End, out[i].End) > 0 {
				out[i].End = r.End
			}
		}
	}
	return out
}

func dimField(d *schema.Dimension) fragmeta.Field {
	return fragmeta.Field{Name: d.Name, Type: d.Type, CellValNum: d.CellValNum}
}

func resolveRange(s *schema.ArraySchema, i int, r query.Range) (Range, error) {
	d := &s.Dimensions[i]
	lo, err := ParseValue(d, r.Lo)
	if err != nil {
		return Range{}, fmt.Errorf("low bound: %w", err)
	}
	hi, err := ParseValue(d, r.Hi)
	if err != nil {
		return Range{}, fmt.Errorf("high bound: %w", err)
	}
	fd := dimField(d)
	if fragmeta.Compare(fd, lo, hi) > 0 {
		return Range{}, errors.New("low bound is above the high bound")
	}
	if d.IsVar() {
		return Range{Lo: lo, Hi: hi}, nil
	}
	if dlo, dhi := d.Lo(), d.Hi(); dlo != nil {
		if fragmeta.Compare(fd, lo, dlo) < 0 || fragmeta.Compare(fd, hi, dhi) > 0 {
			return Range{}, fmt.Errorf("is outside the domain [%s, %s]", schema.FormatValue(d.Type, dlo), schema.FormatValue(d.Type, dhi))
		}
	}
	if cd := s.CurrentDomain; cd != nil && !cd.Empty && i < len(cd.Ranges) {
		cr := cd.Ranges[i]
		if len(cr.Start) == len(lo) && (fragmeta.Compare(fd, lo, cr.Start) < 0 || fragmeta.Compare(fd, hi, cr.End) > 0) {
			return Range{}, fmt.Errorf("is outside the current domain [%s, %s]", schema.FormatValue(d.Type, cr.Start), schema.FormatValue(d.Type, cr.End))
		}
	}
	return Range{Lo: lo, Hi: hi}, nil
}

// ParseValue converts one bound of a query range to the little-endian
// bytes of dimension d's datatype (the string's bytes for string
// dimensions). Integers must be exact and fit the type; datetimes and
// times are integers in the dimension's unit.
func ParseValue(d *schema.Dimension, v query.Value) ([]byte, error) {
	if d.IsVar() {
		if !v.IsStr {
			return nil, fmt.Errorf("want a string for %s dimension, got %s", d.Type, v.Num)
		}
		return []byte(v.Str), nil
	}
	if v.IsStr {
		return nil, fmt.Errorf("want a number for %s dimension, got the string %q", d.Type, v.Str)
	}
	t := d.Type
	size := t.Size()
	out := make([]byte, size)
	s := string(v.Num)
	switch {
	case t == datatype.Float32:
		f, err := strconv.ParseFloat(s, 32)
		if err != nil || math.IsInf(f, 0) {
			return nil, fmt.Errorf("%s does not fit float32", s)
		}
		binary.LittleEndian.PutUint32(out, math.Float32bits(float32(f)))
		return out, nil
	case t == datatype.Float64:
		f, err := strconv.ParseFloat(s, 64)
		if err != nil || math.IsInf(f, 0) {
			return nil, fmt.Errorf("%s does not fit float64", s)
		}
		binary.LittleEndian.PutUint64(out, math.Float64bits(f))
		return out, nil
	case t.IsInteger() || t.IsDatetime() || t.IsTime():
	default:
		return nil, fmt.Errorf("dimension type %s cannot be sliced", t)
	}
	bitsz := 8 * size
	var u uint64
	if t == datatype.Uint8 || t == datatype.Uint16 || t == datatype.Uint32 || t == datatype.Uint64 {
		x, err := strconv.ParseUint(s, 10, bitsz)
		if err != nil {
			f, ok := integralFloat(s)
			if !ok || f < 0 || f >= math.Ldexp(1, bitsz) {
				return nil, fmt.Errorf("%s is not a %s value", s, t)
			}
			x = uint64(f)
		}
		u = x
	} else {
		x, err := strconv.ParseInt(s, 10, bitsz)
		if err != nil {
			f, ok := integralFloat(s)
			if !ok || f < -math.Ldexp(1, bitsz-1) || f >= math.Ldexp(1, bitsz-1) {
				return nil, fmt.Errorf("%s is not a %s value", s, t)
			}
			x = int64(f)
		}
		u = uint64(x)
	}
	for k := 0; k < size; k++ {
		out[k] = byte(u >> (8 * k))
	}
	return out, nil
}

// integralFloat accepts numbers written like floats ("5.0", "1e3") that
// are exact integers small enough for float64 to hold exactly.
func integralFloat(s string) (float64, bool) {
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || f != math.Trunc(f) || math.Abs(f) > 1<<53 {
		return 0, false
	}
	return f, true
}

// formatValue renders a value of dimension d as a query bound.
func formatValue(d *schema.Dimension, b []byte) query.Value {
	if d.IsVar() {
		return query.Value{Str: string(b), IsStr: true}
	}
	return query.Value{Num: json.Number(schema.FormatValue(d.Type, b))}
}
