// Package schema owns TileDB array schemas: the in-memory description of an
// array (domain, dimensions, attributes, filter pipelines, dimension labels,
// enumerations, current domain), its on-disk encoding for every array format
// version, the enumeration files, the checks TileDB applies before creating
// an array, and tileflight's schema JSON (docs/protocol.md, "Schema JSON").
//
// Decode and Encode work on the payload of the schema's generic tile;
// DecodeFile and EncodeFile wrap that in the generic tile. Encoding a decoded
// TileDB schema reproduces TileDB's bytes exactly.
package schema

import (
	"encoding/binary"
	"fmt"
	"math"
	"strconv"

	"github.com/tileflight/tileflight/format/datatype"
	"github.com/tileflight/tileflight/format/pipeline"
)

// CurrentVersion is the array format version TileDB 2.30 stamps on the
// schemas (and fragments) it writes; FromJSON builds schemas at it.
const CurrentVersion uint32 = 22

// MaxVersion is the newest format version Decode accepts.
const MaxVersion uint32 = 23

// VarNum is the cell_val_num of variable-sized fields.
const VarNum uint32 = math.MaxUint32

// DefaultCapacity is TileDB's default sparse tile capacity.
const DefaultCapacity uint64 = 10000

// MaxHilbertDims is the most dimensions TileDB's Hilbert order supports.
const MaxHilbertDims = 16

// ArrayType is dense or sparse (on-disk code).
type ArrayType uint8

// Array types.
const (
	Dense  ArrayType = 0
	Sparse ArrayType = 1
)

func (t ArrayType) String() string {
	switch t {
	case Dense:
		return "dense"
	case Sparse:
		return "sparse"
	}
	return "array_type(" + strconv.Itoa(int(t)) + ")"
}

// Layout is a tile or cell order (on-disk code, shared with query layouts).
type Layout uint8

// Layouts.
const (
	RowMajor    Layout = 0
	ColMajor    Layout = 1
	GlobalOrder Layout = 2
	Unordered   Layout = 3
	Hilbert     Layout = 4
)

var layoutNames = [...]string{"row-major", "col-major", "global-order", "unordered", "hilbert"}

func (l Layout) String() string {
	if int(l) < len(layoutNames) {
		return layoutNames[l]
	}
	return "layout(" + strconv.Itoa(int(l)) + ")"
}

// ParseLayout accepts the names String returns (also with '_' for '-').
func ParseLayout(s string) (Layout, error) {
	for i, n := range layoutNames {
		if s == n || s == underscore(n) {
			return Layout(i), nil
		}
	}
	return 0, fmt.Errorf("unknown layout %q (want row-major, col-major or hilbert)", s)
}

func underscore(s string) string {
	b := []byte(s)
	for i := range b {
		if b[i] == '-' {
			b[i] = '_'
		}
	}
	return string(b)
}

// DataOrder is the order of an attribute's or label's data.
type DataOrder uint8

// Data orders.
const (
	UnorderedData  DataOrder = 0
	IncreasingData DataOrder = 1
	DecreasingData DataOrder = 2
)

var orderNames = [...]string{"unordered", "increasing", "decreasing"}

func (o DataOrder) String() string {
	if int(o) < len(orderNames) {
		return orderNames[o]
	}
	return "data_order(" + strconv.Itoa(int(o)) + ")"
}

// ParseDataOrder accepts the names String returns.
func ParseDataOrder(s string) (DataOrder, error) {
	for i, n := range orderNames {
		if s == n {
			return DataOrder(i), nil
		}
	}
	return 0, fmt.Errorf("unknown data order %q (want unordered, increasing or decreasing)", s)
}

// ArraySchema is one array schema file.
type ArraySchema struct {
	// Version is the array format version the schema was written with.
	Version    uint32
	Type       ArrayType
	AllowsDups bool
	TileOrder  Layout
	CellOrder  Layout
	Capacity   uint64

	// CoordsFilters is the default pipeline of dimensions without their
	// own filters; OffsetsFilters and ValidityFilters apply to every
	// offsets and validity tile.
	CoordsFilters   pipeline.Pipeline
	OffsetsFilters  pipeline.Pipeline
	ValidityFilters pipeline.Pipeline

	Dimensions []Dimension
	Attributes []Attribute
	// Labels exist from version 18.
	Labels []DimensionLabel
	// Enumerations lists the enumerations by name with their file names
	// under __schema/__enumerations (from version 20), in file order.
	Enumerations []EnumerationRef
	// CurrentDomain is nil for schemas older than version 22.
	CurrentDomain *CurrentDomain

	// Name is the schema file name (e.g. "__1_1_<uuid>" or
	// "__array_schema.tdb"); it is not part of the encoding.
	Name string
}

// Dimension is one dimension of the domain.
type Dimension struct {
	Name       string
	Type       datatype.Datatype
	CellValNum uint32
	// Filters as stored; empty means the schema's CoordsFilters apply
	// (see ArraySchema.DimensionFilters).
	Filters pipeline.Pipeline
	// Domain holds the low and high bounds back to back (2 values of
	// Type); nil for var-sized (string) dimensions.
	Domain []byte
	// TileExtent is one value of Type, nil when the extent is null.
	TileExtent []byte
}

// Attribute is one attribute.
type Attribute struct {
	Name       string
	Type       datatype.Datatype
	CellValNum uint32
	Filters    pipeline.Pipeline
	// FillValue is the value of unwritten cells (one cell for fixed
	// attributes, one value for var-sized ones).
	FillValue []byte
	Nullable  bool
	// FillValid is the validity of unwritten cells of nullable attributes.
	FillValid bool
	Order     DataOrder
	// EnumerationName names an entry of ArraySchema.Enumerations, or "".
	EnumerationName string
}

// DimensionLabel describes a label array attached to a dimension.
type DimensionLabel struct {
	DimIndex    uint32
	Name        string
	RelativeURI bool
	URI         string
	AttrName    string
	Order       DataOrder
	Type        datatype.Datatype
	CellValNum  uint32
	External    bool
}

// EnumerationRef ties an enumeration name to its file. Enum is filled in by
// whoever loads the file (or by FromJSON); it is not part of the schema
// encoding.
type EnumerationRef struct {
	Name     string
	PathName string
	Enum     *Enumeration
}

// Enumeration is the content of an enumeration file.
type Enumeration struct {
	Version    uint32
	Name       string
	PathName   string
	Type       datatype.Datatype
	CellValNum uint32
	Ordered    bool
	Data       []byte
	// Offsets are uint64 start offsets into Data, present only when
	// CellValNum is VarNum.
	Offsets []byte
}

// CurrentDomain is the array's current domain (format version 22+).
type CurrentDomain struct {
	Version uint32
	Empty   bool
	// Type is the representation; only NDRectangle (0) exists.
	Type uint8
	// Ranges has one [start, end] pair per dimension (NDRectangle).
	Ranges []Range
}

// NDRectangle is the only current domain type.
const NDRectangle uint8 = 0

// Range is an inclusive range of one dimension, each bound as raw bytes of
// the dimension's type (a whole string for string dimensions).
type Range struct {
	Start, End []byte
}

// IsVar reports a variable-sized dimension.
func (d *Dimension) IsVar() bool { return d.CellValNum == VarNum }

// IsVar reports a variable-sized attribute.
func (a *Attribute) IsVar() bool { return a.CellValNum == VarNum }

// IsVar reports a variable-sized enumeration.
func (e *Enumeration) IsVar() bool { return e.CellValNum == VarNum }

// CellSize is the number of bytes of one cell, or 0 for var-sized
// dimensions (use the offsets).
func (d *Dimension) CellSize() uint64 { return cellSize(d.Type, d.CellValNum) }

// CellSize is the number of bytes of one cell, or 0 for var-sized
// attributes (use the offsets).
func (a *Attribute) CellSize() uint64 { return cellSize(a.Type, a.CellValNum) }

func cellSize(t datatype.Datatype, n uint32) uint64 {
	if n == VarNum {
		return 0
	}
	return uint64(t.Size()) * uint64(n)
}

// Lo and Hi return the raw domain bounds (nil for var-sized dimensions).
func (d *Dimension) Lo() []byte { return d.half(0) }

// Hi returns the raw upper domain bound.
func (d *Dimension) Hi() []byte { return d.half(1) }

func (d *Dimension) half(i int) []byte {
	n := d.Type.Size()
	if n == 0 || len(d.Domain) != 2*n {
		return nil
	}
	return d.Domain[i*n : (i+1)*n]
}

// DomainInt64 returns the domain of a signed integer (or datetime/time)
// dimension; ok is false for other types or a missing domain.
func (d *Dimension) DomainInt64() (lo, hi int64, ok bool) {
	if !d.Type.IsInteger() || d.Lo() == nil {
		return 0, 0, false
	}
	return AsInt64(d.Type, d.Lo()), AsInt64(d.Type, d.Hi()), true
}

// DomainUint64 returns the domain of an integer dimension as unsigned
// values (the natural view of UINT64 dimensions).
func (d *Dimension) DomainUint64() (lo, hi uint64, ok bool) {
	if !d.Type.IsInteger() || d.Lo() == nil {
		return 0, 0, false
	}
	return AsUint64(d.Type, d.Lo()), AsUint64(d.Type, d.Hi()), true
}

// DomainFloat64 returns the domain of any numeric dimension as float64.
func (d *Dimension) DomainFloat64() (lo, hi float64, ok bool) {
	if d.Lo() == nil {
		return 0, 0, false
	}
	return AsFloat64(d.Type, d.Lo()), AsFloat64(d.Type, d.Hi()), true
}

// DomainStrings formats the domain bounds as decimal strings (exact for
// every integer type); ok is false for var-sized dimensions.
func (d *Dimension) DomainStrings() (lo, hi string, ok bool) {
	if d.Lo() == nil {
		return "", "", false
	}
	return FormatValue(d.Type, d.Lo()), FormatValue(d.Type, d.Hi()), true
}

// TileExtentInt64 returns the tile extent of an integer dimension.
func (d *Dimension) TileExtentInt64() (int64, bool) {
	if !d.Type.IsInteger() || len(d.TileExtent) != d.Type.Size() {
		return 0, false
	}
	return AsInt64(d.Type, d.TileExtent), true
}

// TileExtentUint64 returns the tile extent of an integer dimension as an
// unsigned value.
func (d *Dimension) TileExtentUint64() (uint64, bool) {
	if !d.Type.IsInteger() || len(d.TileExtent) != d.Type.Size() {
		return 0, false
	}
	return AsUint64(d.Type, d.TileExtent), true
}

// TileExtentFloat64 returns the tile extent of a numeric dimension.
func (d *Dimension) TileExtentFloat64() (float64, bool) {
	if len(d.TileExtent) == 0 || len(d.TileExtent) != d.Type.Size() {
		return 0, false
	}
	return AsFloat64(d.Type, d.TileExtent), true
}

// AsInt64 reads one value of t from b as int64 (unsigned values wrap).
// b must hold at least t.Size() bytes; shorter input yields 0.
func AsInt64(t datatype.Datatype, b []byte) int64 {
	if len(b) < t.Size() {
		return 0
	}
	switch t {
	case datatype.Int8:
		return int64(int8(b[0]))
	case datatype.Uint8, datatype.Bool, datatype.Char, datatype.StringASCII, datatype.StringUTF8, datatype.Blob, datatype.GeomWKB, datatype.GeomWKT, datatype.Any:
		return int64(b[0])
	case datatype.Int16:
		return int64(int16(binary.LittleEndian.Uint16(b)))
	case datatype.Uint16, datatype.StringUTF16, datatype.StringUCS2:
		return int64(binary.LittleEndian.Uint16(b))
	case datatype.Int32:
		return int64(int32(binary.LittleEndian.Uint32(b)))
	case datatype.Uint32, datatype.StringUTF32, datatype.StringUCS4:
		return int64(binary.LittleEndian.Uint32(b))
	case datatype.Float32:
		return int64(math.Float32frombits(binary.LittleEndian.Uint32(b)))
	case datatype.Float64:
		return int64(math.Float64frombits(binary.LittleEndian.Uint64(b)))
	}
	return int64(binary.LittleEndian.Uint64(b))
}

// AsUint64 reads one integer value of t from b as uint64 (signed values
// are sign-extended, then reinterpreted).
func AsUint64(t datatype.Datatype, b []byte) uint64 {
	if t == datatype.Uint64 && len(b) >= 8 {
		return binary.LittleEndian.Uint64(b)
	}
	return uint64(AsInt64(t, b))
}

// AsFloat64 reads one numeric value of t from b as float64.
func AsFloat64(t datatype.Datatype, b []byte) float64 {
	if len(b) < t.Size() {
		return 0
	}
	switch t {
	case datatype.Float32:
		return float64(math.Float32frombits(binary.LittleEndian.Uint32(b)))
	case datatype.Float64:
		return math.Float64frombits(binary.LittleEndian.Uint64(b))
	case datatype.Uint64:
		return float64(binary.LittleEndian.Uint64(b))
	}
	return float64(AsInt64(t, b))
}

// FormatValue formats one value of t exactly (integers in decimal, floats
// in the shortest form that reads back to the same value, byte-like types
// as the string itself).
func FormatValue(t datatype.Datatype, b []byte) string {
	switch {
	case t == datatype.Float32:
		return strconv.FormatFloat(AsFloat64(t, b), 'g', -1, 32)
	case t == datatype.Float64:
		return strconv.FormatFloat(AsFloat64(t, b), 'g', -1, 64)
	case t == datatype.Uint64:
		return strconv.FormatUint(AsUint64(t, b), 10)
	case t.IsByteLike():
		return string(b)
	}
	return strconv.FormatInt(AsInt64(t, b), 10)
}

// IsDense reports a dense array.
func (s *ArraySchema) IsDense() bool { return s.Type == Dense }

// DimensionIndex returns the index of the dimension called name, or -1.
func (s *ArraySchema) DimensionIndex(name string) int {
	for i := range s.Dimensions {
		if s.Dimensions[i].Name == name {
			return i
		}
	}
	return -1
}

// AttributeIndex returns the index of the attribute called name, or -1.
func (s *ArraySchema) AttributeIndex(name string) int {
	for i := range s.Attributes {
		if s.Attributes[i].Name == name {
			return i
		}
	}
	return -1
}

// DimensionFilters returns the pipeline that filters dimension i's tiles:
// its own, or (from schema v5) the schema's coords filters when it has none.
func (s *ArraySchema) DimensionFilters(i int) pipeline.Pipeline {
	if i < 0 || i >= len(s.Dimensions) {
		return pipeline.Pipeline{}
	}
	if f := s.Dimensions[i].Filters; !f.Empty() || s.Version < 5 {
		// Schemas before v5 have no per-dimension pipelines, and TileDB
		// does not default them to the coordinates' one: the dimension
		// tiles that later fragments write into such an array are
		// unfiltered (the coordinates' pipeline applies to __coords.tdb).
		return f
	}
	return s.CoordsFilters
}

// Field is a dimension or attribute seen through one interface.
type Field struct {
	Name       string
	Dimension  bool // false: attribute
	Index      int  // in Dimensions or Attributes
	Type       datatype.Datatype
	CellValNum uint32
	Nullable   bool
	// Filters is the effective data pipeline (coords filters for
	// dimensions without their own).
	Filters pipeline.Pipeline
}

// IsVar reports a variable-sized field.
func (f Field) IsVar() bool { return f.CellValNum == VarNum }

// CellSize is the fixed cell size in bytes, 0 for var-sized fields.
func (f Field) CellSize() uint64 { return cellSize(f.Type, f.CellValNum) }

// FieldByName finds a dimension or attribute by name.
func (s *ArraySchema) FieldByName(name string) (Field, bool) {
	if i := s.DimensionIndex(name); i >= 0 {
		d := &s.Dimensions[i]
		return Field{Name: d.Name, Dimension: true, Index: i, Type: d.Type, CellValNum: d.CellValNum, Filters: s.DimensionFilters(i)}, true
	}
	if i := s.AttributeIndex(name); i >= 0 {
		a := &s.Attributes[i]
		return Field{Name: a.Name, Index: i, Type: a.Type, CellValNum: a.CellValNum, Nullable: a.Nullable, Filters: a.Filters}, true
	}
	return Field{}, false
}

// Fields lists dimensions then attributes, in schema order.
func (s *ArraySchema) Fields() []Field {
	out := make([]Field, 0, len(s.Dimensions)+len(s.Attributes))
	for i := range s.Dimensions {
		f, _ := s.FieldByName(s.Dimensions[i].Name)
		f.Index, f.Dimension = i, true
		out = append(out, f)
	}
	for i := range s.Attributes {
		a := &s.Attributes[i]
		out = append(out, Field{Name: a.Name, Index: i, Type: a.Type, CellValNum: a.CellValNum, Nullable: a.Nullable, Filters: a.Filters})
	}
	return out
}

// EnumerationByName returns the enumeration reference called name, or nil.
func (s *ArraySchema) EnumerationByName(name string) *EnumerationRef {
	for i := range s.Enumerations {
		if s.Enumerations[i].Name == name {
			return &s.Enumerations[i]
		}
	}
	return nil
}

// DefaultFill returns TileDB's fill value for a field of type t with n
// values per cell (one value when var-sized).
func DefaultFill(t datatype.Datatype, n uint32) []byte {
	if n == VarNum || n == 0 {
		n = 1
	}
	one := defaultFillValue(t)
	out := make([]byte, 0, len(one)*int(n))
	for i := uint32(0); i < n; i++ {
		out = append(out, one...)
	}
	return out
}

func defaultFillValue(t datatype.Datatype) []byte {
	b := make([]byte, t.Size())
	switch t {
	case datatype.Int8, datatype.Char:
		b[0] = 0x80
	case datatype.Uint8:
		b[0] = 0xff
	case datatype.Int16:
		binary.LittleEndian.PutUint16(b, 0x8000)
	case datatype.Uint16:
		binary.LittleEndian.PutUint16(b, 0xffff)
	case datatype.Int32:
		binary.LittleEndian.PutUint32(b, 0x80000000)
	case datatype.Uint32:
		binary.LittleEndian.PutUint32(b, 0xffffffff)
	case datatype.Uint64:
		binary.LittleEndian.PutUint64(b, math.MaxUint64)
	case datatype.Float32:
		binary.LittleEndian.PutUint32(b, 0x7fc00000) // C++ quiet NaN, not Go's math.NaN bits
	case datatype.Float64:
		binary.LittleEndian.PutUint64(b, 0x7ff8000000000000)
	case datatype.Int64:
		binary.LittleEndian.PutUint64(b, 1<<63)
	default:
		if t.IsDatetime() || t.IsTime() {
			binary.LittleEndian.PutUint64(b, 1<<63)
		}
		// strings, bool, blob, geometries, any: zero
	}
	return b
}
