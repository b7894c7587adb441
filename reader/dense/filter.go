package dense

import (
	"encoding/binary"
	"fmt"

	"github.com/tileflight/tileflight/arrowconv"
	"github.com/tileflight/tileflight/errkind"
	"github.com/tileflight/tileflight/reader/eval"
	"github.com/tileflight/tileflight/reader/sparse"
)

// filterChunk applies the filter to a built chunk the way TileDB 2.30 does
// for dense reads: the condition sees each cell's newest value (fill value
// where nothing was written), and every attribute of a cell that fails it
// comes back as the attribute's fill value (null for nullable attributes
// whose fill is null); dimensions keep their coordinates.
func (d *Reader) filterChunk(c *Chunk) error {
	pass := make([]bool, c.n)
	prog := d.prog.Clone()
	err := prog.Eval(func(name string) (eval.Column, error) {
		for i, f := range d.fields {
			if f.Name == name {
				col := c.cols[i]
				return eval.Column{Data: col.data, Offsets: col.offsets, Validity: col.validity}, nil
			}
		}
		return eval.Column{}, fmt.Errorf("no column %q", name)
	}, pass)
	if err != nil {
		return errkind.Wrap(errkind.DataLoss, fmt.Errorf("array %s: filter: %w", d.p.Array.Dir, err))
	}
	for k, f := range c.fail {
		if f {
			pass[k] = false
		}
	}
	fails := false
	for _, ok := range pass {
		if !ok {
			fails = true
			break
		}
	}
	if !fails {
		return nil
	}
	if d.agg {
		c.pass = pass
		return nil
	}
	if d.p.Query != nil && d.p.Query.DropFailing {
		return d.dropFailing(c, pass)
	}
	for i, f := range d.fields[:d.nout] {
		if f.Role == arrowconv.Dimension {
			continue
		}
		at := d.attrs[f.Name]
		col := &c.cols[i]
		if f.Nullable {
			v := byte(0)
			if at.FillValid {
				v = 1
			}
			if col.validity == nil {
				col.validity = make([]byte, c.n)
				for k := range col.validity {
					col.validity[k] = 1
				}
			}
			for k, ok := range pass {
				if !ok {
					col.validity[k] = v
				}
			}
		}
		if !f.IsVar() {
			cs := f.CellSize()
			for k, ok := range pass {
				if !ok {
					copy(col.data[k*cs:(k+1)*cs], at.FillValue)
				}
			}
			continue
		}
		// Var-sized: rebuild data and offsets with the fill value in the
		// failing cells.
		var data []byte
		offs := make([]byte, 8*c.n)
		for k := 0; k < c.n; k++ {
			binary.LittleEndian.PutUint64(offs[8*k:], uint64(len(data)))
			if !pass[k] {
				data = append(data, at.FillValue...)
				continue
			}
			s, e, ok := col.cellSpan(k, c.n)
			if !ok {
				return errkind.Errorf(errkind.DataLoss, "array %s: attribute %q: offsets %d..%d outside %d bytes", d.p.Array.Dir, f.Name, s, e, len(col.data))
			}
			data = append(data, col.data[s:e]...)
		}
		col.data, col.offsets = data, offs
	}
	return nil
}

// pruneTiles asks the filter, for every fragment tile a chunk would paint
// from, whether the tile's statistics (fragment metadata min/max/null
// count) leave any cell able to pass; the tiles that cannot are put in
// their region's skip set and never read. Skipping must not change the
// result: in a dense read the condition sees each cell's newest value, and
// a cell that fails comes back as the fill value. So a skipped tile's
// cells are not left to older fragments (which could pass): every cell the
// skipped fragment is the newest writer of is marked in c.fail, painted
// with the fill value, and forced to fail, which is what reading the tile
// would have produced.
func (d *Reader) pruneTiles(c *Chunk, l *chunkLayout, regs []region) error {
	skipped := false
	for ri := range regs {
		r := &regs[ri]
		list, _ := d.paintList(r)
		for _, fr := range list {
			ti := fr.tileIndex(r.tile)
			stats := sparse.TileStats(fr.f, ti, d.g.tileSize)
			m, err := d.prog.MayMatch(func(name string) (eval.Stats, bool, error) {
				// Dense fragments keep no dimension statistics, and a
				// fragment whose attribute differs from the array's (schema
				// evolution) has statistics of another type.
				if d.p.Array.Schema.DimensionIndex(name) >= 0 || !fr.has[name] {
					return eval.Stats{}, false, nil
				}
				return stats(name)
			})
			if err != nil {
				return errkind.Wrap(errkind.DataLoss, fmt.Errorf("array %s: fragment %s: tile %d: filter statistics: %w", d.p.Array.Dir, fr.f.Name, ti, err))
			}
			if !m {
				if r.skip == nil {
					r.skip = map[*frag]bool{}
				}
				r.skip[fr] = true
				skipped = true
			}
		}
	}
	if !skipped {
		return nil
	}
	c.fail = make([]bool, c.n)
	for ri := range regs {
		r := &regs[ri]
		list, _ := d.paintList(r)
		for _, fr := range list { // oldest first: the newest writer wins
			skip := r.skip[fr]
			d.walk(l, r, fr.nlo, fr.nhi, func(dst, _, _, n int) {
				for k := dst; k < dst+n; k++ {
					c.fail[k] = skip
				}
			})
		}
	}
	return nil
}

// markWritten records in c.written which cells of the chunk a fragment
// wrote (nil when every region is written whole).
func (d *Reader) markWritten(c *Chunk, l *chunkLayout, regs []region) {
	mark := func(dst, src, stride, n int) {
		for k := 0; k < n; k++ {
			c.written[dst+k] = true
		}
	}
	for i := range regs {
		list, fill := d.paintList(&regs[i])
		if !fill {
			continue
		}
		if c.written == nil {
			c.written = make([]bool, c.n)
			for j := range regs {
				if _, f2 := d.paintList(&regs[j]); !f2 {
					d.walk(l, &regs[j], nil, nil, mark)
				}
			}
		}
		for _, fr := range list {
			d.walk(l, &regs[i], fr.nlo, fr.nhi, mark)
		}
	}
}

// dropFailing removes the cells that fail the filter from a built chunk
// (query.Query.DropFailing): every column, dimensions included, keeps the
// passing cells in order. The columns are copied, never compacted in
// place, since a dimension column may be shared between chunks.
func (d *Reader) dropFailing(c *Chunk, pass []bool) error {
	n := 0
	for _, ok := range pass {
		if ok {
			n++
		}
	}
	for i, f := range d.fields {
		col := &c.cols[i]
		var out colData
		if col.validity != nil {
			out.validity = make([]byte, 0, n)
			for k, ok := range pass {
				if ok {
					out.validity = append(out.validity, col.validity[k])
				}
			}
		}
		if !f.IsVar() {
			cs := f.CellSize()
			if len(col.data) < c.n*cs {
				return errkind.Errorf(errkind.DataLoss, "array %s: field %q: %d bytes for %d cells", d.p.Array.Dir, f.Name, len(col.data), c.n)
			}
			out.data = make([]byte, 0, n*cs)
			for k, ok := range pass {
				if ok {
					out.data = append(out.data, col.data[k*cs:(k+1)*cs]...)
				}
			}
			*col = out
			continue
		}
		out.offsets = make([]byte, 0, 8*n)
		for k, ok := range pass {
			if !ok {
				continue
			}
			s, e, ok := col.cellSpan(k, c.n)
			if !ok {
				return errkind.Errorf(errkind.DataLoss, "array %s: field %q: offsets %d..%d outside %d bytes", d.p.Array.Dir, f.Name, s, e, len(col.data))
			}
			out.offsets = binary.LittleEndian.AppendUint64(out.offsets, uint64(len(out.data)))
			out.data = append(out.data, col.data[s:e]...)
		}
		*col = out
	}
	c.n = n
	c.fail = nil
	return nil
}

// cellSpan is the byte range of cell k's value in a var-sized column of n
// cells; ok is false when the offsets point outside the data.
func (col *colData) cellSpan(k, n int) (s, e uint64, ok bool) {
	s = binary.LittleEndian.Uint64(col.offsets[8*k:])
	e = uint64(len(col.data))
	if k+1 < n {
		e = binary.LittleEndian.Uint64(col.offsets[8*(k+1):])
	}
	return s, e, s <= e && e <= uint64(len(col.data))
}
