package schema

import (
	"fmt"
	"math"
	"strings"

	"github.com/tileflight/tileflight/errkind"
	"github.com/tileflight/tileflight/format/datatype"
	"github.com/tileflight/tileflight/format/pipeline"
)

// ErrInvalid is wrapped by every Validate error.
// Kind: Internal until a caller wraps it with the kind it knows
// (errkind.Fallback): whether the user or the stored data is at fault.
var ErrInvalid error = errkind.New(errkind.Internal, errkind.Fallback, "invalid array schema")

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalid, fmt.Sprintf(format, args...))
}

// Validate reports what TileDB would refuse when creating an array with s,
// so that create_array fails up front with a message naming the field.
func (s *ArraySchema) Validate() error {
	if s.Type > Sparse {
		return invalid("array type %d", s.Type)
	}
	if len(s.Dimensions) == 0 {
		return invalid("no dimensions")
	}
	switch s.TileOrder {
	case RowMajor, ColMajor:
	default:
		return invalid("tile_order %s: want row-major or col-major", s.TileOrder)
	}
	switch s.CellOrder {
	case RowMajor, ColMajor:
	case Hilbert:
		if s.Type == Dense {
			return invalid("cell_order hilbert: only sparse arrays may use Hilbert order")
		}
		if len(s.Dimensions) > MaxHilbertDims {
			return invalid("cell_order hilbert: at most %d dimensions", MaxHilbertDims)
		}
	default:
		return invalid("cell_order %s: want row-major, col-major or hilbert", s.CellOrder)
	}
	if s.Type == Sparse && s.Capacity == 0 {
		return invalid("capacity: sparse arrays need a capacity above 0")
	}
	if s.Type == Dense {
		if s.AllowsDups {
			return invalid("allows_duplicates: dense arrays cannot allow duplicates")
		}
		if len(s.Attributes) == 0 {
			return invalid("attributes: dense arrays need at least one attribute")
		}
		t0 := s.Dimensions[0].Type
		for _, d := range s.Dimensions {
			if d.Type != t0 {
				return invalid("dimension %q: dense arrays need every dimension of one type (%s, not %s)", d.Name, t0, d.Type)
			}
			if !d.Type.IsInteger() || d.Type == datatype.Bool {
				return invalid("dimension %q: dense arrays need integer or datetime dimensions, not %s", d.Name, d.Type)
			}
		}
	}
	names := map[string]string{}
	unique := func(kind, name string) error {
		if name == "" {
			return invalid("%s: empty name", kind)
		}
		if prev, ok := names[name]; ok {
			return invalid("%s %q: name already used by a %s", kind, name, prev)
		}
		names[name] = kind
		return nil
	}
	for i := range s.Dimensions {
		d := &s.Dimensions[i]
		if err := unique("dimension", d.Name); err != nil {
			return err
		}
		if err := validateDimension(d, s.CellOrder); err != nil {
			return err
		}
	}
	for i := range s.Attributes {
		a := &s.Attributes[i]
		if err := unique("attribute", a.Name); err != nil {
			return err
		}
		if strings.HasPrefix(a.Name, "__") {
			return invalid("attribute %q: names starting with \"__\" are reserved", a.Name)
		}
		if err := s.validateAttribute(a); err != nil {
			return err
		}
	}
	for _, l := range s.Labels {
		if err := unique("dimension label", l.Name); err != nil {
			return err
		}
		if int(l.DimIndex) >= len(s.Dimensions) {
			return invalid("dimension label %q: dimension index %d out of range", l.Name, l.DimIndex)
		}
	}
	seen := map[string]bool{}
	for _, e := range s.Enumerations {
		if e.Name == "" || e.PathName == "" {
			return invalid("enumeration %q: empty name or file name", e.Name)
		}
		if seen[e.Name] {
			return invalid("enumeration %q: defined twice", e.Name)
		}
		seen[e.Name] = true
		if e.Enum != nil {
			if err := e.Enum.check(); err != nil {
				return invalid("enumeration %q: %v", e.Name, err)
			}
		}
	}
	if err := checkPipeline("coords_filters", s.CoordsFilters, datatype.Uint64); err != nil {
		return err
	}
	for i := range s.Dimensions {
		d := &s.Dimensions[i]
		if d.Filters.Empty() && d.Type.IsFloat() && s.CoordsFilters.Has(pipeline.DoubleDelta) {
			return invalid("dimension %q: a float dimension cannot inherit coords_filters with double_delta", d.Name)
		}
		if d.Filters.Empty() && d.IsVar() && len(s.CoordsFilters.Filters) > 1 {
			for _, ft := range []pipeline.FilterType{pipeline.RLE, pipeline.Dictionary} {
				if s.CoordsFilters.Has(ft) && s.CoordsFilters.Filters[0].Type != ft {
					return invalid("coords_filters: %s must come first when it filters the string dimension %q", ft, d.Name)
				}
			}
		}
	}
	if err := checkPipeline("offsets_filters", s.OffsetsFilters, datatype.Uint64); err != nil {
		return err
	}
	if err := checkPipeline("validity_filters", s.ValidityFilters, datatype.Uint8); err != nil {
		return err
	}
	if err := s.validateWebP(); err != nil {
		return err
	}
	if s.Type == Sparse || len(s.Dimensions) != 1 {
		for _, a := range s.Attributes {
			if a.Order != UnorderedData {
				return invalid("attribute %q: ordered attributes need a dense array with one dimension", a.Name)
			}
		}
	}
	if cd := s.CurrentDomain; cd != nil && !cd.Empty {
		if err := s.validateCurrentDomain(cd); err != nil {
			return err
		}
	}
	return nil
}

func validateDimension(d *Dimension, cellOrder Layout) error {
	switch {
	case !d.Type.Valid():
		return invalid("dimension %q: datatype %d", d.Name, d.Type)
	case d.Type == datatype.StringASCII:
		if d.CellValNum != VarNum {
			return invalid("dimension %q: string_ascii dimensions must be var-sized", d.Name)
		}
		if d.Domain != nil || d.TileExtent != nil {
			return invalid("dimension %q: string dimensions take no domain or tile extent", d.Name)
		}
		return checkPipeline("dimension "+quote(d.Name)+" filters", d.Filters, d.Type)
	case d.Type.IsByteLike() || d.Type == datatype.Bool || d.Type.IsString():
		return invalid("dimension %q: %s is not a valid dimension type", d.Name, d.Type)
	}
	if d.CellValNum != 1 {
		return invalid("dimension %q: cell_val_num must be 1", d.Name)
	}
	if len(d.Domain) != 2*d.Type.Size() {
		return invalid("dimension %q: domain missing", d.Name)
	}
	if d.Type.IsFloat() {
		lo, hi, _ := d.DomainFloat64()
		if math.IsNaN(lo) || math.IsNaN(hi) || math.IsInf(lo, 0) || math.IsInf(hi, 0) {
			return invalid("dimension %q: domain bounds must be finite", d.Name)
		}
		if hi < lo {
			return invalid("dimension %q: domain upper bound %v below lower bound %v", d.Name, hi, lo)
		}
		if d.TileExtent != nil {
			te, _ := d.TileExtentFloat64()
			if !(te > 0) {
				return invalid("dimension %q: tile extent must be above 0", d.Name)
			}
			if te > hi-lo+1 {
				return invalid("dimension %q: tile extent %v exceeds the domain range [%v, %v]", d.Name, te, lo, hi)
			}
		}
	} else {
		signed := d.Type.IsSigned()
		var rng uint64 // hi - lo, computed without overflow
		if signed {
			lo, hi, _ := d.DomainInt64()
			if hi < lo {
				return invalid("dimension %q: domain upper bound %d below lower bound %d", d.Name, hi, lo)
			}
			rng = uint64(hi) - uint64(lo)
		} else {
			lo, hi, _ := d.DomainUint64()
			if hi < lo {
				return invalid("dimension %q: domain upper bound %d below lower bound %d", d.Name, hi, lo)
			}
			rng = hi - lo
		}
		bits := 8 * d.Type.Size()
		if bits == 64 && rng == math.MaxUint64 || bits < 64 && rng == (uint64(1)<<bits)-1 {
			return invalid("dimension %q: the domain may not span every value of %s", d.Name, d.Type)
		}
		if d.TileExtent != nil {
			te, _ := d.TileExtentUint64()
			if signed && AsInt64(d.Type, d.TileExtent) <= 0 || te == 0 {
				return invalid("dimension %q: tile extent must be above 0", d.Name)
			}
			if te > rng+1 {
				return invalid("dimension %q: tile extent %d exceeds the domain range", d.Name, te)
			}
			if err := checkExtentFloor(d, rng, te); err != nil {
				return err
			}
		}
	}
	return checkPipeline("dimension "+quote(d.Name)+" filters", d.Filters, d.Type)
}

// checkExtentFloor refuses domains whose last tile, expanded to a whole tile
// extent, would pass the largest 64-bit value (TileDB's rule; dense tiling
// computes tile bounds in 64 bits).
func checkExtentFloor(d *Dimension, rng, te uint64) error {
	if (rng+1)%te == 0 {
		return nil
	}
	steps := (rng / te) * te // last tile start, as an offset from lo
	if d.Type.IsSigned() {
		lo, _, _ := d.DomainInt64()
		start := int64(uint64(lo) + steps) // within [lo, hi], so no overflow
		if start > math.MaxInt64-int64(te-1) {
			return errExtentFloor(d)
		}
		return nil
	}
	lo, _, _ := d.DomainUint64()
	if lo+steps > math.MaxUint64-(te-1) {
		return errExtentFloor(d)
	}
	return nil
}

func errExtentFloor(d *Dimension) error {
	return invalid("dimension %q: the domain's last tile would pass the largest %s; lower the upper bound by one tile extent", d.Name, d.Type)
}

func quote(s string) string { return fmt.Sprintf("%q", s) }

func (s *ArraySchema) validateAttribute(a *Attribute) error {
	if !a.Type.Valid() || a.Type == datatype.Any {
		return invalid("attribute %q: datatype %s", a.Name, a.Type)
	}
	if a.CellValNum == 0 {
		return invalid("attribute %q: cell_val_num must be at least 1", a.Name)
	}
	if a.Order != UnorderedData && (a.IsVar() && !a.Type.IsString() || a.CellValNum != 1 && !a.IsVar()) {
		return invalid("attribute %q: ordered attributes must hold one value per cell", a.Name)
	}
	if a.Order > DecreasingData {
		return invalid("attribute %q: order %d", a.Name, a.Order)
	}
	if s.Version >= vFill {
		want := cellSize(a.Type, a.CellValNum)
		if a.IsVar() {
			if len(a.FillValue) == 0 {
				return invalid("attribute %q: empty fill value", a.Name)
			}
		} else if uint64(len(a.FillValue)) != want {
			return invalid("attribute %q: fill value has %d bytes, a cell has %d", a.Name, len(a.FillValue), want)
		}
	}
	if a.EnumerationName != "" {
		if s.EnumerationByName(a.EnumerationName) == nil {
			return invalid("attribute %q: unknown enumeration %q", a.Name, a.EnumerationName)
		}
		if !a.Type.IsInteger() || a.Type.IsDatetime() || a.Type.IsTime() || a.Type == datatype.Bool || a.CellValNum != 1 {
			return invalid("attribute %q: an attribute with an enumeration must be a single integer per cell, not %s", a.Name, a.Type)
		}
	}
	return checkPipeline("attribute "+quote(a.Name)+" filters", a.Filters, a.Type)
}

// checkPipeline applies the per-filter input checks TileDB makes when a
// pipeline is attached to data of type t.
func checkPipeline(what string, p pipeline.Pipeline, t datatype.Datatype) error {
	for i, f := range p.Filters {
		switch f.Type {
		case pipeline.AES256GCM, pipeline.Deprecated:
			return invalid("%s: filter %d: %s cannot be set in a schema", what, i, f.Type)
		case pipeline.ScaleFloat:
			if f.ByteWidth != 1 && f.ByteWidth != 2 && f.ByteWidth != 4 && f.ByteWidth != 8 {
				return invalid("%s: scale_float byte_width %d: want 1, 2, 4 or 8", what, f.ByteWidth)
			}
			if i == 0 && !t.IsFloat() {
				return invalid("%s: scale_float needs float input, not %s", what, t)
			}
		case pipeline.Delta, pipeline.DoubleDelta:
			if f.Reinterpret != datatype.Any && !f.Reinterpret.Valid() {
				return invalid("%s: %s reinterpret_datatype %d", what, f.Type, f.Reinterpret)
			}
			if i == 0 && t.IsFloat() && f.Reinterpret == datatype.Any {
				return invalid("%s: %s cannot filter %s data without a reinterpret_datatype", what, f.Type, t)
			}
		case pipeline.WebP:
			if f.WebPFormat > pipeline.WebPBGRA {
				return invalid("%s: webp format %d", what, f.WebPFormat)
			}
			if f.WebPQuality < 0 || f.WebPQuality > 100 {
				return invalid("%s: webp quality %v: want 0..100", what, f.WebPQuality)
			}
		default:
			if _, ok := pipeline.CompressorFor(f.Type); !ok && f.Type > pipeline.Delta {
				return invalid("%s: filter %d: unknown type %d", what, i, f.Type)
			}
		}
	}
	return nil
}

func (s *ArraySchema) validateWebP() error {
	var uses bool
	for _, a := range s.Attributes {
		if a.Filters.Has(pipeline.WebP) {
			uses = true
			if a.Type != datatype.Uint8 {
				return invalid("attribute %q: the webp filter needs uint8 data", a.Name)
			}
		}
	}
	if !uses {
		return nil
	}
	if s.Type != Dense {
		return invalid("webp filter: only dense arrays")
	}
	if len(s.Dimensions) != 2 || s.Dimensions[0].Type != s.Dimensions[1].Type || !s.Dimensions[0].Type.IsInteger() {
		return invalid("webp filter: needs exactly two integer dimensions of one type (y, x)")
	}
	return nil
}

func (s *ArraySchema) validateCurrentDomain(cd *CurrentDomain) error {
	if cd.Type != NDRectangle {
		return invalid("current_domain: type %d", cd.Type)
	}
	if len(cd.Ranges) != len(s.Dimensions) {
		return invalid("current_domain: %d ranges for %d dimensions", len(cd.Ranges), len(s.Dimensions))
	}
	for i, r := range cd.Ranges {
		d := &s.Dimensions[i]
		if d.IsVar() {
			if string(r.End) < string(r.Start) {
				return invalid("current_domain: dimension %q: end %q before start %q", d.Name, r.End, r.Start)
			}
			continue
		}
		if len(r.Start) != d.Type.Size() || len(r.End) != d.Type.Size() {
			return invalid("current_domain: dimension %q: bounds must be one %s each", d.Name, d.Type)
		}
		if less(d.Type, r.End, r.Start) {
			return invalid("current_domain: dimension %q: end below start", d.Name)
		}
		if less(d.Type, r.Start, d.Lo()) || less(d.Type, d.Hi(), r.End) {
			return invalid("current_domain: dimension %q: [%s, %s] is outside the domain [%s, %s]", d.Name,
				FormatValue(d.Type, r.Start), FormatValue(d.Type, r.End), FormatValue(d.Type, d.Lo()), FormatValue(d.Type, d.Hi()))
		}
	}
	return nil
}

// less compares two values of a numeric type.
func less(t datatype.Datatype, a, b []byte) bool {
	switch {
	case t.IsFloat():
		return AsFloat64(t, a) < AsFloat64(t, b)
	case t.IsSigned():
		return AsInt64(t, a) < AsInt64(t, b)
	}
	return AsUint64(t, a) < AsUint64(t, b)
}
