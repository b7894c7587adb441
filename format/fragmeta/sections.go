package fragmeta

import (
	"fmt"
	"math"

	"github.com/tileflight/tileflight/format/wire"
)

// RTree is a fragment's R-tree: Levels[0] is the root level and the last
// level holds one MBR per tile (the leaves). Dense fragments have none.
type RTree struct {
	Fanout uint32
	Levels [][]MBR
}

// Leaves returns the leaf level (nil for an empty tree).
func (t *RTree) Leaves() []MBR {
	if t == nil || len(t.Levels) == 0 {
		return nil
	}
	return t.Levels[len(t.Levels)-1]
}

// DecodeRTree decodes an R-tree section payload. Before v5 the tree also
// recorded the dimension count and one datatype, which are checked against
// the layout; fixed-size MBR bounds alias payload.
func DecodeRTree(payload []byte, l Layout, version uint32) (*RTree, error) {
	if err := l.check(); err != nil {
		return nil, err
	}
	r := wire.NewReader(payload)
	t := &RTree{}
	if version < versionSplitCoords {
		if err := l.checkZipped(); err != nil {
			return nil, err
		}
		dn := r.Uint32("R-tree: dimension number")
		t.Fanout = r.Uint32("R-tree: fanout")
		r.Uint8("R-tree: datatype")
		if r.Err() == nil && int(dn) != len(l.Dims) {
			return nil, corrupt("R-tree: %d dimensions, schema has %d", dn, len(l.Dims))
		}
	} else {
		t.Fanout = r.Uint32("R-tree: fanout")
	}
	levels := r.Uint32("R-tree: level number")
	minMBR := minMBRSize(&l)
	// Every level needs at least its 8-byte MBR count.
	if !r.CheckCount(uint64(levels), 8, "R-tree: levels") {
		return nil, rtreeErr(r.Err())
	}
	t.Levels = make([][]MBR, 0, levels)
	for lv := uint32(0); lv < levels; lv++ {
		n := r.Count(8, minMBR, fmt.Sprintf("R-tree: level %d MBR number", lv))
		if r.Err() != nil {
			return nil, rtreeErr(r.Err())
		}
		level := make([]MBR, n)
		for m := range level {
			level[m] = readMBR(r, &l, version, "R-tree: MBR")
			if r.Err() != nil {
				return nil, rtreeErr(fmt.Errorf("level %d MBR %d: %w", lv, m, r.Err()))
			}
		}
		t.Levels = append(t.Levels, level)
	}
	if r.Err() != nil {
		return nil, rtreeErr(r.Err())
	}
	return t, nil
}

func rtreeErr(err error) error { return fmt.Errorf("fragment metadata R-tree: %w", err) }

func readMBR(r *wire.Reader, l *Layout, version uint32, what string) MBR {
	m := make(MBR, len(l.Dims))
	for d, dim := range l.Dims {
		m[d] = readRange(r, dim, version, what)
	}
	return m
}

// EncodeRTree serializes t (v5 and later layout).
func EncodeRTree(t *RTree, l *Layout) ([]byte, error) {
	w := wire.NewWriter(nil)
	w.Uint32(t.Fanout)
	w.Uint32(uint32(len(t.Levels)))
	for lv, level := range t.Levels {
		w.Uint64(uint64(len(level)))
		for m, mbr := range level {
			if len(mbr) != len(l.Dims) {
				return nil, fmt.Errorf("fragment metadata R-tree: level %d MBR %d has %d ranges for %d dimensions", lv, m, len(mbr), len(l.Dims))
			}
			for d, dim := range l.Dims {
				if !dim.Var() && (len(mbr[d].Start) != dim.Type.Size() || len(mbr[d].End) != dim.Type.Size()) {
					return nil, fmt.Errorf("fragment metadata R-tree: level %d MBR %d dimension %q: want %d-byte bounds", lv, m, dim.Name, dim.Type.Size())
				}
				writeRange(w, dim, mbr[d])
			}
		}
	}
	return w.Bytes(), nil
}

// encodeZippedRTree serializes t in the layout of versions 3 and 4, which
// also recorded the dimension count and the domain's one datatype.
func encodeZippedRTree(t *RTree, l *Layout) ([]byte, error) {
	if err := l.checkZipped(); err != nil {
		return nil, err
	}
	tree, err := EncodeRTree(t, l)
	if err != nil {
		return nil, err
	}
	w := wire.NewWriter(make([]byte, 0, len(tree)+5))
	w.Uint32(uint32(len(l.Dims)))
	w.Uint32(t.Fanout)
	w.Uint8(uint8(l.Dims[0].Type))
	return append(w.Bytes(), tree[4:]...), nil
}

// DefaultFanout is the R-tree fanout TileDB uses.
const DefaultFanout = 10

// BuildRTree builds the upper levels over leaves (one MBR per tile) the way
// TileDB does: groups of fanout MBRs are merged level by level up to a
// single root, with the height TileDB computes.
func BuildRTree(leaves []MBR, fanout uint32, l *Layout) (*RTree, error) {
	if fanout < 2 {
		return nil, fmt.Errorf("fragment metadata R-tree: fanout %d", fanout)
	}
	t := &RTree{Fanout: fanout}
	if len(leaves) == 0 {
		return t, nil
	}
	levels := [][]MBR{leaves}
	if len(leaves) > 1 {
		// TileDB derives the height from a floating-point logarithm; doing
		// the same keeps the level count identical for every leaf count.
		height := int(math.Ceil(math.Log(float64(len(leaves)))/math.Log(float64(fanout)))) + 1
		for i := 0; i < height-1; i++ {
			prev := levels[len(levels)-1]
			next := make([]MBR, (len(prev)+int(fanout)-1)/int(fanout))
			for j := range next {
				lo := j * int(fanout)
				hi := min(lo+int(fanout), len(prev))
				m, err := unionMBRs(prev[lo:hi], l)
				if err != nil {
					return nil, err
				}
				next[j] = m
			}
			levels = append(levels, next)
		}
	}
	for i, j := 0, len(levels)-1; i < j; i, j = i+1, j-1 {
		levels[i], levels[j] = levels[j], levels[i]
	}
	t.Levels = levels
	return t, nil
}

func unionMBRs(ms []MBR, l *Layout) (MBR, error) {
	out := make(MBR, len(l.Dims))
	for d, dim := range l.Dims {
		var lo, hi []byte
		for i, m := range ms {
			if len(m) != len(l.Dims) {
				return nil, fmt.Errorf("fragment metadata R-tree: MBR has %d ranges for %d dimensions", len(m), len(l.Dims))
			}
			if i == 0 {
				lo, hi = m[d].Start, m[d].End
				continue
			}
			if Compare(dim, m[d].Start, lo) < 0 {
				lo = m[d].Start
			}
			if Compare(dim, m[d].End, hi) > 0 {
				hi = m[d].End
			}
		}
		out[d] = Range{Start: lo, End: hi}
	}
	return out, nil
}

// U64List decodes the sections that are a count followed by that many
// uint64 values: tile offsets, var offsets, var sizes, validity offsets,
// sums (raw 8-byte values) and null counts.
func U64List(payload []byte, what string) ([]uint64, error) {
	r := wire.NewReader(payload)
	n := r.Count(8, 8, what+": count")
	if r.Err() != nil {
		return nil, fmt.Errorf("fragment metadata %s: %w", what, r.Err())
	}
	out := make([]uint64, n)
	for i := range out {
		out[i] = r.Uint64(what)
	}
	return out, nil
}

// EncodeU64List is the inverse of U64List.
func EncodeU64List(v []uint64) []byte {
	w := wire.NewWriter(make([]byte, 0, 8+8*len(v)))
	w.Uint64(uint64(len(v)))
	for _, x := range v {
		w.Uint64(x)
	}
	return w.Bytes()
}

// MinMax is a tile mins or maxes section (and the v23 global-order bounds).
// For fixed-size fields Fixed holds one cell per tile; for var-sized fields
// Fixed holds one uint64 offset per tile into Var. Both are empty when
// TileDB keeps no such metadata for the field.
type MinMax struct {
	Fixed []byte
	Var   []byte
}

// DecodeMinMax decodes a mins/maxes payload.
func DecodeMinMax(payload []byte, what string) (MinMax, error) {
	r := wire.NewReader(payload)
	n := r.Uint64(what + ": size")
	nv := r.Uint64(what + ": var size")
	var m MinMax
	// TileDB reads the var part only when the fixed part is not empty.
	if n != 0 {
		m.Fixed = r.BytesU64(n, what)
		m.Var = r.BytesU64(nv, what+": var data")
	}
	if r.Err() != nil {
		return MinMax{}, fmt.Errorf("fragment metadata %s: %w", what, r.Err())
	}
	return m, nil
}

// EncodeMinMax is the inverse of DecodeMinMax.
func EncodeMinMax(m MinMax) []byte {
	w := wire.NewWriter(make([]byte, 0, 16+len(m.Fixed)+len(m.Var)))
	w.Uint64(uint64(len(m.Fixed)))
	w.Uint64(uint64(len(m.Var)))
	w.Write(m.Fixed)
	w.Write(m.Var)
	return w.Bytes()
}

// Value returns tile t's bound: cellSize bytes for fixed-size fields
// (cellSize > 0), the var bytes for var-sized ones (cellSize == 0). ok is
// false when the section holds no value for t.
func (m MinMax) Value(t uint64, cellSize uint64) (v []byte, ok bool, err error) {
	if len(m.Fixed) == 0 {
		return nil, false, nil
	}
	if cellSize > 0 {
		n := uint64(len(m.Fixed)) / cellSize
		if t >= n {
			return nil, false, nil
		}
		return m.Fixed[t*cellSize : (t+1)*cellSize : (t+1)*cellSize], true, nil
	}
	n := uint64(len(m.Fixed)) / 8
	if t >= n {
		return nil, false, nil
	}
	r := wire.NewReader(m.Fixed[t*8:])
	start := r.Uint64("offset")
	end := uint64(len(m.Var))
	if t+1 < n {
		end = wire.NewReader(m.Fixed[(t+1)*8:]).Uint64("offset")
	}
	if start > end || end > uint64(len(m.Var)) {
		return nil, false, corrupt("tile %d: var bound [%d, %d) outside %d bytes", t, start, end, len(m.Var))
	}
	return m.Var[start:end:end], true, nil
}

// FieldStats is one field's fragment-level min, max, sum and null count.
// Sum holds the raw 8 bytes (int64, uint64 or float64 by field type).
type FieldStats struct {
	Min, Max  []byte
	Sum       uint64
	NullCount uint64
}

// DecodeFragmentStats decodes the fragment min/max/sum/null count section
// for num fields.
func DecodeFragmentStats(payload []byte, num int) ([]FieldStats, error) {
	r := wire.NewReader(payload)
	if !r.CheckCount(uint64(num), 32, "fragment stats") {
		return nil, fmt.Errorf("fragment metadata fragment stats: %w", r.Err())
	}
	out := make([]FieldStats, num)
	for i := range out {
		out[i].Min = r.BytesU64(r.Uint64("min size"), "min")
		out[i].Max = r.BytesU64(r.Uint64("max size"), "max")
		out[i].Sum = r.Uint64("sum")
		out[i].NullCount = r.Uint64("null count")
		if r.Err() != nil {
			return nil, fmt.Errorf("fragment metadata fragment stats: field %d: %w", i, r.Err())
		}
	}
	return out, nil
}

// EncodeFragmentStats is the inverse of DecodeFragmentStats.
func EncodeFragmentStats(s []FieldStats) []byte {
	w := wire.NewWriter(nil)
	for _, f := range s {
		w.Uint64(uint64(len(f.Min)))
		w.Write(f.Min)
		w.Uint64(uint64(len(f.Max)))
		w.Write(f.Max)
		w.Uint64(f.Sum)
		w.Uint64(f.NullCount)
	}
	return w.Bytes()
}

// DecodeProcessedConditions decodes the list of delete/update condition
// marker names already applied to a fragment.
func DecodeProcessedConditions(payload []byte) ([]string, error) {
	r := wire.NewReader(payload)
	n := r.Count(8, 8, "processed conditions: count")
	out := make([]string, 0, n)
	for i := 0; i < n && r.Err() == nil; i++ {
		out = append(out, string(r.BytesU64(r.Uint64("condition size"), "condition")))
	}
	if r.Err() != nil {
		return nil, fmt.Errorf("fragment metadata processed conditions: %w", r.Err())
	}
	return out, nil
}

// EncodeProcessedConditions is the inverse of DecodeProcessedConditions.
func EncodeProcessedConditions(c []string) []byte {
	w := wire.NewWriter(nil)
	w.Uint64(uint64(len(c)))
	for _, s := range c {
		w.Uint64(uint64(len(s)))
		w.String(s)
	}
	return w.Bytes()
}
