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
		fs, err := parseDescr(s)
		if err != nil {
			return nil, errkind.Errorf(errkind.Unimplemented, "dtype %q: %v", s, err)
		}
		d := &Dtype{Str: s, Structured: true}
		for _, f := range fs {
			if f[0] == "" {
				// numpy pads with unnamed void fields: skip their bytes.
				pf, err := parseTypeStr(f[1])
				if err != nil {
					return nil, errkind.Errorf(errkind.Unimplemented, "dtype %q: %v", s, err)
				}
				d.ItemSize += pf.Size
				continue
			}
			pf, err := parseTypeStr(f[1])
			if err != nil {
				return nil, errkind.Errorf(errkind.Unimplemented, "dtype %q: field %q: %v", s, f[0], err)
			}
			pf.Name = f[0]
			pf.Offset = d.ItemSize
			d.ItemSize += pf.Size
			d.Fields = append(d.Fields, pf)
		}
		if len(d.Fields) == 0 {
			return nil, errkind.Errorf(errkind.Unimplemented, "dtype %q: no fields", s)
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

// parseDescr parses "[('a', '<i4'), ('b', '>f8')]" into name/type pairs.
// Fields with a subarray shape or a nested structure are not supported.
func parseDescr(s string) ([][2]string, error) {
	s = strings.TrimSpace(s)
	if !strings.HasPrefix(s, "[") || !strings.HasSuffix(s, "]") {
		return nil, fmt.Errorf("not a list")
	}
	body := s[1 : len(s)-1]
	var out [][2]string
	for {
		body = strings.TrimLeft(body, " ,")
		if body == "" {
			break
		}
		if body[0] != '(' {
			return nil, fmt.Errorf("want a tuple at %q", body)
		}
		end := strings.IndexByte(body, ')')
		if end < 0 {
			return nil, fmt.Errorf("unclosed tuple")
		}
		tup := body[1:end]
		body = body[end+1:]
		if strings.ContainsAny(tup, "(") {
			return nil, fmt.Errorf("nested or subarray fields are not supported")
		}
		parts := strings.Split(tup, ",")
		if len(parts) < 2 || (len(parts) == 3 && strings.TrimSpace(parts[2]) != "") || len(parts) > 3 {
			return nil, fmt.Errorf("field tuple %q", tup)
		}
		name, err := pyStr(parts[0])
		if err != nil {
			return nil, err
		}
		typ, err := pyStr(parts[1])
		if err != nil {
			return nil, err
		}
		out = append(out, [2]string{name, typ})
	}
	return out, nil
}

func pyStr(s string) (string, error) {
	s = strings.TrimSpace(s)
	if len(s) < 2 || (s[0] != '\'' && s[0] != '"') || s[len(s)-1] != s[0] {
		return "", fmt.Errorf("want a quoted string, got %q", s)
	}
	return s[1 : len(s)-1], nil
}
