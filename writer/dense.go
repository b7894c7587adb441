package writer

import (
	"context"

	"github.com/tileflight/tileflight/format/fragmeta"
	"github.com/tileflight/tileflight/format/schema"
	"github.com/tileflight/tileflight/storage"
)

// WriteDense writes the cells of subarray (one inclusive [lo, hi] per
// dimension, in the dimension's integer values) of a dense array. Columns
// hold every attribute, the cells in row-major order of the subarray (or
// col-major when layout is schema.ColMajor). The subarray need not align
// with the space tiles: as TileDB does, every space tile it touches is
// written whole, cells outside the subarray zeroed (readers never look at
// them: the fragment's non-empty domain is the subarray), and the tile
// statistics cover the written cells only.
func WriteDense(ctx context.Context, st storage.Store, dir string, s *schema.ArraySchema, subarray [][2]int64, layout schema.Layout, cols map[string]Column, opt Options) (*Result, error) {
	if err := checkSchema(s); err != nil {
		return nil, err
	}
	if !s.IsDense() {
		return nil, invalidf("array %q is sparse: write it with coordinates", dir)
	}
	if layout != schema.RowMajor && layout != schema.ColMajor {
		return nil, invalidf("dense write layout %s: want row-major or col-major", layout)
	}
	g, err := newGrid(s, subarray)
	if err != nil {
		return nil, err
	}
	cs, n, err := checkColumns(s, cols, false)
	if err != nil {
		return nil, err
	}
	if uint64(n) != g.cells {
		return nil, invalidf("dense write: %d rows for a subarray of %d cells", n, g.cells)
	}
	fields, err := newFields(s, false)
	if err != nil {
		return nil, invalidf("array %q: %v", dir, err)
	}
	// Split along the slowest dimension of the input on tile boundaries
	// when the input is too large for one fragment: each piece's cells
	// are then a contiguous run of the input.
	var total int64
	for _, c := range cs {
		total += int64(len(c.data)) + 8*int64(len(c.starts)) + int64(len(c.valid))
	}
	slow := 0
	if layout == schema.ColMajor {
		slow = len(s.Dimensions) - 1
	}
	pieces := [][2]int64{subarray[slow]}
	if total > opt.maxBytes() && g.tilesAlong(slow) > 1 {
		perTileRow := total / int64(g.tilesAlong(slow))
		k := max(opt.maxBytes()/max(perTileRow, 1), 1)
		pieces = g.splitAlong(slow, k)
	}
	layoutF := layoutOf(s)
	var frags []*fragment
	start := 0
	for _, p := range pieces {
		sub := append([][2]int64(nil), subarray...)
		sub[slow] = p
		pg, err := newGrid(s, sub)
		if err != nil {
			return nil, err
		}
		cnt := int(pg.cells)
		piece := map[string]*col{}
		for name, c := range cs {
			piece[name] = sliceCol(c, s, name, start, start+cnt)
		}
		start += cnt
		fr := &fragment{s: s, layout: layoutF, fields: fields, dense: true}
		pg.tiles(layout, func(pos []int64, slabs [][2]int) {
			tiles := make([]statTile, len(fields))
			for fi, f := range fields {
				tiles[fi] = denseTile(f, piece[f.name], pos)
				tiles[fi].slabs = slabs
			}
			fr.tiles = append(fr.tiles, tiles)
			fr.cellNum = append(fr.cellNum, uint64(len(pos)))
		})
		fr.ned = make(fragmeta.MBR, len(s.Dimensions))
		for d := range s.Dimensions {
			fr.ned[d] = fragmeta.Range{Start: putValue(s.Dimensions[d].Type, sub[d][0]), End: putValue(s.Dimensions[d].Type, sub[d][1])}
		}
		frags = append(frags, fr)
	}
	res, err := writeFragments(ctx, st, dir, frags, opt)
	if err != nil {
		return nil, err
	}
	res.Rows = int64(n)
	return res, nil
}

func sliceCol(c *col, s *schema.ArraySchema, name string, a, b int) *col {
	f, _ := s.FieldByName(name)
	out := &col{}
	if c.starts != nil {
		out.starts = c.starts[a : b+1]
		out.data = c.data
	} else {
		cs := int(f.CellSize())
		out.data = c.data[a*cs : b*cs]
	}
	if c.valid != nil {
		out.valid = c.valid[a:b]
	}
	return out
}

// denseTile builds one space tile of field f: pos[i] is the input cell at
// tile position i, or -1 for a cell outside the subarray, which TileDB
// writes as zero bytes (one value of zeros for var-sized fields) and null.
func denseTile(f *field, c *col, pos []int64) statTile {
	n := len(pos)
	t := statTile{n: n, cellSize: f.cellSize}
	// Runs of consecutive input cells are copied at once.
	var runs [][2]int
	for i := 0; i < n; {
		if pos[i] < 0 {
			i++
			continue
		}
		j := i + 1
		for j < n && pos[j] == pos[j-1]+1 {
			j++
		}
		runs = append(runs, [2]int{i, j})
		i = j
	}
	if f.isVar {
		fill := f.typ.Size()
		size := 0
		for _, p := range pos {
			if p < 0 {
				size += fill
			} else {
				size += int(c.starts[p+1] - c.starts[p])
			}
		}
		t.data = make([]byte, 0, size)
		t.offs = make([]uint64, n)
		for i, p := range pos {
			t.offs[i] = uint64(len(t.data))
			if p < 0 {
				t.data = append(t.data, make([]byte, fill)...)
			} else {
				t.data = append(t.data, c.data[c.starts[p]:c.starts[p+1]]...)
			}
		}
	} else {
		cs := f.cellSize
		t.data = make([]byte, n*cs)
		for _, r := range runs {
			p := int(pos[r[0]])
			copy(t.data[r[0]*cs:r[1]*cs], c.data[p*cs:(p+r[1]-r[0])*cs])
		}
	}
	if f.nullable {
		t.valid = make([]byte, n)
		for _, r := range runs {
			p := int(pos[r[0]])
			copy(t.valid[r[0]:r[1]], c.valid[p:p+r[1]-r[0]])
		}
	}
	return t
}
