package schema

import (
	"errors"
	"fmt"

	"github.com/tileflight/tileflight/errkind"
	"github.com/tileflight/tileflight/format/datatype"
	"github.com/tileflight/tileflight/format/gentile"
	"github.com/tileflight/tileflight/format/pipeline"
	"github.com/tileflight/tileflight/format/wire"
)

// ErrUnsupportedVersion is wrapped when a schema is newer than MaxVersion
// (or older than format version 1).
// Kind: Internal until a caller wraps it with the kind it knows
// (errkind.Fallback): whether the user or the stored data is at fault.
var ErrUnsupportedVersion error = errkind.New(errkind.Internal, errkind.Fallback, "unsupported array format version")

// Version thresholds: the format version in which each field appeared.
const (
	vDimTypes     = 5 // per-dimension types, filters, domain size; allows_dups
	vFill         = 6
	vNullable     = 7 // nullable, fill validity, validity filters
	vAttrOrder    = 17
	vLabels       = 18
	vEnumerations = 20
	vCurrentDom   = 22
)

// maxNameLen bounds names and URIs read from files: far above anything TileDB
// writes, well below what would let a corrupt length drive an allocation.
const maxNameLen = 1 << 20

// DecodeFile decodes a whole schema file (a generic tile).
func DecodeFile(b []byte) (*ArraySchema, error) {
	_, payload, _, err := gentile.Decode(b, nil)
	if err != nil {
		return nil, fmt.Errorf("array schema: %w", err)
	}
	return Decode(payload)
}

// EncodeFile encodes s and wraps it in a generic tile the way TileDB stores
// schema files.
func EncodeFile(s *ArraySchema) ([]byte, error) {
	p, err := Encode(s)
	if err != nil {
		return nil, err
	}
	return gentile.Encode(p, s.Version, nil)
}

// Decode reads a schema payload written at any format version 1..MaxVersion.
func Decode(payload []byte) (*ArraySchema, error) {
	s, err := decode(wire.NewReader(payload))
	if err != nil {
		return nil, fmt.Errorf("array schema: %w", err)
	}
	return s, nil
}

func decode(r *wire.Reader) (*ArraySchema, error) {
	s := &ArraySchema{}
	s.Version = r.Uint32("version")
	if r.Err() != nil {
		return nil, r.Err()
	}
	if s.Version < 1 || s.Version > MaxVersion {
		return nil, fmt.Errorf("%w: %d (this build reads 1..%d)", ErrUnsupportedVersion, s.Version, MaxVersion)
	}
	v := s.Version
	if v >= vDimTypes {
		s.AllowsDups = r.Bool("allows_dups")
	}
	s.Type = ArrayType(r.Uint8("array type"))
	s.TileOrder = Layout(r.Uint8("tile order"))
	s.CellOrder = Layout(r.Uint8("cell order"))
	s.Capacity = r.Uint64("capacity")
	if err := r.Err(); err != nil {
		return nil, err
	}
	if s.Type > Sparse {
		return nil, fmt.Errorf("%w: array type %d", wire.ErrCorrupt, s.Type)
	}
	if s.TileOrder > Hilbert || s.CellOrder > Hilbert {
		return nil, fmt.Errorf("%w: tile order %d / cell order %d", wire.ErrCorrupt, s.TileOrder, s.CellOrder)
	}
	var err error
	if s.CoordsFilters, err = pipeline.Decode(r, v); err != nil {
		return nil, fmt.Errorf("coords filters: %w", err)
	}
	if s.OffsetsFilters, err = pipeline.Decode(r, v); err != nil {
		return nil, fmt.Errorf("offsets filters: %w", err)
	}
	if v >= vNullable {
		if s.ValidityFilters, err = pipeline.Decode(r, v); err != nil {
			return nil, fmt.Errorf("validity filters: %w", err)
		}
	}
	if err := decodeDomain(r, s); err != nil {
		return nil, err
	}
	// An attribute takes at least 4+1+4+8 bytes.
	na := r.Count(4, 17, "number of attributes")
	if r.Err() != nil {
		return nil, r.Err()
	}
	s.Attributes = make([]Attribute, 0, na)
	for i := 0; i < na; i++ {
		a, err := decodeAttribute(r, v)
		if err != nil {
			return nil, fmt.Errorf("attribute %d %q: %w", i, a.Name, err)
		}
		s.Attributes = append(s.Attributes, a)
	}
	if v >= vLabels {
		nl := r.Count(4, 30, "number of dimension labels")
		for i := 0; i < nl && r.Err() == nil; i++ {
			s.Labels = append(s.Labels, decodeLabel(r))
		}
		if err := r.Err(); err != nil {
			return nil, fmt.Errorf("dimension labels: %w", err)
		}
		for i, l := range s.Labels {
			if int(l.DimIndex) >= len(s.Dimensions) {
				return nil, fmt.Errorf("dimension label %q: %w: dimension index %d of %d", l.Name, wire.ErrCorrupt, l.DimIndex, len(s.Dimensions))
			}
			if !l.Type.Valid() || l.Order > DecreasingData {
				return nil, fmt.Errorf("dimension label %d %q: %w: type %d order %d", i, l.Name, wire.ErrCorrupt, l.Type, l.Order)
			}
		}
	}
	if v >= vEnumerations {
		ne := r.Count(4, 8, "number of enumerations")
		for i := 0; i < ne && r.Err() == nil; i++ {
			var e EnumerationRef
			e.Name = readString32(r, "enumeration name")
			e.PathName = readString32(r, "enumeration file name")
			s.Enumerations = append(s.Enumerations, e)
		}
		if err := r.Err(); err != nil {
			return nil, fmt.Errorf("enumerations: %w", err)
		}
	}
	if v >= vCurrentDom {
		cd, err := decodeCurrentDomain(r, s.Dimensions)
		if err != nil {
			return nil, fmt.Errorf("current domain: %w", err)
		}
		s.CurrentDomain = cd
	}
	if err := r.Err(); err != nil {
		return nil, err
	}
	if r.Len() != 0 {
		return nil, fmt.Errorf("%w: %d bytes left after the schema", wire.ErrCorrupt, r.Len())
	}
	if err := s.checkDecoded(); err != nil {
		return nil, err
	}
	return s, nil
}

// checkDecoded applies the invariants other packages rely on when they
// index buffers by the schema (TileDB enforces them on load too).
func (s *ArraySchema) checkDecoded() error {
	if len(s.Dimensions) == 0 {
		return fmt.Errorf("%w: no dimensions", wire.ErrCorrupt)
	}
	for _, a := range s.Attributes {
		if a.EnumerationName != "" && s.EnumerationByName(a.EnumerationName) == nil {
			return fmt.Errorf("attribute %q: %w: unknown enumeration %q", a.Name, wire.ErrCorrupt, a.EnumerationName)
		}
	}
	return nil
}

func readString32(r *wire.Reader, what string) string {
	n := r.Uint32(what + " length")
	if r.Err() == nil && n > maxNameLen {
		r.Failf("%s length %d", what, n)
	}
	return string(r.BytesU64(uint64(n), what))
}

func readString64(r *wire.Reader, what string) string {
	n := r.Uint64(what + " length")
	if r.Err() == nil && n > maxNameLen {
		r.Failf("%s length %d", what, n)
	}
	return string(r.BytesU64(n, what))
}

func decodeDomain(r *wire.Reader, s *ArraySchema) error {
	v := s.Version
	var legacyType datatype.Datatype
	if v < vDimTypes {
		legacyType = datatype.Datatype(r.Uint8("domain datatype"))
		if r.Err() == nil && !legacyType.Valid() {
			return fmt.Errorf("domain: %w: datatype %d", wire.ErrCorrupt, legacyType)
		}
	}
	nd := r.Count(4, 6, "number of dimensions")
	if r.Err() != nil {
		return fmt.Errorf("domain: %w", r.Err())
	}
	s.Dimensions = make([]Dimension, 0, nd)
	for i := 0; i < nd; i++ {
		d, err := decodeDimension(r, v, legacyType)
		if err != nil {
			return fmt.Errorf("dimension %d %q: %w", i, d.Name, err)
		}
		s.Dimensions = append(s.Dimensions, d)
	}
	return nil
}

func decodeDimension(r *wire.Reader, v uint32, legacyType datatype.Datatype) (Dimension, error) {
	var d Dimension
	d.Name = readString32(r, "name")
	var domSize uint64
	if v >= vDimTypes {
		d.Type = datatype.Datatype(r.Uint8("datatype"))
		d.CellValNum = r.Uint32("cell_val_num")
		if r.Err() == nil && !d.Type.Valid() {
			return d, fmt.Errorf("%w: datatype %d", wire.ErrCorrupt, d.Type)
		}
		var err error
		if d.Filters, err = pipeline.Decode(r, v); err != nil {
			return d, fmt.Errorf("filters: %w", err)
		}
		domSize = r.Uint64("domain size")
	} else {
		d.Type = legacyType
		d.CellValNum = 1
		if d.Type.IsString() {
			d.CellValNum = VarNum
		}
		domSize = 2 * uint64(d.Type.Size())
	}
	if r.Err() != nil {
		return d, r.Err()
	}
	if domSize != 0 {
		if d.IsVar() || domSize != 2*uint64(d.Type.Size()) {
			return d, fmt.Errorf("%w: domain size %d for a %s dimension", wire.ErrCorrupt, domSize, d.Type)
		}
		d.Domain = r.BytesU64(domSize, "domain")
	}
	if !r.Bool("null tile extent") {
		d.TileExtent = r.Bytes(d.Type.Size(), "tile extent")
	}
	if err := r.Err(); err != nil {
		return d, err
	}
	if d.CellValNum != 1 && d.CellValNum != VarNum {
		return d, fmt.Errorf("%w: cell_val_num %d", wire.ErrCorrupt, d.CellValNum)
	}
	if !d.IsVar() && d.Domain == nil {
		return d, fmt.Errorf("%w: fixed-size dimension without a domain", wire.ErrCorrupt)
	}
	return d, nil
}

func decodeAttribute(r *wire.Reader, v uint32) (Attribute, error) {
	var a Attribute
	a.Name = readString32(r, "name")
	a.Type = datatype.Datatype(r.Uint8("datatype"))
	a.CellValNum = r.Uint32("cell_val_num")
	if err := r.Err(); err != nil {
		return a, err
	}
	if !a.Type.Valid() {
		return a, fmt.Errorf("%w: datatype %d", wire.ErrCorrupt, a.Type)
	}
	if a.CellValNum == 0 {
		return a, fmt.Errorf("%w: cell_val_num 0", wire.ErrCorrupt)
	}
	var err error
	if a.Filters, err = pipeline.Decode(r, v); err != nil {
		return a, fmt.Errorf("filters: %w", err)
	}
	if v >= vFill {
		a.FillValue = r.BytesU64(r.Uint64("fill value size"), "fill value")
		if r.Err() == nil && len(a.FillValue) == 0 {
			return a, fmt.Errorf("%w: empty fill value", wire.ErrCorrupt)
		}
	} else {
		a.FillValue = DefaultFill(a.Type, a.CellValNum)
	}
	if v >= vNullable {
		a.Nullable = r.Bool("nullable")
		a.FillValid = r.Bool("fill value validity")
	}
	if v >= vAttrOrder {
		a.Order = DataOrder(r.Uint8("order"))
		if r.Err() == nil && a.Order > DecreasingData {
			return a, fmt.Errorf("%w: data order %d", wire.ErrCorrupt, a.Order)
		}
	}
	if v >= vEnumerations {
		a.EnumerationName = readString32(r, "enumeration name")
	}
	return a, r.Err()
}

func decodeLabel(r *wire.Reader) DimensionLabel {
	var l DimensionLabel
	l.DimIndex = r.Uint32("dimension index")
	l.Name = readString32(r, "name")
	l.RelativeURI = r.Bool("relative uri")
	l.URI = readString64(r, "uri")
	l.AttrName = readString32(r, "label attribute name")
	l.Order = DataOrder(r.Uint8("label order"))
	l.Type = datatype.Datatype(r.Uint8("label datatype"))
	l.CellValNum = r.Uint32("label cell_val_num")
	l.External = r.Bool("is external")
	return l
}

func decodeCurrentDomain(r *wire.Reader, dims []Dimension) (*CurrentDomain, error) {
	cd := &CurrentDomain{}
	cd.Version = r.Uint32("version")
	cd.Empty = r.Bool("empty")
	if err := r.Err(); err != nil {
		return nil, err
	}
	if cd.Version > 0 {
		return nil, fmt.Errorf("%w: current domain version %d (this build reads 0)", ErrUnsupportedVersion, cd.Version)
	}
	if cd.Empty {
		return cd, nil
	}
	cd.Type = r.Uint8("type")
	if r.Err() == nil && cd.Type != NDRectangle {
		return nil, fmt.Errorf("%w: current domain type %d", wire.ErrCorrupt, cd.Type)
	}
	cd.Ranges = make([]Range, 0, len(dims))
	for i := range dims {
		d := &dims[i]
		var rg Range
		if d.IsVar() {
			size := r.Uint64("range size")
			start := r.Uint64("range start size")
			if r.Err() == nil && start > size {
				r.Failf("dimension %q: range start size %d exceeds range size %d", d.Name, start, size)
			}
			b := r.BytesU64(size, "range")
			if r.Err() == nil {
				rg.Start, rg.End = b[:start], b[start:]
			}
		} else {
			n := d.Type.Size()
			b := r.Bytes(2*n, "range")
			if r.Err() == nil {
				rg.Start, rg.End = b[:n], b[n:]
			}
		}
		if err := r.Err(); err != nil {
			return nil, fmt.Errorf("dimension %q: %w", d.Name, err)
		}
		cd.Ranges = append(cd.Ranges, rg)
	}
	return cd, nil
}

// Encode writes s as the payload of a schema file, laid out for s.Version.
// (TileDB itself only writes its current version; the older layouts let
// decoded legacy schemas re-encode to their original bytes.)
func Encode(s *ArraySchema) ([]byte, error) {
	if s == nil {
		return nil, errors.New("array schema: nil")
	}
	v := s.Version
	if v < 1 || v > MaxVersion {
		return nil, fmt.Errorf("array schema: %w: %d", ErrUnsupportedVersion, v)
	}
	if err := s.checkEncodable(); err != nil {
		return nil, fmt.Errorf("array schema: %w", err)
	}
	w := wire.NewWriter(make([]byte, 0, 512))
	w.Uint32(v)
	if v >= vDimTypes {
		w.Bool(s.AllowsDups)
	}
	w.Uint8(uint8(s.Type))
	w.Uint8(uint8(s.TileOrder))
	w.Uint8(uint8(s.CellOrder))
	w.Uint64(s.Capacity)
	pipeline.Encode(w, s.CoordsFilters, v)
	pipeline.Encode(w, s.OffsetsFilters, v)
	if v >= vNullable {
		pipeline.Encode(w, s.ValidityFilters, v)
	}
	if v < vDimTypes {
		w.Uint8(uint8(s.Dimensions[0].Type))
	}
	w.Uint32(uint32(len(s.Dimensions)))
	for i := range s.Dimensions {
		d := &s.Dimensions[i]
		writeString32(w, d.Name)
		if v >= vDimTypes {
			w.Uint8(uint8(d.Type))
			w.Uint32(d.CellValNum)
			pipeline.Encode(w, d.Filters, v)
			w.Uint64(uint64(len(d.Domain)))
		}
		w.Write(d.Domain)
		w.Bool(d.TileExtent == nil)
		w.Write(d.TileExtent)
	}
	w.Uint32(uint32(len(s.Attributes)))
	for i := range s.Attributes {
		a := &s.Attributes[i]
		writeString32(w, a.Name)
		w.Uint8(uint8(a.Type))
		w.Uint32(a.CellValNum)
		pipeline.Encode(w, a.Filters, v)
		if v >= vFill {
			w.Uint64(uint64(len(a.FillValue)))
			w.Write(a.FillValue)
		}
		if v >= vNullable {
			w.Bool(a.Nullable)
			w.Bool(a.FillValid)
		}
		if v >= vAttrOrder {
			w.Uint8(uint8(a.Order))
		}
		if v >= vEnumerations {
			writeString32(w, a.EnumerationName)
		}
	}
	if v >= vLabels {
		w.Uint32(uint32(len(s.Labels)))
		for _, l := range s.Labels {
			w.Uint32(l.DimIndex)
			writeString32(w, l.Name)
			w.Bool(l.RelativeURI)
			w.Uint64(uint64(len(l.URI)))
			w.String(l.URI)
			writeString32(w, l.AttrName)
			w.Uint8(uint8(l.Order))
			w.Uint8(uint8(l.Type))
			w.Uint32(l.CellValNum)
			w.Bool(l.External)
		}
	}
	if v >= vEnumerations {
		w.Uint32(uint32(len(s.Enumerations)))
		for _, e := range s.Enumerations {
			writeString32(w, e.Name)
			writeString32(w, e.PathName)
		}
	}
	if v >= vCurrentDom {
		cd := s.CurrentDomain
		if cd == nil {
			cd = &CurrentDomain{Empty: true}
		}
		w.Uint32(cd.Version)
		w.Bool(cd.Empty)
		if !cd.Empty {
			w.Uint8(cd.Type)
			for i, rg := range cd.Ranges {
				if s.Dimensions[i].IsVar() {
					w.Uint64(uint64(len(rg.Start) + len(rg.End)))
					w.Uint64(uint64(len(rg.Start)))
				}
				w.Write(rg.Start)
				w.Write(rg.End)
			}
		}
	}
	return w.Bytes(), nil
}

// checkEncodable refuses what would encode to bytes no decoder could read
// back (it is not Validate: TileDB-legal is a stricter question).
func (s *ArraySchema) checkEncodable() error {
	if len(s.Dimensions) == 0 {
		return errors.New("no dimensions")
	}
	if s.Version < vDimTypes {
		for _, d := range s.Dimensions {
			if d.Type != s.Dimensions[0].Type {
				return fmt.Errorf("format version %d needs every dimension to have one datatype", s.Version)
			}
			if len(d.Domain) != 2*d.Type.Size() {
				return fmt.Errorf("dimension %q: format version %d needs a fixed domain", d.Name, s.Version)
			}
		}
	}
	for _, d := range s.Dimensions {
		if d.TileExtent != nil && len(d.TileExtent) != d.Type.Size() {
			return fmt.Errorf("dimension %q: tile extent has %d bytes, want %d", d.Name, len(d.TileExtent), d.Type.Size())
		}
		if d.Domain != nil && len(d.Domain) != 2*d.Type.Size() {
			return fmt.Errorf("dimension %q: domain has %d bytes, want %d", d.Name, len(d.Domain), 2*d.Type.Size())
		}
	}
	if s.Version >= vFill {
		for _, a := range s.Attributes {
			if len(a.FillValue) == 0 {
				return fmt.Errorf("attribute %q: no fill value", a.Name)
			}
		}
	}
	if cd := s.CurrentDomain; s.Version >= vCurrentDom && cd != nil && !cd.Empty {
		if len(cd.Ranges) != len(s.Dimensions) {
			return fmt.Errorf("current domain: %d ranges for %d dimensions", len(cd.Ranges), len(s.Dimensions))
		}
		for i, rg := range cd.Ranges {
			d := &s.Dimensions[i]
			if !d.IsVar() && (len(rg.Start) != d.Type.Size() || len(rg.End) != d.Type.Size()) {
				return fmt.Errorf("current domain: dimension %q: range bounds must be %d bytes", d.Name, d.Type.Size())
			}
		}
	}
	return nil
}

func writeString32(w *wire.Writer, s string) {
	w.Uint32(uint32(len(s)))
	w.String(s)
}

// DecodeEnumerationFile decodes a whole enumeration file (a generic tile).
func DecodeEnumerationFile(b []byte) (*Enumeration, error) {
	_, payload, _, err := gentile.Decode(b, nil)
	if err != nil {
		return nil, fmt.Errorf("enumeration: %w", err)
	}
	return DecodeEnumeration(payload)
}

// DecodeEnumeration reads the payload of an enumeration file.
func DecodeEnumeration(payload []byte) (*Enumeration, error) {
	r := wire.NewReader(payload)
	e := &Enumeration{}
	e.Version = r.Uint32("version")
	if r.Err() == nil && e.Version > 0 {
		return nil, fmt.Errorf("enumeration: %w: enumeration version %d (this build reads 0)", ErrUnsupportedVersion, e.Version)
	}
	e.Name = readString32(r, "name")
	e.PathName = readString32(r, "path name")
	e.Type = datatype.Datatype(r.Uint8("datatype"))
	e.CellValNum = r.Uint32("cell_val_num")
	e.Ordered = r.Bool("ordered")
	e.Data = r.BytesU64(r.Uint64("data size"), "data")
	if e.IsVar() {
		e.Offsets = r.BytesU64(r.Uint64("offsets size"), "offsets")
	}
	if err := r.Err(); err != nil {
		return nil, fmt.Errorf("enumeration %q: %w", e.Name, err)
	}
	if r.Len() != 0 {
		return nil, fmt.Errorf("enumeration %q: %w: %d bytes left over", e.Name, wire.ErrCorrupt, r.Len())
	}
	if err := e.check(); err != nil {
		return nil, fmt.Errorf("enumeration %q: %w", e.Name, err)
	}
	return e, nil
}

func (e *Enumeration) check() error {
	if !e.Type.Valid() {
		return fmt.Errorf("%w: datatype %d", wire.ErrCorrupt, e.Type)
	}
	if e.CellValNum == 0 {
		return fmt.Errorf("%w: cell_val_num 0", wire.ErrCorrupt)
	}
	if e.IsVar() {
		if len(e.Offsets)%8 != 0 {
			return fmt.Errorf("%w: offsets size %d is not a multiple of 8", wire.ErrCorrupt, len(e.Offsets))
		}
		prev := uint64(0)
		for i := 0; i < len(e.Offsets); i += 8 {
			o := AsUint64(datatype.Uint64, e.Offsets[i:])
			if o < prev || o > uint64(len(e.Data)) {
				return fmt.Errorf("%w: offset %d = %d out of order or past %d data bytes", wire.ErrCorrupt, i/8, o, len(e.Data))
			}
			prev = o
		}
		return nil
	}
	cs := uint64(e.Type.Size()) * uint64(e.CellValNum)
	if cs == 0 || uint64(len(e.Data))%cs != 0 {
		return fmt.Errorf("%w: %d data bytes is not a whole number of %d-byte values", wire.ErrCorrupt, len(e.Data), cs)
	}
	return nil
}

// Len is the number of values.
func (e *Enumeration) Len() int {
	if e.IsVar() {
		return len(e.Offsets) / 8
	}
	cs := e.Type.Size() * int(e.CellValNum)
	if cs == 0 {
		return 0
	}
	return len(e.Data) / cs
}

// Value returns the raw bytes of value i.
func (e *Enumeration) Value(i int) []byte {
	if i < 0 || i >= e.Len() {
		return nil
	}
	if e.IsVar() {
		start := AsUint64(datatype.Uint64, e.Offsets[8*i:])
		end := uint64(len(e.Data))
		if 8*(i+1) < len(e.Offsets) {
			end = AsUint64(datatype.Uint64, e.Offsets[8*(i+1):])
		}
		return e.Data[start:end]
	}
	cs := e.Type.Size() * int(e.CellValNum)
	return e.Data[i*cs : (i+1)*cs]
}

// EncodeEnumeration writes the payload of an enumeration file as TileDB does.
func EncodeEnumeration(e *Enumeration) ([]byte, error) {
	if e == nil {
		return nil, errors.New("enumeration: nil")
	}
	if err := e.check(); err != nil {
		return nil, fmt.Errorf("enumeration %q: %w", e.Name, err)
	}
	w := wire.NewWriter(make([]byte, 0, 64+len(e.Data)+len(e.Offsets)))
	w.Uint32(e.Version)
	writeString32(w, e.Name)
	writeString32(w, e.PathName)
	w.Uint8(uint8(e.Type))
	w.Uint32(e.CellValNum)
	w.Bool(e.Ordered)
	w.Uint64(uint64(len(e.Data)))
	w.Write(e.Data)
	if e.IsVar() {
		w.Uint64(uint64(len(e.Offsets)))
		w.Write(e.Offsets)
	}
	return w.Bytes(), nil
}

// EncodeEnumerationFile wraps EncodeEnumeration in a generic tile.
func EncodeEnumerationFile(e *Enumeration, version uint32) ([]byte, error) {
	p, err := EncodeEnumeration(e)
	if err != nil {
		return nil, err
	}
	return gentile.Encode(p, version, nil)
}
