package writer

import (
	"bytes"
	"cmp"
	"context"
	"math"
	"slices"

	"github.com/tileflight/tileflight/format/datatype"
	"github.com/tileflight/tileflight/format/fragmeta"
	"github.com/tileflight/tileflight/format/schema"
	"github.com/tileflight/tileflight/storage"
)

// WriteSparse writes cells of a sparse array given in any order: every
// dimension and attribute has a column. Cells are sorted into the array's
// global order, checked (inside the domain; no duplicate coordinates
// unless the array allows them), cut into tiles of the schema's capacity
// and written as one fragment, or as several committed together when the
// input exceeds opt.MaxFragmentBytes. Nothing is written when validation
// fails.
func WriteSparse(ctx context.Context, st storage.Store, dir string, s *schema.ArraySchema, cols map[string]Column, opt Options) (*Result, error) {
	if err := checkSchema(s); err != nil {
		return nil, err
	}
	if s.IsDense() {
		return nil, invalidf("array %q is dense: write it with a subarray", dir)
	}
	cs, n, err := checkColumns(s, cols, true)
	if err != nil {
		return nil, err
	}
	if err := checkCoords(s, cs, n); err != nil {
		return nil, err
	}
	if n == 0 {
		return &Result{}, nil
	}
	perm := globalOrder(s, cs, n)
	if !s.AllowsDups {
		if i := firstDup(s, cs, perm); i >= 0 {
			return nil, invalidf("duplicate coordinates %s (the array does not allow duplicates)", coordString(s, cs, perm[i]))
		}
	}
	fields, err := newFields(s, true)
	if err != nil {
		return nil, invalidf("array %q: %v", dir, err)
	}
	capacity := int(s.Capacity)
	if capacity <= 0 {
		capacity = int(schema.DefaultCapacity)
	}
	// Split into fragments of whole tiles near the size limit.
	var total int64
	for _, c := range cs {
		total += int64(len(c.data)) + 8*int64(len(c.starts)) + int64(len(c.valid))
	}
	perFrag := n
	if total > opt.maxBytes() {
		perCell := max(total/int64(n), 1)
		perFrag = int(opt.maxBytes()/perCell) / capacity * capacity
		perFrag = max(perFrag, capacity)
	}
	layout := layoutOf(s)
	var frags []*fragment
	for lo := 0; lo < n; lo += perFrag {
		hi := min(lo+perFrag, n)
		fr := &fragment{s: s, layout: layout, fields: fields}
		sorted := gatherAll(fields, cs, perm[lo:hi])
		for t0 := 0; t0 < hi-lo; t0 += capacity {
			t1 := min(t0+capacity, hi-lo)
			tiles := make([]statTile, len(fields))
			for fi, f := range fields {
				tiles[fi] = sliceTile(f, sorted[fi], t0, t1)
			}
			fr.tiles = append(fr.tiles, tiles)
			fr.cellNum = append(fr.cellNum, uint64(t1-t0))
			fr.mbrs = append(fr.mbrs, tileMBR(s, fields, tiles))
		}
		fr.ned = unionMBR(s, fr.mbrs)
		frags = append(frags, fr)
	}
	res, err := writeFragments(ctx, st, dir, frags, opt)
	if err != nil {
		return nil, err
	}
	res.Rows = int64(n)
	return res, nil
}

// gatherAll reorders every field's cells by perm.
func gatherAll(fields []*field, cs map[string]*col, perm []int) []*col {
	out := make([]*col, len(fields))
	for fi, f := range fields {
		c := cs[f.name]
		g := &col{}
		if f.isVar {
			size := uint64(0)
			for _, p := range perm {
				size += c.starts[p+1] - c.starts[p]
			}
			g.data = make([]byte, 0, size)
			g.starts = make([]uint64, len(perm)+1)
			for i, p := range perm {
				g.starts[i] = uint64(len(g.data))
				g.data = append(g.data, c.data[c.starts[p]:c.starts[p+1]]...)
			}
			g.starts[len(perm)] = uint64(len(g.data))
		} else {
			g.data = gatherFixed(c.data, f.cellSize, perm)
		}
		if c.valid != nil {
			g.valid = make([]byte, len(perm))
			for i, p := range perm {
				g.valid[i] = c.valid[p]
			}
		}
		out[fi] = g
	}
	return out
}

func gatherFixed(src []byte, cs int, perm []int) []byte {
	out := make([]byte, len(perm)*cs)
	switch cs {
	case 8:
		s, d := asSlice[uint64](src), asSlice[uint64](out)
		for i, p := range perm {
			d[i] = s[p]
		}
	case 4:
		s, d := asSlice[uint32](src), asSlice[uint32](out)
		for i, p := range perm {
			d[i] = s[p]
		}
	default:
		for i, p := range perm {
			copy(out[i*cs:(i+1)*cs], src[p*cs:(p+1)*cs])
		}
	}
	return out
}

// sliceTile cuts cells [a, b) of a sorted column into a tile.
func sliceTile(f *field, c *col, a, b int) statTile {
	t := statTile{n: b - a, cellSize: f.cellSize}
	if f.isVar {
		base := c.starts[a]
		t.data = c.data[base:c.starts[b]]
		t.offs = make([]uint64, b-a)
		for i := range t.offs {
			t.offs[i] = c.starts[a+i] - base
		}
	} else {
		t.data = c.data[a*f.cellSize : b*f.cellSize]
	}
	if c.valid != nil {
		t.valid = c.valid[a:b]
	}
	return t
}

// dimValue returns coordinate i of dimension d.
func dimValue(d *schema.Dimension, c *col, i int) []byte {
	return c.cell(i, d.Type.Size())
}

// cmpCoord orders two coordinates of one dimension as TileDB does.
func cmpCoord(t datatype.Datatype, isVar bool, a, b []byte) int {
	if isVar {
		return bytes.Compare(a, b)
	}
	switch {
	case t == datatype.Float32 || t == datatype.Float64:
		return cmp.Compare(schema.AsFloat64(t, a), schema.AsFloat64(t, b))
	case t == datatype.Uint64 || !t.IsSigned():
		return cmp.Compare(schema.AsUint64(t, a), schema.AsUint64(t, b))
	}
	return cmp.Compare(schema.AsInt64(t, a), schema.AsInt64(t, b))
}

func tileMBR(s *schema.ArraySchema, fields []*field, tiles []statTile) fragmeta.MBR {
	mbr := make(fragmeta.MBR, len(s.Dimensions))
	na := len(s.Attributes)
	for d := range s.Dimensions {
		dim := &s.Dimensions[d]
		t := &tiles[na+d]
		var lo, hi []byte
		for i := 0; i < t.n; i++ {
			var v []byte
			if dim.IsVar() {
				v = t.varCell(i)
			} else {
				v = t.data[i*t.cellSize : (i+1)*t.cellSize]
			}
			if i == 0 || cmpCoord(dim.Type, dim.IsVar(), v, lo) < 0 {
				lo = v
			}
			if i == 0 || cmpCoord(dim.Type, dim.IsVar(), v, hi) > 0 {
				hi = v
			}
		}
		mbr[d] = fragmeta.Range{Start: clone(lo), End: clone(hi)}
	}
	return mbr
}

func unionMBR(s *schema.ArraySchema, ms []fragmeta.MBR) fragmeta.MBR {
	out := make(fragmeta.MBR, len(s.Dimensions))
	for d := range s.Dimensions {
		dim := &s.Dimensions[d]
		for i, m := range ms {
			if i == 0 || cmpCoord(dim.Type, dim.IsVar(), m[d].Start, out[d].Start) < 0 {
				out[d].Start = m[d].Start
			}
			if i == 0 || cmpCoord(dim.Type, dim.IsVar(), m[d].End, out[d].End) > 0 {
				out[d].End = m[d].End
			}
		}
	}
	return out
}

// orderWord maps a fixed-size coordinate to a uint64 whose unsigned order
// is the coordinate's order.
func orderWord(t datatype.Datatype, b []byte) uint64 {
	switch {
	case t == datatype.Float32 || t == datatype.Float64:
		f := schema.AsFloat64(t, b)
		if f == 0 {
			f = 0 // -0 and +0 are equal coordinates
		}
		u := math.Float64bits(f)
		if u>>63 != 0 {
			return ^u
		}
		return u | 1<<63
	case t == datatype.Uint64 || !t.IsSigned():
		return schema.AsUint64(t, b)
	}
	return uint64(schema.AsInt64(t, b)) ^ 1<<63
}

// tileIndex is the index of the space tile holding coordinate b.
func tileIndex(d *schema.Dimension, b []byte) uint64 {
	t := d.Type
	if t == datatype.Float32 || t == datatype.Float64 {
		lo := schema.AsFloat64(t, d.Lo())
		ext := schema.AsFloat64(t, d.TileExtent)
		return uint64(math.Floor((schema.AsFloat64(t, b) - lo) / ext))
	}
	ext := schema.AsUint64(t, d.TileExtent)
	return (schema.AsUint64(t, b) - schema.AsUint64(t, d.Lo())) / ext
}

// globalOrder returns the permutation that sorts the cells into the
// array's global order (stable, so duplicates keep their input order).
func globalOrder(s *schema.ArraySchema, cs map[string]*col, n int) []int {
	nd := len(s.Dimensions)
	dims := make([]*col, nd)
	for d := range s.Dimensions {
		dims[d] = cs[s.Dimensions[d].Name]
	}
	// Each cell gets a key of words; string coordinates are compared
	// separately where a word says "see dimension d".
	type comp struct {
		word bool
		dim  int
	}
	var comps []comp
	cellOrder := func() []int {
		o := make([]int, nd)
		for i := range o {
			o[i] = i
		}
		if s.CellOrder == schema.ColMajor {
			slices.Reverse(o)
		}
		return o
	}
	var words [][]uint64 // per component that is a word
	addWords := func(f func(i int) uint64) {
		w := make([]uint64, n)
		for i := range w {
			w[i] = f(i)
		}
		words = append(words, w)
		comps = append(comps, comp{word: true, dim: len(words) - 1})
	}
	if s.CellOrder == schema.Hilbert {
		hv := hilbertValues(s, dims, n)
		addWords(func(i int) uint64 { return hv[i] })
		for d := 0; d < nd; d++ {
			dd := &s.Dimensions[d]
			if dd.IsVar() {
				comps = append(comps, comp{dim: d})
			} else {
				c := dims[d]
				addWords(func(i int) uint64 { return orderWord(dd.Type, dimValue(dd, c, i)) })
			}
		}
	} else {
		tileDims := make([]int, nd)
		for i := range tileDims {
			tileDims[i] = i
		}
		if s.TileOrder == schema.ColMajor {
			slices.Reverse(tileDims)
		}
		for _, d := range tileDims {
			dd := &s.Dimensions[d]
			if dd.IsVar() || len(dd.TileExtent) == 0 {
				continue
			}
			c := dims[d]
			addWords(func(i int) uint64 { return tileIndex(dd, dimValue(dd, c, i)) })
		}
		for _, d := range cellOrder() {
			dd := &s.Dimensions[d]
			if dd.IsVar() {
				comps = append(comps, comp{dim: d})
				continue
			}
			c := dims[d]
			addWords(func(i int) uint64 { return orderWord(dd.Type, dimValue(dd, c, i)) })
		}
	}
	perm := make([]int, n)
	for i := range perm {
		perm[i] = i
	}
	slices.SortStableFunc(perm, func(a, b int) int {
		for _, c := range comps {
			if c.word {
				w := words[c.dim]
				if r := cmp.Compare(w[a], w[b]); r != 0 {
					return r
				}
				continue
			}
			col := dims[c.dim]
			if r := bytes.Compare(col.cell(a, 0), col.cell(b, 0)); r != 0 {
				return r
			}
		}
		return 0
	})
	return perm
}

func sameCoords(s *schema.ArraySchema, cs map[string]*col, a, b int) bool {
	for d := range s.Dimensions {
		dd := &s.Dimensions[d]
		c := cs[dd.Name]
		if cmpCoord(dd.Type, dd.IsVar(), dimValue(dd, c, a), dimValue(dd, c, b)) != 0 {
			return false
		}
	}
	return true
}

func firstDup(s *schema.ArraySchema, cs map[string]*col, perm []int) int {
	for i := 1; i < len(perm); i++ {
		if sameCoords(s, cs, perm[i-1], perm[i]) {
			return i
		}
	}
	return -1
}

func coordString(s *schema.ArraySchema, cs map[string]*col, i int) string {
	var b bytes.Buffer
	b.WriteByte('(')
	for d := range s.Dimensions {
		dd := &s.Dimensions[d]
		if d > 0 {
			b.WriteString(", ")
		}
		b.WriteString(dd.Name + "=")
		b.WriteString(schema.FormatValue(dd.Type, dimValue(dd, cs[dd.Name], i)))
	}
	b.WriteByte(')')
	return b.String()
}

var _ = storage.Join
