// Package eval evaluates a bound query condition (package query/cond) over
// the buffers of a tile, a column at a time, with TileDB 2.30's semantics:
// a comparison with a null cell is false (only the null tests see nulls),
// NaN compares false except under !=, IN / NOT_IN compare the raw bytes of
// the members, strings compare as unsigned bytes. It also decides from a
// tile's min/max and null count (fragment metadata) whether any cell of
// the tile can pass, so that the read paths skip tiles without reading
// them. The package does no I/O.
package eval

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"unsafe"

	"github.com/tileflight/tileflight/format/commits"
	"github.com/tileflight/tileflight/format/datatype"
	"github.com/tileflight/tileflight/query/cond"
)

// Column is one field's buffers over the cells of a tile.
type Column struct {
	Data []byte
	// Offsets holds n+1 (or n: the last end is len(Data)) little-endian
	// uint64 offsets for var-sized fields; nil for fixed-size fields.
	Offsets []byte
	// Validity holds one byte per cell (0 = null) for nullable fields;
	// nil means every cell is valid.
	Validity []byte
}

// Program is a condition ready to evaluate.
type Program struct {
	c      *cond.Cond
	fields map[string]cond.Field
	temps  [][]bool
}

// New prepares c for evaluation.
func New(c *cond.Cond) *Program {
	p := &Program{c: c, fields: map[string]cond.Field{}}
	for _, f := range c.Fields {
		p.fields[f.Name] = f
	}
	return p
}

// Cond is the condition the program evaluates.
func (p *Program) Cond() *cond.Cond { return p.c }

// Clone returns a program that shares nothing mutable with p (one per
// goroutine).
func (p *Program) Clone() *Program { return &Program{c: p.c, fields: p.fields} }

// Eval sets out[i] to whether cell i (0 <= i < len(out)) passes. cols
// returns the column of a field the condition reads.
func (p *Program) Eval(cols func(name string) (Column, error), out []bool) error {
	return p.eval(p.c.Tree, cols, out, 0)
}

func (p *Program) temp(depth, n int) []bool {
	for len(p.temps) <= depth {
		p.temps = append(p.temps, nil)
	}
	if cap(p.temps[depth]) < n {
		p.temps[depth] = make([]bool, n)
	}
	return p.temps[depth][:n]
}

func (p *Program) eval(n *cond.Node, cols func(string) (Column, error), out []bool, depth int) error {
	if n.Kind == commits.KindExpr {
		if len(n.Children) == 0 {
			for i := range out {
				out[i] = n.Combination == commits.And
			}
			return nil
		}
		if err := p.eval(n.Children[0], cols, out, depth+1); err != nil {
			return err
		}
		tmp := p.temp(depth, len(out))
		for _, c := range n.Children[1:] {
			if err := p.eval(c, cols, tmp, depth+1); err != nil {
				return err
			}
			if n.Combination == commits.And {
				for i, t := range tmp {
					out[i] = out[i] && t
				}
			} else {
				for i, t := range tmp {
					out[i] = out[i] || t
				}
			}
		}
		return nil
	}
	switch n.Op {
	case commits.OpAlwaysTrue, commits.OpAlwaysFalse:
		v := n.Op == commits.OpAlwaysTrue
		for i := range out {
			out[i] = v
		}
		return nil
	}
	f, ok := p.fields[n.Field]
	if !ok {
		return fmt.Errorf("condition reads field %q, which it did not bind", n.Field)
	}
	col, err := cols(n.Field)
	if err != nil {
		return err
	}
	cells := len(out)
	if col.Validity != nil && len(col.Validity) < cells {
		return fmt.Errorf("field %q: %d validity bytes for %d cells", n.Field, len(col.Validity), cells)
	}
	if n.Null {
		want := n.Op == commits.OpNE // != None: the valid cells
		for i := range out {
			out[i] = col.Validity == nil || col.Validity[i] != 0
			if !want {
				out[i] = !out[i]
			}
		}
		return nil
	}
	if f.IsVar() || cond.IsString(f.Type) {
		if err := evalBytes(f, n, col, out); err != nil {
			return err
		}
	} else if err := evalFixed(f, n, col, out); err != nil {
		return err
	}
	if col.Validity != nil {
		for i := range out {
			out[i] = out[i] && col.Validity[i] != 0
		}
	}
	return nil
}

func evalFixed(f cond.Field, n *cond.Node, col Column, out []bool) error {
	size := f.Type.Size()
	cells := len(out)
	if len(col.Data) < cells*size {
		return fmt.Errorf("field %q: %d bytes for %d cells of %d", f.Name, len(col.Data), cells, size)
	}
	if cells == 0 {
		return nil
	}
	if n.Op.IsSet() {
		switch size {
		case 1:
			inBits[uint8](col.Data, n.Members, n.Op, out)
		case 2:
			inBits[uint16](col.Data, n.Members, n.Op, out)
		case 4:
			inBits[uint32](col.Data, n.Members, n.Op, out)
		case 8:
			inBits[uint64](col.Data, n.Members, n.Op, out)
		default:
			return fmt.Errorf("field %q: values of %d bytes", f.Name, size)
		}
		return nil
	}
	if len(n.Value) != size {
		return fmt.Errorf("field %q: operand of %d bytes for a %d-byte type", f.Name, len(n.Value), size)
	}
	switch f.Type {
	case datatype.Int8:
		cmpNum(col.Data, n.Op, int8(n.Value[0]), out)
	case datatype.Uint8, datatype.Bool:
		cmpNum(col.Data, n.Op, n.Value[0], out)
	case datatype.Int16:
		cmpNum(col.Data, n.Op, int16(binary.LittleEndian.Uint16(n.Value)), out)
	case datatype.Uint16:
		cmpNum(col.Data, n.Op, binary.LittleEndian.Uint16(n.Value), out)
	case datatype.Int32:
		cmpNum(col.Data, n.Op, int32(binary.LittleEndian.Uint32(n.Value)), out)
	case datatype.Uint32:
		cmpNum(col.Data, n.Op, binary.LittleEndian.Uint32(n.Value), out)
	case datatype.Uint64:
		cmpNum(col.Data, n.Op, binary.LittleEndian.Uint64(n.Value), out)
	case datatype.Float32:
		cmpNum(col.Data, n.Op, math.Float32frombits(binary.LittleEndian.Uint32(n.Value)), out)
	case datatype.Float64:
		cmpNum(col.Data, n.Op, math.Float64frombits(binary.LittleEndian.Uint64(n.Value)), out)
	default:
		if f.Type == datatype.Int64 || f.Type.IsDatetime() || f.Type.IsTime() {
			cmpNum(col.Data, n.Op, int64(binary.LittleEndian.Uint64(n.Value)), out)
			return nil
		}
		return fmt.Errorf("field %q: type %s cannot be compared", f.Name, f.Type.TileDBName())
	}
	return nil
}

type number interface {
	~int8 | ~uint8 | ~int16 | ~uint16 | ~int32 | ~uint32 | ~int64 | ~uint64 | ~float32 | ~float64
}

// view reinterprets little-endian cell bytes as values (every platform Go
// supports without cgo here is little-endian and tolerates unaligned loads).
func view[T number](data []byte, n int) []T {
	return unsafe.Slice((*T)(unsafe.Pointer(unsafe.SliceData(data))), n)
}

func cmpNum[T number](data []byte, op commits.Op, v T, out []bool) {
	xs := view[T](data, len(out))
	switch op {
	case commits.OpLT:
		for i, x := range xs {
			out[i] = x < v
		}
	case commits.OpLE:
		for i, x := range xs {
			out[i] = x <= v
		}
	case commits.OpGT:
		for i, x := range xs {
			out[i] = x > v
		}
	case commits.OpGE:
		for i, x := range xs {
			out[i] = x >= v
		}
	case commits.OpEQ:
		for i, x := range xs {
			out[i] = x == v
		}
	case commits.OpNE:
		for i, x := range xs {
			out[i] = x != v
		}
	default:
		clear(out)
	}
}

// inBits tests set membership on the raw bits of each cell, as TileDB
// compares the members' bytes (so NaN is a member of a set holding that
// NaN, and -0.0 is not a member of {0.0}).
func inBits[U uint8 | uint16 | uint32 | uint64](data []byte, members [][]byte, op commits.Op, out []bool) {
	var size = int(unsafe.Sizeof(U(0)))
	set := make([]U, 0, len(members))
	for _, m := range members {
		if len(m) != size {
			continue
		}
		var u uint64
		for k := size - 1; k >= 0; k-- {
			u = u<<8 | uint64(m[k])
		}
		set = append(set, U(u))
	}
	xs := view[U](data, len(out))
	want := op == commits.OpIn
	if len(set) <= 16 {
		for i, x := range xs {
			in := false
			for _, s := range set {
				if x == s {
					in = true
					break
				}
			}
			out[i] = in == want
		}
		return
	}
	m := make(map[U]struct{}, len(set))
	for _, s := range set {
		m[s] = struct{}{}
	}
	for i, x := range xs {
		_, in := m[x]
		out[i] = in == want
	}
}

func evalBytes(f cond.Field, n *cond.Node, col Column, out []bool) error {
	cells := len(out)
	var cell func(i int) []byte
	if f.IsVar() {
		no := len(col.Offsets) / 8
		if no < cells {
			return fmt.Errorf("field %q: %d offsets for %d cells", f.Name, no, cells)
		}
		off := func(i int) uint64 {
			if i == no {
				return uint64(len(col.Data))
			}
			return binary.LittleEndian.Uint64(col.Offsets[8*i:])
		}
		for i := 0; i < cells; i++ {
			if s, e := off(i), off(i+1); s > e || e > uint64(len(col.Data)) {
				return fmt.Errorf("field %q: cell %d: offsets %d..%d outside %d bytes", f.Name, i, s, e, len(col.Data))
			}
		}
		cell = func(i int) []byte { return col.Data[off(i):off(i+1)] }
	} else {
		size := f.Type.Size() * int(f.CellValNum)
		if len(col.Data) < cells*size {
			return fmt.Errorf("field %q: %d bytes for %d cells of %d", f.Name, len(col.Data), cells, size)
		}
		cell = func(i int) []byte { return col.Data[i*size : (i+1)*size] }
	}
	if n.Op.IsSet() {
		set := make(map[string]struct{}, len(n.Members))
		for _, m := range n.Members {
			set[string(m)] = struct{}{}
		}
		want := n.Op == commits.OpIn
		for i := range out {
			_, in := set[string(cell(i))]
			out[i] = in == want
		}
		return nil
	}
	v := n.Value
	for i := range out {
		c := bytes.Compare(cell(i), v)
		switch n.Op {
		case commits.OpLT:
			out[i] = c < 0
		case commits.OpLE:
			out[i] = c <= 0
		case commits.OpGT:
			out[i] = c > 0
		case commits.OpGE:
			out[i] = c >= 0
		case commits.OpEQ:
			out[i] = c == 0
		case commits.OpNE:
			out[i] = c != 0
		default:
			out[i] = false
		}
	}
	return nil
}

// FillColumn is n cells of a fill value (fragments written before an
// attribute was added hold it implicitly).
func FillColumn(fill []byte, valid, isVar bool, n int) Column {
	c := Column{}
	if isVar {
		c.Data = bytes.Repeat(fill, n)
		c.Offsets = make([]byte, 8*(n+1))
		for i := 0; i <= n; i++ {
			binary.LittleEndian.PutUint64(c.Offsets[8*i:], uint64(i*len(fill)))
		}
	} else {
		c.Data = bytes.Repeat(fill, n)
	}
	if !valid {
		c.Validity = make([]byte, n)
	}
	return c
}
