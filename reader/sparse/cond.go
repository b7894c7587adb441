package sparse

import (
	"bytes"
	"encoding/binary"
	"math"

	"github.com/tileflight/tileflight/format/commits"
	"github.com/tileflight/tileflight/format/datatype"
	"github.com/tileflight/tileflight/format/schema"
	"github.com/tileflight/tileflight/reader/tileio"
)

// deleteCond is one delete commit in the open range.
type deleteCond struct {
	// keep is the stored tree: it selects the cells to keep.
	keep *commits.Node
	// ts is the delete's timestamp; marker is its path in the array,
	// "__commits/NAME.del", as fragments that already applied it list it
	// (TileDB's condition marker).
	ts     uint64
	marker string
	fields []string
}

func condFields(n *commits.Node, seen map[string]bool, out []string) []string {
	if n == nil {
		return out
	}
	if n.Kind == commits.KindValue {
		if !seen[n.Field] {
			seen[n.Field] = true
			out = append(out, n.Field)
		}
		return out
	}
	for _, c := range n.Children {
		out = condFields(c, seen, out)
	}
	return out
}

// condField is a field's tile as a condition sees it; tile nil means the
// fragment does not have the field (an attribute added later).
type condField struct {
	typ      datatype.Datatype
	isVar    bool
	nullable bool
	size     int
	tile     *tileio.Tile
}

func (f *condField) value(i int) (v []byte, null bool) {
	t := f.tile
	if f.nullable && t.Validity != nil && t.Validity[i] == 0 {
		return nil, true
	}
	if f.isVar {
		return t.Data[t.Offset(i):t.Offset(i+1)], false
	}
	return t.Data[i*f.size : (i+1)*f.size], false
}

// evalKeep evaluates a stored delete condition on cell i, with TileDB's
// semantics for sparse cells: a comparison with a null cell is false
// (except the null tests), a field the fragment lacks makes every
// comparison false, and NOT negates its child.
func evalKeep(n *commits.Node, fields map[string]*condField, i int) bool {
	if n == nil {
		return true
	}
	if n.Kind == commits.KindExpr {
		switch n.Combination {
		case commits.And:
			for _, c := range n.Children {
				if !evalKeep(c, fields, i) {
					return false
				}
			}
			return true
		case commits.Or:
			for _, c := range n.Children {
				if evalKeep(c, fields, i) {
					return true
				}
			}
			return false
		default: // Not
			if len(n.Children) == 0 {
				return true
			}
			return !evalKeep(n.Children[0], fields, i)
		}
	}
	switch n.Op {
	case commits.OpAlwaysTrue:
		return true
	case commits.OpAlwaysFalse:
		return false
	}
	f := fields[n.Field]
	if f == nil || f.tile == nil {
		return false
	}
	v, null := f.value(i)
	if n.IsNullTest() {
		if n.Op == commits.OpNE {
			return !null
		}
		return null
	}
	if null {
		return false
	}
	switch n.Op {
	case commits.OpIn, commits.OpNotIn:
		in := false
		for _, m := range n.Members() {
			if c, ok := compareValue(f, v, m); ok && c == 0 {
				in = true
				break
			}
		}
		return in == (n.Op == commits.OpIn)
	}
	c, ok := compareValue(f, v, n.Value)
	if !ok {
		// Unordered (NaN) compares are false except NE.
		return n.Op == commits.OpNE
	}
	switch n.Op {
	case commits.OpLT:
		return c < 0
	case commits.OpLE:
		return c <= 0
	case commits.OpGT:
		return c > 0
	case commits.OpGE:
		return c >= 0
	case commits.OpEQ:
		return c == 0
	case commits.OpNE:
		return c != 0
	}
	return false
}

// compareValue compares a cell value with a condition operand of the
// field's type; ok is false when either is NaN.
func compareValue(f *condField, a, b []byte) (int, bool) {
	if f.isVar || f.typ.IsByteLike() || len(a) != f.size || len(b) != f.size {
		return bytes.Compare(a, b), true
	}
	le := binary.LittleEndian
	switch f.typ {
	case datatype.Float32:
		x, y := math.Float32frombits(le.Uint32(a)), math.Float32frombits(le.Uint32(b))
		if x != x || y != y {
			return 0, false
		}
		return cmpOrdered(float64(x), float64(y)), true
	case datatype.Float64:
		x, y := math.Float64frombits(le.Uint64(a)), math.Float64frombits(le.Uint64(b))
		if x != x || y != y {
			return 0, false
		}
		return cmpOrdered(x, y), true
	}
	d := dimInfo{size: f.size}
	if f.typ.IsSigned() {
		return cmpOrdered(d.int(a), d.int(b)), true
	}
	return cmpOrdered(d.uint(a), d.uint(b)), true
}

// DeleteFields lists the fields a stored delete condition reads.
func DeleteFields(keep *commits.Node) []string {
	return condFields(keep, map[string]bool{}, nil)
}

// KeepCells evaluates a stored delete condition (its keep form, as the
// commit stores it) on the cells of one tile of a fragment of schema s,
// as this reader applies it: keep[i] is set false for the cells the
// delete removes. tiles holds the loaded tiles of the fields
// DeleteFields names; a field missing from it is one the fragment lacks
// (every comparison on it is false). Lifecycle's consolidation uses it
// to compute per-cell delete metadata.
func KeepCells(keep *commits.Node, s *schema.ArraySchema, tiles map[string]*tileio.Tile, out []bool) {
	fields := map[string]*condField{}
	for _, name := range DeleteFields(keep) {
		cf := &condField{}
		if d := s.DimensionIndex(name); d >= 0 {
			dd := &s.Dimensions[d]
			cf.typ, cf.isVar, cf.size = dd.Type, dd.IsVar(), dd.Type.Size()*int(max(dd.CellValNum, 1))
		} else if a := s.AttributeIndex(name); a >= 0 {
			at := &s.Attributes[a]
			cf.typ, cf.isVar, cf.nullable = at.Type, at.IsVar(), at.Nullable
			if !cf.isVar {
				cf.size = int(at.CellSize())
			}
		}
		if cf.isVar {
			cf.size = 0
		}
		cf.tile = tiles[name]
		fields[name] = cf
	}
	for i := range out {
		out[i] = evalKeep(keep, fields, i)
	}
}
