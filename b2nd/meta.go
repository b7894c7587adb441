// Package b2nd owns Blosc2 NDArrays (.b2nd) over a storage.Store: the
// "b2nd" metalayer (shape, chunk shape, block shape, NumPy dtype), the
// array geometry (chunks padded to the chunk shape, blocks padded to the
// block shape, both in C order), opening a contiguous (cframe) or sparse
// (sframe) frame with package frame, reading chunks (only the bytes of the
// chunk asked for) and writing arrays as python-blosc2 does. Chunks are
// decoded by package b2nd/chunk.
package b2nd

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/tileflight/tileflight/errkind"
)

// MaxDims is c-blosc2's B2ND_MAX_DIM.
const MaxDims = 16

// Meta is the b2nd metalayer.
type Meta struct {
	Version    int
	Shape      []int64
	ChunkShape []int64
	BlockShape []int64
	DtypeFmt   int
	Dtype      string
}

// ParseMeta decodes the b2nd metalayer and checks its geometry.
func ParseMeta(b []byte) (*Meta, error) {
	d := msgpack.NewDecoder(bytes.NewReader(b))
	n, err := d.DecodeArrayLen()
	if err != nil || n < 6 {
		return nil, errkind.Errorf(errkind.DataLoss, "b2nd metalayer: want an array of 7, got %d (%v)", n, err)
	}
	m := &Meta{}
	if m.Version, err = d.DecodeInt(); err != nil {
		return nil, metaErr(err)
	}
	nd, err := d.DecodeInt()
	if err != nil || nd < 0 || nd > MaxDims {
		return nil, errkind.Errorf(errkind.DataLoss, "b2nd metalayer: %d dimensions (%v)", nd, err)
	}
	for _, dst := range []*[]int64{&m.Shape, &m.ChunkShape, &m.BlockShape} {
		k, err := d.DecodeArrayLen()
		if err != nil || k != nd {
			return nil, errkind.Errorf(errkind.DataLoss, "b2nd metalayer: a shape of %d values for %d dimensions (%v)", k, nd, err)
		}
		*dst = make([]int64, nd)
		for i := range *dst {
			if (*dst)[i], err = d.DecodeInt64(); err != nil {
				return nil, metaErr(err)
			}
		}
	}
	if n >= 7 {
		if m.DtypeFmt, err = d.DecodeInt(); err != nil {
			return nil, metaErr(err)
		}
		if m.Dtype, err = d.DecodeString(); err != nil {
			return nil, metaErr(err)
		}
	}
	if m.DtypeFmt != 0 {
		return nil, errkind.Errorf(errkind.Unimplemented, "b2nd metalayer: dtype format %d (only NumPy's, 0, is known)", m.DtypeFmt)
	}
	for i := range m.Shape {
		if m.Shape[i] < 0 || m.ChunkShape[i] <= 0 || m.BlockShape[i] <= 0 || m.BlockShape[i] > m.ChunkShape[i] || m.ChunkShape[i] > 1<<31-1 {
			if m.Shape[i] == 0 && m.ChunkShape[i] >= 0 && m.BlockShape[i] >= 0 {
				continue
			}
			return nil, errkind.Errorf(errkind.DataLoss, "b2nd metalayer: dimension %d: shape %d, chunks %d, blocks %d", i, m.Shape[i], m.ChunkShape[i], m.BlockShape[i])
		}
	}
	return m, nil
}

func metaErr(err error) error {
	return errkind.Errorf(errkind.DataLoss, "b2nd metalayer: %v", err)
}

// Encode writes the metalayer as c-blosc2 does (int64 shape, int32 chunk
// and block shapes, str32 dtype).
func (m *Meta) Encode() []byte {
	var b bytes.Buffer
	nd := len(m.Shape)
	b.WriteByte(0x97)
	b.WriteByte(byte(m.Version))
	b.WriteByte(byte(nd))
	b.WriteByte(0x90 + byte(nd))
	for _, v := range m.Shape {
		b.WriteByte(0xd3)
		for k := 7; k >= 0; k-- {
			b.WriteByte(byte(uint64(v) >> (8 * k)))
		}
	}
	for _, s := range [][]int64{m.ChunkShape, m.BlockShape} {
		b.WriteByte(0x90 + byte(nd))
		for _, v := range s {
			b.WriteByte(0xd2)
			for k := 3; k >= 0; k-- {
				b.WriteByte(byte(uint32(v) >> (8 * k)))
			}
		}
	}
	b.WriteByte(byte(m.DtypeFmt))
	b.WriteByte(0xdb)
	n := len(m.Dtype)
	b.Write([]byte{byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)})
	b.WriteString(m.Dtype)
	return b.Bytes()
}

// Kind is a NumPy dtype kind.
type Kind byte

// Field is one field of a dtype (the only one for plain dtypes).
type Field struct {
	Name   string // "value" for plain dtypes
	Kind   Kind   // b i u f c M m S U V
	Size   int    // bytes of one value
	Offset int    // byte offset inside the item
	Big    bool   // big-endian
	Unit   string // datetime/timedelta unit ("s", "ms", "D", ...)
	Dtype  string // the NumPy dtype string
	// Shape, for a subarray field ("('v', '<f4', (2, 3))"), is the
	// subarray's shape and Count its element count: Kind is then the
	// element's kind and Size the bytes of all Count elements.
	Shape []int64
	Count int
}

// ElemSize is the bytes of one element of f (of f itself when it is not
// a subarray).
func (f *Field) ElemSize() int {
	if f.Count > 0 {
		return f.Size / f.Count
	}
	return f.Size
}

// Dtype is a parsed NumPy dtype.
type Dtype struct {
	Str        string
	ItemSize   int
	Fields     []Field
	Structured bool
}

// ParseDtype parses the NumPy dtype strings python-blosc2 writes: a type
// string ("<f8", "|b1", ">M8[ms]", "<U4", "|S3", "|V8") or the repr of a
// structured dtype's descr ("[('a', '<i4'), ('b', '>f8')]").
func ParseDtype(s string) (*Dtype, error) {
	s = strings.TrimSpace(s)
	if strings.HasPrefix(s, "[") {
		v, rest, err := parsePyValue(s, 0)
		if err == nil && strings.TrimSpace(rest) != "" {
			err = fmt.Errorf("trailing %q", rest)
		}
		if err != nil {
			return nil, errkind.Errorf(errkind.Unimplemented, "dtype %q: %v", s, err)
		}
		d := &Dtype{Str: s, Structured: true}
		if err := d.addFields(v, ""); err != nil {
			return nil, errkind.Errorf(errkind.Unimplemented, "dtype %q: %v", s, err)
		}
		if len(d.Fields) == 0 {
			return nil, errkind.Errorf(errkind.Unimplemented, "dtype %q: no fields", s)
		}
		seen := map[string]bool{}
		for _, f := range d.Fields {
			if seen[f.Name] {
				return nil, errkind.Errorf(errkind.Unimplemented, "dtype %q: two fields flatten to %q", s, f.Name)
			}
			seen[f.Name] = true
		}
		return d, nil
	}
	f, err := parseTypeStr(s)
	if err != nil {
		return nil, errkind.Errorf(errkind.Unimplemented, "dtype %q: %v", s, err)
	}
	f.Name = "value"
	return &Dtype{Str: s, ItemSize: f.Size, Fields: []Field{f}}, nil
}

func parseTypeStr(s string) (Field, error) {
	f := Field{Dtype: s}
	if s == "" {
		return f, fmt.Errorf("empty type")
	}
	switch s[0] {
	case '<', '|', '=':
		s = s[1:]
	case '>':
		f.Big = true
		s = s[1:]
	}
	if s == "?" {
		s = "b1" // NumPy's bool in descr lists
	}
	if s == "" {
		return f, fmt.Errorf("no kind")
	}
	f.Kind = Kind(s[0])
	rest := s[1:]
	if i := strings.IndexByte(rest, '['); i >= 0 {
		if !strings.HasSuffix(rest, "]") {
			return f, fmt.Errorf("bad unit in %q", s)
		}
		f.Unit = rest[i+1 : len(rest)-1]
		rest = rest[:i]
	}
	n, err := strconv.Atoi(rest)
	if err != nil || n < 0 || n > 1<<20 {
		return f, fmt.Errorf("bad size in %q", s)
	}
	switch f.Kind {
	case 'b', 'i', 'u', 'f', 'c', 'S', 'V':
		f.Size = n
	case 'U':
		f.Size = 4 * n
	case 'M', 'm':
		f.Size = n
		if n != 8 {
			return f, fmt.Errorf("datetime of %d bytes", n)
		}
		if f.Unit == "" {
			return f, fmt.Errorf("generic datetime without a unit")
		}
	default:
		return f, fmt.Errorf("kind %q is not supported", f.Kind)
	}
	switch f.Kind {
	case 'b':
		if n != 1 {
			return f, fmt.Errorf("bool of %d bytes", n)
		}
	case 'i', 'u':
		if n != 1 && n != 2 && n != 4 && n != 8 {
			return f, fmt.Errorf("integer of %d bytes", n)
		}
	case 'f':
		if n != 2 && n != 4 && n != 8 {
			return f, fmt.Errorf("float of %d bytes", n)
		}
	case 'c':
		if n != 8 && n != 16 {
			return f, fmt.Errorf("complex of %d bytes", n)
		}
	}
	if f.Size == 0 {
		return f, fmt.Errorf("zero-sized type %q", s)
	}
	return f, nil
}

// addFields appends the fields of a structured dtype's descr (a list of
// (name, type) and (name, type, shape) tuples, a type being a type string
// or a nested descr) to d. A nested structure is flattened into its
// leaves, named "outer.inner" (docs/protocol.md, "Blosc2 NDArrays": one attribute per field);
// a subarray field stays one field whose values are fixed-size lists.
// Unnamed fields are numpy's padding: their bytes are skipped.
func (d *Dtype) addFields(v any, prefix string) error {
	list, ok := v.([]any)
	if !ok {
		return fmt.Errorf("a descr is a list, got %T", v)
	}
	for _, e := range list {
		tup, ok := e.(pyTuple)
		if !ok || len(tup) < 2 || len(tup) > 3 {
			return fmt.Errorf("a field is a (name, type[, shape]) tuple, got %v", e)
		}
		name, ok := tup[0].(string)
		if !ok {
			return fmt.Errorf("field name %v (titled fields are not supported)", tup[0])
		}
		count := int64(1)
		var shape []int64
		if len(tup) == 3 {
			sh, ok := tup[2].(pyTuple)
			if !ok {
				return fmt.Errorf("field %q: shape %v", name, tup[2])
			}
			for _, x := range sh {
				n, ok := x.(int64)
				if !ok || n < 0 || n > 1<<20 || count*max(n, 1) > 1<<20 {
					return fmt.Errorf("field %q: shape %v", name, tup[2])
				}
				shape = append(shape, n)
				count *= n
			}
		}
		full := prefix + name
		switch t := tup[1].(type) {
		case []any:
			if name == "" {
				return fmt.Errorf("an unnamed nested field")
			}
			if shape != nil {
				return fmt.Errorf("field %q: a subarray of structures is not supported", full)
			}
			if err := d.addFields(t, full+"."); err != nil {
				return err
			}
		case string:
			f, err := parseTypeStr(t)
			if err != nil {
				return fmt.Errorf("field %q: %v", full, err)
			}
			if name == "" {
				d.ItemSize += f.Size * int(count)
				continue
			}
			f.Name, f.Offset = full, d.ItemSize
			if shape != nil {
				switch f.Kind {
				case 'b', 'i', 'u', 'f':
				default:
					return fmt.Errorf("field %q: subarrays of %s are not supported (bool, integers and floats are)", full, t)
				}
				if count == 0 {
					return fmt.Errorf("field %q: an empty subarray", full)
				}
				f.Shape, f.Count = shape, int(count)
				f.Dtype = fmt.Sprintf("(%s, %v)", t, shape)
				f.Size *= int(count)
			}
			d.ItemSize += f.Size
			d.Fields = append(d.Fields, f)
		default:
			return fmt.Errorf("field %q: type %v", full, tup[1])
		}
	}
	return nil
}

// pyTuple is a parsed Python tuple.
type pyTuple []any

// parsePyValue parses the Python literal at s[i:] that a numpy descr repr
// holds: a list, a tuple, a quoted string or an integer. It returns the
// value and what follows it.
func parsePyValue(s string, depth int) (any, string, error) {
	if depth > 32 {
		return nil, "", fmt.Errorf("nested too deep")
	}
	s = strings.TrimLeft(s, " ")
	if s == "" {
		return nil, "", fmt.Errorf("unexpected end")
	}
	switch c := s[0]; {
	case c == '[' || c == '(':
		closing := byte(']')
		if c == '(' {
			closing = ')'
		}
		var items []any
		s = s[1:]
		for {
			s = strings.TrimLeft(s, " ")
			if s == "" {
				return nil, "", fmt.Errorf("unclosed %c", c)
			}
			if s[0] == closing {
				s = s[1:]
				break
			}
			v, rest, err := parsePyValue(s, depth+1)
			if err != nil {
				return nil, "", err
			}
			items = append(items, v)
			rest = strings.TrimLeft(rest, " ")
			if rest != "" && rest[0] == ',' {
				rest = rest[1:]
			} else if rest == "" || rest[0] != closing {
				return nil, "", fmt.Errorf("want , or %c at %q", closing, rest)
			}
			s = rest
		}
		if c == '(' {
			return pyTuple(items), s, nil
		}
		if items == nil {
			items = []any{}
		}
		return items, s, nil
	case c == '\'' || c == '"':
		end := strings.IndexByte(s[1:], c)
		if end < 0 {
			return nil, "", fmt.Errorf("unclosed string")
		}
		return s[1 : 1+end], s[2+end:], nil
	case c >= '0' && c <= '9':
		k := 0
		for k < len(s) && s[k] >= '0' && s[k] <= '9' {
			k++
		}
		n, err := strconv.ParseInt(s[:k], 10, 64)
		if err != nil {
			return nil, "", err
		}
		return n, s[k:], nil
	}
	return nil, "", fmt.Errorf("unexpected %q", s)
}
