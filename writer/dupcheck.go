package writer

import (
	"bytes"
	"cmp"
	"container/heap"
	"context"
	"encoding/binary"
	"fmt"

	"github.com/tileflight/tileflight/format/fragmeta"
	"github.com/tileflight/tileflight/format/names"
	"github.com/tileflight/tileflight/format/schema"
	"github.com/tileflight/tileflight/storage"
)

// A streamed sparse write is several fragments each sorted on its own, so
// two of them may hold the same coordinates. checkAcross finds such a
// pair without holding the write in memory: only tiles whose MBR meets
// another fragment's non-empty domain can hold a shared coordinate; those
// tiles' coordinates are read back from the store one tile per fragment
// at a time and merged in global order, where equal coordinates meet.

func checkAcross(ctx context.Context, lw *logicalWrite, s *schema.ArraySchema) error {
	var streams []*coordStream
	for i := range lw.done {
		w := &lw.done[i]
		var tiles []int
		for t, mbr := range w.fr.mbrs {
			for j := range lw.done {
				if j != i && overlaps(s, mbr, lw.done[j].fr.ned) {
					tiles = append(tiles, t)
					break
				}
			}
		}
		if len(tiles) > 0 {
			streams = append(streams, &coordStream{lw: lw, s: s, w: w, frag: i, tiles: tiles})
		}
	}
	if len(streams) < 2 {
		return nil
	}
	h := &streamHeap{}
	for _, cs := range streams {
		if err := cs.load(ctx); err != nil {
			return err
		}
		h.items = append(h.items, cs)
	}
	h.kinds = streams[0].kinds()
	heap.Init(h)
	kinds := streams[0].kinds()
	var prev *coordStream
	var prevKey cellKey
	for step := 0; h.Len() > 0; step++ {
		if step%4096 == 0 && ctx.Err() != nil {
			return ctx.Err()
		}
		top := h.items[0]
		if prev != nil && prev.frag != top.frag && compareKey(kinds, prevKey, top.key()) == 0 {
			return invalidf("duplicate coordinates %s in fragments %s and %s of this write (the array does not allow duplicates)",
				top.coordString(), prev.w.name, top.w.name)
		}
		top.key().copyTo(&prevKey)
		prev = top
		top.pos++
		if top.pos == top.n {
			top.ti++
			if top.ti == len(top.tiles) {
				heap.Pop(h)
				continue
			}
			if err := top.load(ctx); err != nil {
				return err
			}
		}
		heap.Fix(h, 0)
	}
	return nil
}

// overlaps reports whether two boxes share a point.
func overlaps(s *schema.ArraySchema, a, b fragmeta.MBR) bool {
	for d := range s.Dimensions {
		dim := &s.Dimensions[d]
		if cmpCoord(dim.Type, dim.IsVar(), a[d].Start, b[d].End) > 0 || cmpCoord(dim.Type, dim.IsVar(), b[d].Start, a[d].End) > 0 {
			return false
		}
	}
	return true
}

// cellKey is one cell's place in the global order: the fixed components'
// words and the string coordinates.
type cellKey struct {
	words []uint64
	vars  [][]byte
}

// copyTo copies k into dst, reusing dst's memory.
func (k cellKey) copyTo(dst *cellKey) {
	dst.words = append(dst.words[:0], k.words...)
	for i, v := range k.vars {
		if i < len(dst.vars) {
			dst.vars[i] = append(dst.vars[i][:0], v...)
		} else {
			dst.vars = append(dst.vars, append([]byte{}, v...))
		}
	}
	dst.vars = dst.vars[:len(k.vars)]
}

// compareKey orders two keys of the same schema: words component by
// component, a string component (word 0) by its bytes.
func compareKey(kinds []uint8, a, b cellKey) int {
	v := 0
	for i, k := range kinds {
		if k == compVar {
			if r := bytes.Compare(a.vars[v], b.vars[v]); r != 0 {
				return r
			}
			v++
			continue
		}
		if r := cmp.Compare(a.words[i], b.words[i]); r != 0 {
			return r
		}
	}
	return 0
}

// coordStream walks the candidate tiles of one fragment.
type coordStream struct {
	lw    *logicalWrite
	s     *schema.ArraySchema
	w     *written
	frag  int
	tiles []int
	ti    int // index into tiles
	n     int // cells in the loaded tile
	pos   int
	cols  []*col
	keys  *orderKeys
	words [][]uint64 // per component (nil for strings)
	kbuf  cellKey
}

// load reads and unfilters the coordinates of tile tiles[ti].
func (c *coordStream) load(ctx context.Context) error {
	t := c.tiles[c.ti]
	m := c.w.meta
	fr := c.w.fr
	n := int(fr.cellNum[t])
	na := len(c.s.Attributes)
	cs := map[string]*col{}
	c.cols = c.cols[:0]
	fragKey := names.FragmentKey(c.w.name)
	get := func(file string, off uint64, end uint64) ([]byte, error) {
		if end < off {
			return nil, fmt.Errorf("fragment %s: %s: tile %d: offsets out of order", c.w.name, file, t)
		}
		return c.lw.st.GetRange(ctx, storage.Join(c.lw.dir, fragKey, file), int64(off), int64(end-off))
	}
	tileEnd := func(offs []uint64, size uint64) uint64 {
		if t+1 < len(offs) {
			return offs[t+1]
		}
		return size
	}
	for d := range c.s.Dimensions {
		f := fr.fields[na+d]
		mi := f.metaIdx
		fixed, err := get(f.fixedFile, m.TileOffsets[mi][t], tileEnd(m.TileOffsets[mi], m.Footer.FileSizes[mi]))
		if err != nil {
			return fmt.Errorf("checking duplicates: %w", err)
		}
		cl := &col{}
		if f.isVar {
			vals, err := get(f.varFile, m.TileVarOffsets[mi][t], tileEnd(m.TileVarOffsets[mi], m.Footer.FileVarSizes[mi]))
			if err != nil {
				return fmt.Errorf("checking duplicates: %w", err)
			}
			offs, data, err := f.pipe.UnfilterVarTile(f.offPipe, fixed, vals, make([]byte, 8*(n+1)), make([]byte, m.TileVarSizes[mi][t]))
			if err != nil {
				return fmt.Errorf("checking duplicates: fragment %s: dimension %q: tile %d: %w", c.w.name, f.name, t, err)
			}
			cl.data = data
			cl.starts = make([]uint64, n+1)
			for i := range cl.starts {
				cl.starts[i] = binary.LittleEndian.Uint64(offs[8*i:])
			}
		} else {
			data, err := f.pipe.UnfilterTile(make([]byte, n*f.cellSize), fixed)
			if err != nil {
				return fmt.Errorf("checking duplicates: fragment %s: dimension %q: tile %d: %w", c.w.name, f.name, t, err)
			}
			cl.data = data
		}
		cs[f.name] = cl
		c.cols = append(c.cols, cl)
	}
	c.keys = newOrderKeys(c.s, cs, n)
	c.words = make([][]uint64, len(c.keys.comps))
	for ci, comp := range c.keys.comps {
		if comp.kind == compVar {
			continue
		}
		w := make([]uint64, n)
		for i0 := 0; i0 < n; i0 += block {
			c.keys.eval(comp, i0, w[i0:min(i0+block, n)])
		}
		c.words[ci] = w
	}
	c.n, c.pos = n, 0
	return nil
}

func (c *coordStream) kinds() []uint8 {
	var out []uint8
	for _, comp := range c.keys.comps {
		out = append(out, comp.kind)
	}
	return out
}

// key is the current cell's key (valid until the stream moves).
func (c *coordStream) key() cellKey {
	c.kbuf.words = c.kbuf.words[:0]
	c.kbuf.vars = c.kbuf.vars[:0]
	for ci, comp := range c.keys.comps {
		if comp.kind == compVar {
			c.kbuf.vars = append(c.kbuf.vars, c.cols[comp.dim].cell(c.pos, 0))
			c.kbuf.words = append(c.kbuf.words, 0)
			continue
		}
		c.kbuf.words = append(c.kbuf.words, c.words[ci][c.pos])
	}
	return c.kbuf
}

func (c *coordStream) coordString() string {
	var b bytes.Buffer
	b.WriteByte('(')
	for d := range c.s.Dimensions {
		dd := &c.s.Dimensions[d]
		if d > 0 {
			b.WriteString(", ")
		}
		b.WriteString(dd.Name + "=")
		if dd.IsVar() {
			fmt.Fprintf(&b, "%q", c.cols[d].cell(c.pos, 0))
		} else {
			b.WriteString(schema.FormatValue(dd.Type, c.cols[d].cell(c.pos, dd.Type.Size())))
		}
	}
	b.WriteByte(')')
	return b.String()
}

type streamHeap struct {
	items []*coordStream
	kinds []uint8
}

func (h *streamHeap) Len() int { return len(h.items) }
func (h *streamHeap) Less(i, j int) bool {
	a, b := h.items[i], h.items[j]
	if r := compareKey(h.kinds, a.key(), b.key()); r != 0 {
		return r < 0
	}
	return a.frag < b.frag
}
func (h *streamHeap) Swap(i, j int) { h.items[i], h.items[j] = h.items[j], h.items[i] }
func (h *streamHeap) Push(x any)    { h.items = append(h.items, x.(*coordStream)) }
func (h *streamHeap) Pop() any {
	x := h.items[len(h.items)-1]
	h.items = h.items[:len(h.items)-1]
	return x
}
