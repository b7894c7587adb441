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
	if err := checkArrayKey(ctx, st, dir, s.Name, opt.EncryptionKey); err != nil {
		return nil, err
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
	fields, err := newFields(s, false, opt.EncryptionKey)
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
		frags = append(frags, denseFragment(s, layoutF, fields, pg, sub, layout, piece))
	}
	res, err := writeFragments(ctx, st, dir, frags, opt)
	if err != nil {
		return nil, err
	}
	res.Rows = int64(n)
	return res, nil
}

// denseFragment describes the fragment of the dense subarray sub (grid
// pg) whose cells are the columns piece in the input layout.
func denseFragment(s *schema.ArraySchema, layoutF fragmeta.Layout, fields []*field, pg *grid, sub [][2]int64, layout schema.Layout, piece map[string]*col) *fragment {
	fr, sts := denseShell(s, layoutF, fields, pg, sub, layout)
	per := int(pg.perTil)
	fr.tile = func(t, fi int, sc *scratch) statTile {
		f := fields[fi]
		tl := denseTile(f, piece[f.name], &sts[t], per, sc)
		tl.slabs = sts[t].slabs
		return tl
	}
	return fr
}

// denseShell is the fragment of the dense subarray sub (grid pg) without
// a tile source, and its space tiles for input in layout.
func denseShell(s *schema.ArraySchema, layoutF fragmeta.Layout, fields []*field, pg *grid, sub [][2]int64, layout schema.Layout) (*fragment, []spaceTile) {
	sts := pg.spaceTiles(layout)
	per := int(pg.perTil)
	fr := &fragment{s: s, layout: layoutF, fields: fields, dense: true, ntiles: len(sts)}
	fr.cellNum = make([]uint64, len(sts))
	for t := range fr.cellNum {
		fr.cellNum[t] = uint64(per)
	}
	fr.ned = make(fragmeta.MBR, len(s.Dimensions))
	for d := range s.Dimensions {
		fr.ned[d] = fragmeta.Range{Start: putValue(s.Dimensions[d].Type, sub[d][0]), End: putValue(s.Dimensions[d].Type, sub[d][1])}
	}
	return fr, sts
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

// denseTile builds one space tile of field f from the runs of st. Cells
// between runs lie outside the subarray: TileDB writes them as zero bytes
// (one value of zeros for var-sized fields) and null.
func denseTile(f *field, c *col, st *spaceTile, n int, sc *scratch) statTile {
	t := statTile{n: n, cellSize: f.cellSize}
	if f.isVar {
		fill := int64(f.typ.Size())
		var size, prev int64
		for _, r := range st.runs {
			size += (r.tpos - prev) * fill
			for i := int64(0); i < r.n; i++ {
				p := r.ipos + i*st.step
				size += int64(c.starts[p+1] - c.starts[p])
			}
			prev = r.tpos + r.n
		}
		size += (int64(n) - prev) * fill
		t.data = grow(&sc.data, int(size), true)
		t.offs = grow(&sc.offs, n, false)
		var pos int64 // tile cell
		var off uint64
		gap := func(upTo int64) {
			for ; pos < upTo; pos++ {
				t.offs[pos] = off
				off += uint64(fill) // zeros already there
			}
		}
		for _, r := range st.runs {
			gap(r.tpos)
			if st.step == 1 {
				a, b := c.starts[r.ipos], c.starts[r.ipos+r.n]
				copy(t.data[off:], c.data[a:b])
				for i := int64(0); i < r.n; i++ {
					t.offs[pos] = off + c.starts[r.ipos+i] - a
					pos++
				}
				off += b - a
				continue
			}
			for i := int64(0); i < r.n; i++ {
				p := r.ipos + i*st.step
				t.offs[pos] = off
				off += uint64(copy(t.data[off:], c.data[c.starts[p]:c.starts[p+1]]))
				pos++
			}
		}
		gap(int64(n))
	} else {
		t.data = grow(&sc.data, n*f.cellSize, !st.full)
		copyRuns(t.data, c.data, f.cellSize, st)
	}
	if f.nullable {
		t.valid = grow(&sc.valid, n, !st.full)
		copyRuns(t.valid, c.valid, 1, st)
	}
	return t
}

// copyRuns copies the runs of st from src to dst, cells of cs bytes:
// whole runs at once when the input is contiguous along them, a typed
// strided gather otherwise.
func copyRuns(dst, src []byte, cs int, st *spaceTile) {
	if st.step == 1 {
		for _, r := range st.runs {
			copy(dst[int(r.tpos)*cs:int(r.tpos+r.n)*cs], src[int(r.ipos)*cs:int(r.ipos+r.n)*cs])
		}
		return
	}
	switch cs {
	case 8:
		stride(asSlice[uint64](dst), asSlice[uint64](src), st)
	case 4:
		stride(asSlice[uint32](dst), asSlice[uint32](src), st)
	case 2:
		stride(asSlice[uint16](dst), asSlice[uint16](src), st)
	case 1:
		stride(dst, src, st)
	default:
		for _, r := range st.runs {
			for i := int64(0); i < r.n; i++ {
				p := int(r.ipos + i*st.step)
				q := int(r.tpos + i)
				copy(dst[q*cs:(q+1)*cs], src[p*cs:(p+1)*cs])
			}
		}
	}
}

func stride[T uint8 | uint16 | uint32 | uint64](dst, src []T, st *spaceTile) {
	for _, r := range st.runs {
		d := dst[r.tpos : r.tpos+r.n]
		p := r.ipos
		for i := range d {
			d[i] = src[p]
			p += st.step
		}
	}
}
