package eval

import (
	"bytes"
	"encoding/binary"
	"math"

	"github.com/tileflight/tileflight/format/commits"
	"github.com/tileflight/tileflight/format/datatype"
	"github.com/tileflight/tileflight/query/cond"
)

// Stats is what the fragment metadata says about one field in one tile.
type Stats struct {
	// Min and Max are one value of the field's type (strings: the bytes);
	// nil when the metadata keeps none.
	Min, Max []byte
	// NullCount is the number of null cells, when HasNullCount.
	NullCount    uint64
	HasNullCount bool
	// Cells is the number of cells of the tile.
	Cells uint64
}

// MayMatch reports whether some cell of a tile can pass, judging from the
// tile statistics that stats returns (ok false: nothing is known about the
// field). It errs on the side of true: false means no cell can pass.
func (p *Program) MayMatch(stats func(name string) (Stats, bool, error)) (bool, error) {
	return p.may(p.c.Tree, stats)
}

func (p *Program) may(n *cond.Node, stats func(string) (Stats, bool, error)) (bool, error) {
	if n.Kind == commits.KindExpr {
		for _, c := range n.Children {
			m, err := p.may(c, stats)
			if err != nil {
				return true, err
			}
			if n.Combination == commits.And && !m {
				return false, nil
			}
			if n.Combination == commits.Or && m {
				return true, nil
			}
		}
		return n.Combination == commits.And || len(n.Children) == 0, nil
	}
	switch n.Op {
	case commits.OpAlwaysFalse:
		return false, nil
	case commits.OpAlwaysTrue:
		return true, nil
	}
	f, ok := p.fields[n.Field]
	if !ok {
		return true, nil
	}
	st, ok, err := stats(n.Field)
	if err != nil || !ok {
		return true, err
	}
	if n.Null {
		if !st.HasNullCount {
			return true, nil
		}
		if n.Op == commits.OpEQ {
			return st.NullCount > 0, nil
		}
		return st.NullCount < st.Cells, nil
	}
	if f.Nullable && st.HasNullCount && st.NullCount >= st.Cells {
		return false, nil // every cell is null: no comparison passes
	}
	if st.Min == nil || st.Max == nil || f.Type.IsFloat() {
		// Float bounds are not trusted: TileDB computes them with a
		// comparison that a NaN cell derails (a tile's minimum can miss
		// values after a NaN), so they cannot prove that no cell passes.
		return true, nil
	}
	cmp := func(a, b []byte) (int, bool) { return compareRaw(f, a, b) }
	switch n.Op {
	case commits.OpIn:
		for _, m := range n.Members {
			lo, ok1 := cmp(m, st.Min)
			hi, ok2 := cmp(m, st.Max)
			if !ok1 || !ok2 || lo >= 0 && hi <= 0 {
				return true, nil
			}
		}
		return false, nil
	case commits.OpNE, commits.OpNotIn:
		// Only prunable when every cell holds one value; floats may hide
		// NaN cells the bounds leave out.
		if f.Type.IsFloat() || !bytes.Equal(st.Min, st.Max) {
			return true, nil
		}
		if n.Op == commits.OpNE {
			return !bytes.Equal(st.Min, n.Value), nil
		}
		for _, m := range n.Members {
			if bytes.Equal(m, st.Min) {
				return false, nil
			}
		}
		return true, nil
	}
	lo, ok1 := cmp(st.Min, n.Value)
	hi, ok2 := cmp(st.Max, n.Value)
	if !ok1 || !ok2 {
		return true, nil
	}
	switch n.Op {
	case commits.OpLT:
		return lo < 0, nil
	case commits.OpLE:
		return lo <= 0, nil
	case commits.OpGT:
		return hi > 0, nil
	case commits.OpGE:
		return hi >= 0, nil
	case commits.OpEQ:
		return lo <= 0 && hi >= 0, nil
	}
	return true, nil
}

// compareRaw compares two values of f's type; ok is false when the order
// is unknown (NaN, or sizes that do not fit the type).
func compareRaw(f cond.Field, a, b []byte) (int, bool) {
	if f.IsVar() || cond.IsString(f.Type) {
		return bytes.Compare(a, b), true
	}
	size := f.Type.Size()
	if len(a) != size || len(b) != size {
		return 0, false
	}
	le := binary.LittleEndian
	switch f.Type {
	case datatype.Float32:
		return cmpFloat(float64(math.Float32frombits(le.Uint32(a))), float64(math.Float32frombits(le.Uint32(b))))
	case datatype.Float64:
		return cmpFloat(math.Float64frombits(le.Uint64(a)), math.Float64frombits(le.Uint64(b)))
	}
	var x, y uint64
	for k := size - 1; k >= 0; k-- {
		x = x<<8 | uint64(a[k])
		y = y<<8 | uint64(b[k])
	}
	if f.Type.IsSigned() {
		sh := uint(64 - 8*size)
		xs, ys := int64(x<<sh)>>sh, int64(y<<sh)>>sh
		return cmp3(xs, ys), true
	}
	return cmp3(x, y), true
}

func cmpFloat(x, y float64) (int, bool) {
	if x != x || y != y {
		return 0, false
	}
	return cmp3(x, y), true
}

func cmp3[T int64 | uint64 | float64](x, y T) int {
	switch {
	case x < y:
		return -1
	case x > y:
		return 1
	}
	return 0
}
