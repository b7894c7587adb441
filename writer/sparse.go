package writer

import (
	"bytes"
	"cmp"
	"context"
	"math"
	"runtime"
	"sync"
	"sync/atomic"

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
	if err := checkArrayKey(ctx, st, dir, s.Name, opt.EncryptionKey); err != nil {
		return nil, err
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
	sc, err := globalOrder(s, cs, n)
	if err != nil {
		return nil, err
	}
	if !s.AllowsDups {
		if i := firstDup(sc); i >= 0 {
			return nil, invalidf("duplicate coordinates %s (the array does not allow duplicates)", coordString(s, cs, int(sc.perm[i])))
		}
	}
	fields, err := newFields(s, true, opt.EncryptionKey)
	if err != nil {
		return nil, invalidf("array %q: %v", dir, err)
	}
	capacity := capacityOf(s)
	// Split into fragments of whole tiles near the size limit; the cells
	// are sorted first, so the fragments do not overlap.
	perFrag := n
	if total := colsBytes(cs); total > opt.maxBytes() {
		perCell := max(total/int64(n), 1)
		perFrag = int(opt.maxBytes()/perCell) / capacity * capacity
		perFrag = max(perFrag, capacity)
	}
	layout := layoutOf(s)
	var frags []*fragment
	for lo := 0; lo < n; lo += perFrag {
		hi := min(lo+perFrag, n)
		frags = append(frags, sparseFragment(s, layout, fields, cs, sc.perm[lo:hi], opt.Concurrency))
	}
	res, err := writeFragments(ctx, st, dir, frags, opt)
	if err != nil {
		return nil, err
	}
	res.Rows = int64(n)
	return res, nil
}

func capacityOf(s *schema.ArraySchema) int {
	if s.Capacity <= 0 {
		return int(schema.DefaultCapacity)
	}
	return int(s.Capacity)
}

// colsBytes is the memory the columns hold.
func colsBytes(cs map[string]*col) int64 {
	var total int64
	for _, c := range cs {
		total += int64(len(c.data)) + 8*int64(len(c.starts)) + int64(len(c.valid))
	}
	return total
}

// sparseFragment gathers the cells perm into global order and describes
// the fragment they make: tiles of the schema's capacity, sliced (not
// copied) from the gathered columns when a worker asks for them.
func sparseFragment(s *schema.ArraySchema, layout fragmeta.Layout, fields []*field, cs map[string]*col, perm []uint32, conc int) *fragment {
	n := len(perm)
	capacity := capacityOf(s)
	fr := &fragment{s: s, layout: layout, fields: fields, hasTS: hasTimestampsAttr(s), hasDel: hasDeleteAttrs(s)}
	sorted := gatherAll(fields, cs, perm, conc)
	fr.ntiles = (n + capacity - 1) / capacity
	fr.cellNum = make([]uint64, fr.ntiles)
	fr.mbrs = make([]fragmeta.MBR, fr.ntiles)
	na := len(s.Attributes)
	for t := range fr.cellNum {
		t0, t1 := t*capacity, min((t+1)*capacity, n)
		fr.cellNum[t] = uint64(t1 - t0)
		mbr := make(fragmeta.MBR, len(s.Dimensions))
		for d := range s.Dimensions {
			mbr[d] = dimRange(&s.Dimensions[d], sorted[na+d], t0, t1)
		}
		fr.mbrs[t] = mbr
	}
	fr.ned = unionMBR(s, fr.mbrs)
	fr.tile = func(t, fi int, sc *scratch) statTile {
		t0, t1 := t*capacity, min((t+1)*capacity, n)
		return sliceTile(fields[fi], sorted[fi], t0, t1, sc)
	}
	return fr
}

// gatherAll reorders every field's cells by perm.
func gatherAll(fields []*field, cs map[string]*col, perm []uint32, conc int) []*col {
	out := make([]*col, len(fields))
	parallelDo(len(fields), conc, func(fi int) {
		f := fields[fi]
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
	})
	return out
}

// parallelDo runs f(0..n-1) on at most conc goroutines.
func parallelDo(n, conc int, f func(i int)) {
	if conc <= 0 {
		conc = runtime.GOMAXPROCS(0)
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for w := 0; w < min(conc, n); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				f(i)
			}
		}()
	}
	wg.Wait()
}

func gatherFixed(src []byte, cs int, perm []uint32) []byte {
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
	case 2:
		s, d := asSlice[uint16](src), asSlice[uint16](out)
		for i, p := range perm {
			d[i] = s[p]
		}
	case 1:
		for i, p := range perm {
			out[i] = src[p]
		}
	default:
		for i, p := range perm {
			q := int(p)
			copy(out[i*cs:(i+1)*cs], src[q*cs:(q+1)*cs])
		}
	}
	return out
}

// sliceTile cuts cells [a, b) of a sorted column into a tile.
func sliceTile(f *field, c *col, a, b int, sc *scratch) statTile {
	t := statTile{n: b - a, cellSize: f.cellSize}
	if f.isVar {
		base := c.starts[a]
		t.data = c.data[base:c.starts[b]]
		t.offs = grow(&sc.offs, b-a, false)
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

// dimRange is the range of sorted cells [a, b) of dimension d. Ties keep
// the first cell, as a comparison walk would.
func dimRange(d *schema.Dimension, c *col, a, b int) fragmeta.Range {
	if d.IsVar() {
		var lo, hi []byte
		for i := a; i < b; i++ {
			v := c.data[c.starts[i]:c.starts[i+1]]
			if i == a || bytes.Compare(v, lo) < 0 {
				lo = v
			}
			if i == a || bytes.Compare(v, hi) > 0 {
				hi = v
			}
		}
		return fragmeta.Range{Start: clone(lo), End: clone(hi)}
	}
	sz := d.Type.Size()
	var l, h int
	switch {
	case d.Type == datatype.Float32:
		l, h = minMaxAt(asSlice[float32](c.data)[a:b])
	case d.Type == datatype.Float64:
		l, h = minMaxAt(asSlice[float64](c.data)[a:b])
	case sz == 1 && d.Type.IsSigned():
		l, h = minMaxAt(asSlice[int8](c.data)[a:b])
	case sz == 1:
		l, h = minMaxAt(c.data[a:b])
	case sz == 2 && d.Type.IsSigned():
		l, h = minMaxAt(asSlice[int16](c.data)[a:b])
	case sz == 2:
		l, h = minMaxAt(asSlice[uint16](c.data)[a:b])
	case sz == 4 && d.Type.IsSigned():
		l, h = minMaxAt(asSlice[int32](c.data)[a:b])
	case sz == 4:
		l, h = minMaxAt(asSlice[uint32](c.data)[a:b])
	case d.Type.IsSigned():
		l, h = minMaxAt(asSlice[int64](c.data)[a:b])
	default:
		l, h = minMaxAt(asSlice[uint64](c.data)[a:b])
	}
	l, h = l+a, h+a
	return fragmeta.Range{Start: clone(c.data[l*sz : (l+1)*sz]), End: clone(c.data[h*sz : (h+1)*sz])}
}

// minMaxAt returns the positions of the first least and first greatest
// values of v (not empty).
func minMaxAt[T number](v []T) (int, int) {
	l, h := 0, 0
	for i, x := range v {
		if x < v[l] {
			l = i
		}
		if x > v[h] {
			h = i
		}
	}
	return l, h
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

// firstDup returns the first sorted position holding the coordinates of
// the cell before it, or -1.
func firstDup(sc *sortedCells) int {
	for i := 1; i < len(sc.perm); i++ {
		if sc.sameAsPrev(i) {
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
