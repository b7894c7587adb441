// Package arrowconv owns the boundary between TileDB cell buffers and Apache
// Arrow: the mapping of TileDB datatypes to Arrow types (docs/protocol.md, "Arrow type mapping"), the
// conversion of unfiltered tile buffers into arrow.Array values (wrapping the
// tile bytes instead of copying them whenever the layouts agree), gathers for
// the layouts that must reorder cells, and the reverse conversion of Arrow
// columns into TileDB write buffers with the user conveniences of DoPut.
//
// The package deliberately knows nothing about array schemas: callers describe
// each column with a Field.
//
// Byte order: TileDB buffers are little-endian and Arrow buffers are in host
// order, so wrapping is only correct on little-endian hosts; on a big-endian
// host every conversion returns ErrUnsupported instead of silently wrong data.
package arrowconv

import (
	"encoding/binary"
	"fmt"
	"math"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/tileflight/tileflight/errkind"
	"github.com/tileflight/tileflight/format/datatype"
	"github.com/tileflight/tileflight/format/wire"
)

// VarNum is the CellValNum of a var-sized field (TileDB's TILEDB_VAR_NUM).
const VarNum = math.MaxUint32

// Field metadata keys set by ArrowField.
const (
	MetaRole        = "tiledb.role"
	MetaDatatype    = "tiledb.datatype"
	MetaEnumeration = "tiledb.enumeration"
)

// Errors wrapped by this package, so that callers can map them to statuses.
var (
	// ErrMismatch: an Arrow column does not fit the field (wrong type, a value
	// that does not convert exactly, a null in a non-nullable field). The
	// Flight layer reports it as InvalidArgument.
	// Kind: Internal until a caller wraps it with the kind it knows
	// (errkind.Fallback): whether the user or the stored data is at fault.
	ErrMismatch error = errkind.New(errkind.Internal, errkind.Fallback, "column does not match the field")
	// ErrUnsupported: a datatype/cell_val_num combination with no Arrow
	// mapping, or a big-endian host.
	// Kind: Internal until a caller wraps it with the kind it knows
	// (errkind.Fallback): whether the user or the stored data is at fault.
	ErrUnsupported error = errkind.New(errkind.Internal, errkind.Fallback, "unsupported")
)

// ErrCorrupt is returned (wrapped) when TileDB buffers are inconsistent:
// offsets out of range or decreasing, lengths that do not match. It is
// wire.ErrCorrupt so that every decoder of the project reports it the same way.
var ErrCorrupt = wire.ErrCorrupt

var littleEndian = binary.NativeEndian.Uint16([]byte{1, 0}) == 1

// Role says whether a field is a dimension or an attribute.
type Role uint8

const (
	Attribute Role = iota
	Dimension
)

func (r Role) String() string {
	if r == Dimension {
		return "dimension"
	}
	return "attribute"
}

// Field describes one TileDB column as far as conversion needs it.
type Field struct {
	Name       string
	Type       datatype.Datatype
	CellValNum uint32 // VarNum for var-sized cells
	Nullable   bool
	Role       Role
	// Enumeration, when set, makes the column a dictionary column whose
	// indices are the attribute's (integer) values.
	Enumeration *Enumeration
}

// IsVar reports a var-sized field.
func (f Field) IsVar() bool { return f.CellValNum == VarNum }

// CellSize is the byte size of one fixed-size cell (0 for var-sized fields).
func (f Field) CellSize() int {
	if f.IsVar() {
		return 0
	}
	return int(f.CellValNum) * f.Type.Size()
}

// Enumeration holds the values of a TileDB enumeration in TileDB's own buffer
// layout: Data holds the values back to back and, when CellValNum is VarNum,
// Offsets holds one little-endian uint64 start offset per value. Its Arrow
// dictionary is built once, on first use, and shared by every column that
// uses it, so an Enumeration must not be modified after first use.
type Enumeration struct {
	Name       string
	Type       datatype.Datatype
	CellValNum uint32
	Ordered    bool
	Data       []byte
	Offsets    []byte
	// HasFill makes cells holding FillIndex (the attribute's fill value,
	// which a dense read returns for cells no fragment wrote and for cells
	// failing a filter) come back null when the enumeration has no value
	// at that index: TileDB returns the raw index and no value. The index
	// stays in the indices buffer; the column is declared nullable. Any
	// other index outside the enumeration is corruption.
	HasFill   bool
	FillIndex int64

	once  sync.Once
	dict  arrow.Array
	index map[string]int64
	err   error
}

func (e *Enumeration) valueField() Field {
	return Field{Name: e.Name, Type: e.Type, CellValNum: e.CellValNum}
}

// Len is the number of values in the enumeration.
func (e *Enumeration) Len() int {
	if e.CellValNum == VarNum {
		return len(e.Offsets) / 8
	}
	cs := int(e.CellValNum) * e.Type.Size()
	if cs == 0 {
		return 0
	}
	return len(e.Data) / cs
}

// Dictionary returns the enumeration's values as an Arrow array (built once).
func (e *Enumeration) Dictionary() (arrow.Array, error) {
	e.once.Do(func() {
		vf := e.valueField()
		n := e.Len()
		if !e.valueField().IsVar() && n*vf.CellSize() != len(e.Data) {
			e.err = fmt.Errorf("enumeration %q: %d data bytes is not a whole number of %d-byte values: %w",
				e.Name, len(e.Data), vf.CellSize(), ErrCorrupt)
			return
		}
		d, err := NewColumn(vf, e.Data, e.Offsets, nil, n)
		if err != nil {
			e.err = fmt.Errorf("enumeration %q: %w", e.Name, err)
			return
		}
		e.dict = d
		e.index = make(map[string]int64, n)
		for i := 0; i < n; i++ {
			v := cellBytes(vf, e.Data, e.Offsets, i)
			if _, dup := e.index[string(v)]; !dup {
				e.index[string(v)] = int64(i)
			}
		}
	})
	return e.dict, e.err
}

// cellBytes returns cell i of validated TileDB buffers.
func cellBytes(f Field, data, offsets []byte, i int) []byte {
	if !f.IsVar() {
		cs := f.CellSize()
		return data[i*cs : (i+1)*cs]
	}
	s := binary.LittleEndian.Uint64(offsets[8*i:])
	e := uint64(len(data))
	if 8*(i+1) < len(offsets) {
		e = binary.LittleEndian.Uint64(offsets[8*(i+1):])
	}
	return data[s:e]
}

// ArrowType returns the Arrow type of a field (docs/protocol.md, "Arrow type mapping").
//
// Choices the design leaves open:
//   - fixed-size string/char/blob cells of any cell_val_num n, including 1,
//     are fixed_size_binary[n]: a fixed width survives a round trip, and a
//     one-byte CHAR is not necessarily a valid UTF-8 string;
//   - STRING_UTF16/32 and UCS2/4 keep their raw code units: large_binary when
//     var-sized, fixed_size_binary[n*unit] otherwise;
//   - ANY is large_binary;
//   - timestamps carry no time zone (TileDB datetimes are plain epoch counts,
//     and this is what TileDB's own Arrow adapter exports);
//   - list children are the conventional nullable "item" field, even though
//     TileDB never stores a null element.
func ArrowType(f Field) (arrow.DataType, error) {
	if !f.Type.Valid() {
		return nil, fmt.Errorf("field %q: datatype %d: %w", f.Name, uint8(f.Type), ErrUnsupported)
	}
	if f.CellValNum == 0 {
		return nil, fmt.Errorf("field %q: cell_val_num 0: %w", f.Name, ErrUnsupported)
	}
	if f.Enumeration != nil {
		return dictType(f)
	}
	if isBytes(f.Type) {
		if f.IsVar() {
			if isUTF8(f.Type) {
				return arrow.BinaryTypes.LargeString, nil
			}
			return arrow.BinaryTypes.LargeBinary, nil
		}
		w := int64(f.CellValNum) * int64(f.Type.Size())
		if w > math.MaxInt32 {
			return nil, fmt.Errorf("field %q: cell of %d bytes: %w", f.Name, w, ErrUnsupported)
		}
		return &arrow.FixedSizeBinaryType{ByteWidth: int(w)}, nil
	}
	elem := elemType(f.Type)
	if elem == nil {
		return nil, fmt.Errorf("field %q: datatype %s: %w", f.Name, f.Type, ErrUnsupported)
	}
	switch {
	case f.CellValNum == 1:
		return elem, nil
	case f.IsVar():
		return arrow.LargeListOf(elem), nil
	case f.CellValNum > math.MaxInt32:
		return nil, fmt.Errorf("field %q: cell_val_num %d: %w", f.Name, f.CellValNum, ErrUnsupported)
	default:
		return arrow.FixedSizeListOf(int32(f.CellValNum), elem), nil
	}
}

func dictType(f Field) (arrow.DataType, error) {
	e := f.Enumeration
	switch f.Type {
	case datatype.Int8, datatype.Uint8, datatype.Int16, datatype.Uint16,
		datatype.Int32, datatype.Uint32, datatype.Int64, datatype.Uint64:
	default:
		return nil, fmt.Errorf("field %q: enumeration index type %s is not an integer: %w", f.Name, f.Type, ErrUnsupported)
	}
	if f.CellValNum != 1 {
		return nil, fmt.Errorf("field %q: enumerated attribute with cell_val_num %d: %w", f.Name, f.CellValNum, ErrUnsupported)
	}
	vt, err := ArrowType(e.valueField())
	if err != nil {
		return nil, fmt.Errorf("field %q: enumeration %q: %w", f.Name, e.Name, err)
	}
	return &arrow.DictionaryType{IndexType: elemType(f.Type), ValueType: vt, Ordered: e.Ordered}, nil
}

// isBytes reports the types whose cells are opaque bytes in Arrow.
func isBytes(d datatype.Datatype) bool {
	return d.IsByteLike() || d.IsString()
}

func isUTF8(d datatype.Datatype) bool {
	return d == datatype.StringASCII || d == datatype.StringUTF8 || d == datatype.GeomWKT
}

// elemType is the Arrow type of one value of a non-byte datatype.
func elemType(d datatype.Datatype) arrow.DataType {
	switch d {
	case datatype.Int8:
		return arrow.PrimitiveTypes.Int8
	case datatype.Uint8:
		return arrow.PrimitiveTypes.Uint8
	case datatype.Int16:
		return arrow.PrimitiveTypes.Int16
	case datatype.Uint16:
		return arrow.PrimitiveTypes.Uint16
	case datatype.Int32:
		return arrow.PrimitiveTypes.Int32
	case datatype.Uint32:
		return arrow.PrimitiveTypes.Uint32
	case datatype.Int64:
		return arrow.PrimitiveTypes.Int64
	case datatype.Uint64:
		return arrow.PrimitiveTypes.Uint64
	case datatype.Float32:
		return arrow.PrimitiveTypes.Float32
	case datatype.Float64:
		return arrow.PrimitiveTypes.Float64
	case datatype.Bool:
		return arrow.FixedWidthTypes.Boolean
	case datatype.DatetimeSec:
		return &arrow.TimestampType{Unit: arrow.Second}
	case datatype.DatetimeMs:
		return &arrow.TimestampType{Unit: arrow.Millisecond}
	case datatype.DatetimeUs:
		return &arrow.TimestampType{Unit: arrow.Microsecond}
	case datatype.DatetimeNs:
		return &arrow.TimestampType{Unit: arrow.Nanosecond}
	case datatype.DatetimeDay:
		return arrow.FixedWidthTypes.Date32
	case datatype.TimeSec:
		return arrow.FixedWidthTypes.Time32s
	case datatype.TimeMs:
		return arrow.FixedWidthTypes.Time32ms
	case datatype.TimeUs:
		return arrow.FixedWidthTypes.Time64us
	case datatype.TimeNs:
		return arrow.FixedWidthTypes.Time64ns
	}
	if d.IsDatetime() || d.IsTime() {
		return arrow.PrimitiveTypes.Int64
	}
	return nil
}

// ArrowField returns the Arrow field of f: its type, nullability (dimensions
// are never nullable) and the metadata tiledb.role, tiledb.datatype and, for
// enumerated attributes, tiledb.enumeration.
func ArrowField(f Field) (arrow.Field, error) {
	t, err := ArrowType(f)
	if err != nil {
		return arrow.Field{}, err
	}
	keys := []string{MetaRole, MetaDatatype}
	vals := []string{f.Role.String(), f.Type.String()}
	if f.Enumeration != nil {
		keys = append(keys, MetaEnumeration)
		vals = append(vals, f.Enumeration.Name)
	}
	return arrow.Field{
		Name:     f.Name,
		Type:     t,
		Nullable: (f.Nullable || f.Enumeration != nil && f.Enumeration.HasFill) && f.Role == Attribute,
		Metadata: arrow.NewMetadata(keys, vals),
	}, nil
}

// Schema returns the Arrow schema of fields, in the order given, with meta
// (may be nil) as schema-level metadata.
func Schema(fields []Field, meta map[string]string) (*arrow.Schema, error) {
	out := make([]arrow.Field, len(fields))
	for i, f := range fields {
		af, err := ArrowField(f)
		if err != nil {
			return nil, err
		}
		out[i] = af
	}
	var md *arrow.Metadata
	if len(meta) > 0 {
		m := arrow.MetadataFrom(meta)
		md = &m
	}
	return arrow.NewSchema(out, md), nil
}

// SameBytes reports whether an Arrow array of f is flat (no children) and
// its one data buffer holds exactly the TileDB cells' bytes: a fixed-size,
// not nullable field without an enumeration, of one number or time value
// per cell that needs no conversion, or of bytes. Such a column can be
// sent as the tile's bytes, even while they are still compressed.
func (f Field) SameBytes() bool {
	if f.Enumeration != nil || f.IsVar() || f.Nullable || f.CellValNum == 0 {
		return false
	}
	if isBytes(f.Type) {
		return true
	}
	switch f.Type {
	case datatype.Bool, datatype.DatetimeDay, datatype.TimeSec, datatype.TimeMs:
		return false
	}
	return f.CellValNum == 1 && elemType(f.Type) != nil
}
