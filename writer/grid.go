package writer

import (
	"encoding/binary"
	"math/bits"

	"github.com/tileflight/tileflight/format/datatype"
	"github.com/tileflight/tileflight/format/schema"
)

// grid is the space-tile geometry of a dense subarray. Coordinates are
// handled as offsets from the domain's low bound (uint64), which is exact
// for every integer dimension type.
type grid struct {
	s      *schema.ArraySchema
	nd     int
	sub    [][2]uint64 // subarray, as offsets from the domain start
	ext    []uint64
	tlo    []uint64 // first and last tile index touched, per dim
	thi    []uint64
	cells  uint64 // cells in the subarray
	perTil uint64 // cells per space tile
}

func newGrid(s *schema.ArraySchema, subarray [][2]int64) (*grid, error) {
	nd := len(s.Dimensions)
	if len(subarray) != nd {
		return nil, invalidf("dense write: subarray has %d ranges for %d dimensions", len(subarray), nd)
	}
	g := &grid{s: s, nd: nd, cells: 1, perTil: 1}
	for d := range s.Dimensions {
		dim := &s.Dimensions[d]
		if !dim.Type.IsInteger() || dim.IsVar() {
			return nil, invalidf("dense write: dimension %q of type %s is not an integer dimension", dim.Name, dim.Type)
		}
		ext, ok := dim.TileExtentUint64()
		if !ok || ext == 0 {
			return nil, invalidf("dense write: dimension %q has no tile extent", dim.Name)
		}
		lo, hi := subarray[d][0], subarray[d][1]
		in := func(v int64) bool {
			if dim.Type == datatype.Uint64 || !dim.Type.IsSigned() {
				l, h := schema.AsUint64(dim.Type, dim.Lo()), schema.AsUint64(dim.Type, dim.Hi())
				return uint64(v) >= l && uint64(v) <= h
			}
			l, h := schema.AsInt64(dim.Type, dim.Lo()), schema.AsInt64(dim.Type, dim.Hi())
			return v >= l && v <= h
		}
		dl, dh, _ := dim.DomainStrings()
		if !in(lo) || !in(hi) {
			return nil, invalidf("dense write: dimension %q: range [%d, %d] is outside the domain [%s, %s]", dim.Name, lo, hi, dl, dh)
		}
		base := schema.AsUint64(dim.Type, dim.Lo())
		a, b := uint64(lo)-base, uint64(hi)-base
		if a > b {
			return nil, invalidf("dense write: dimension %q: range [%d, %d] is empty", dim.Name, lo, hi)
		}
		g.sub = append(g.sub, [2]uint64{a, b})
		g.ext = append(g.ext, ext)
		g.tlo = append(g.tlo, a/ext)
		g.thi = append(g.thi, b/ext)
		var over bool
		hiCells, loCells := bits.Mul64(g.cells, b-a+1)
		over = hiCells != 0
		g.cells = loCells
		hiT, loT := bits.Mul64(g.perTil, ext)
		if over || hiT != 0 || g.perTil > 1<<40 {
			return nil, invalidf("dense write: subarray or space tile too large")
		}
		g.perTil = loT
	}
	if g.perTil > 1<<32 {
		return nil, invalidf("dense write: a space tile of %d cells is too large", g.perTil)
	}
	return g, nil
}

func (g *grid) tilesAlong(d int) uint64 { return g.thi[d] - g.tlo[d] + 1 }

// splitAlong cuts the subarray's range of dimension d into pieces of k
// tiles (values, not offsets).
func (g *grid) splitAlong(d int, k int64) [][2]int64 {
	dim := &g.s.Dimensions[d]
	base := schema.AsUint64(dim.Type, dim.Lo())
	var out [][2]int64
	for t := g.tlo[d]; t <= g.thi[d]; t += uint64(k) {
		a := max(t*g.ext[d], g.sub[d][0])
		b := min((t+uint64(k))*g.ext[d]-1, g.sub[d][1])
		out = append(out, [2]int64{int64(a + base), int64(b + base)})
	}
	return out
}

// run is a stretch of cells along the fastest cell-order dimension of a
// space tile: n cells starting at tile position tpos, taken from the
// input starting at cell ipos and stepping by the tile's input step.
type run struct {
	tpos, ipos, n int64
}

// spaceTile is what writing one space tile needs: where its cells come
// from (in increasing tile position; the positions between runs are
// outside the subarray) and the slabs its statistics walk.
type spaceTile struct {
	runs  []run
	step  int64 // input stride between neighbours along the fastest cell dimension
	slabs [][2]int
	full  bool // the runs cover the whole tile
}

// spaceTiles lists the space tiles touched by the subarray, in the
// array's tile order. The input is the subarray's cells in inLayout.
// Work is per run of cells, never per cell: a run of a tile whose cell
// order matches the input layout is one contiguous copy.
func (g *grid) spaceTiles(inLayout schema.Layout) []spaceTile {
	nd := g.nd
	s := g.s
	order := func(colMajor bool) []int { // dims from slowest to fastest
		o := make([]int, nd)
		for i := range o {
			if colMajor {
				o[i] = nd - 1 - i
			} else {
				o[i] = i
			}
		}
		return o
	}
	inStride := make([]int64, nd)
	acc := int64(1)
	inOrder := order(inLayout == schema.ColMajor)
	for i := nd - 1; i >= 0; i-- {
		d := inOrder[i]
		inStride[d] = acc
		acc *= int64(g.sub[d][1] - g.sub[d][0] + 1)
	}
	cellOrder := order(s.CellOrder == schema.ColMajor)
	tileStride := make([]int64, nd)
	acc = 1
	for i := nd - 1; i >= 0; i-- {
		d := cellOrder[i]
		tileStride[d] = acc
		acc *= int64(g.ext[d])
	}
	fast := cellOrder[nd-1]
	tileOrder := order(s.TileOrder == schema.ColMajor)
	tc := append([]uint64(nil), g.tlo...)
	lo := make([]uint64, nd)
	hi := make([]uint64, nd)
	cur := make([]uint64, nd)
	var out []spaceTile
	for {
		for d := 0; d < nd; d++ {
			t0 := tc[d] * g.ext[d]
			lo[d] = max(t0, g.sub[d][0])
			hi[d] = min(t0+g.ext[d]-1, g.sub[d][1])
		}
		st := spaceTile{step: inStride[fast]}
		n := int64(hi[fast] - lo[fast] + 1)
		copy(cur, lo)
		for {
			var tp, ip int64
			for d := 0; d < nd; d++ {
				tp += int64(cur[d]-tc[d]*g.ext[d]) * tileStride[d]
				ip += int64(cur[d]-g.sub[d][0]) * inStride[d]
			}
			st.runs = append(st.runs, run{tpos: tp, ipos: ip, n: n})
			// odometer over the other dimensions in cell order
			k := nd - 2
			for ; k >= 0; k-- {
				d := cellOrder[k]
				if cur[d] < hi[d] {
					cur[d]++
					break
				}
				cur[d] = lo[d]
			}
			if k < 0 {
				break
			}
		}
		st.slabs = g.slabs(inLayout, tc, lo, hi, tileStride)
		st.full = int64(len(st.runs))*n == int64(g.perTil)
		out = append(out, st)
		k := nd - 1
		for ; k >= 0; k-- {
			d := tileOrder[k]
			if tc[d] < g.thi[d] {
				tc[d]++
				break
			}
			tc[d] = g.tlo[d]
		}
		if k < 0 {
			return out
		}
	}
}

// putValue encodes v as one value of an integer type.
func putValue(t datatype.Datatype, v int64) []byte {
	b := make([]byte, 8)
	binary.LittleEndian.PutUint64(b, uint64(v))
	return b[:t.Size()]
}

// slabs lists the runs of tile cells TileDB's dense tiler visits when it
// computes a tile's statistics, in its order (which fixes the rounding of
// float sums and the count of its per-slab null counting). lo/hi is the
// part of the subarray inside tile tc.
func (g *grid) slabs(inLayout schema.Layout, tc, lo, hi []uint64, tileStride []int64) [][2]int {
	nd := g.nd
	ln := func(d int) uint64 { return hi[d] - lo[d] + 1 }
	start := int64(0)
	for d := 0; d < nd; d++ {
		start += int64(lo[d]-tc[d]*g.ext[d]) * tileStride[d]
	}
	full := func(d int) bool { return ln(d) == g.ext[d] && lo[d] == g.sub[d][0] && hi[d] == g.sub[d][1] }
	var dims []int // dimensions iterated, slowest first
	var copyEl uint64
	cellCol := g.s.CellOrder == schema.ColMajor
	switch {
	case nd == 1:
		copyEl = ln(0)
	case (inLayout == schema.ColMajor) != cellCol:
		copyEl = 1
		for d := 0; d < nd; d++ {
			dims = append(dims, d)
		}
	case !cellCol:
		copyEl = ln(nd - 1)
		last := nd - 2
		for ; last >= 0; last-- {
			if !full(last + 1) {
				break
			}
			copyEl *= ln(last)
		}
		for d := 0; d <= last; d++ {
			dims = append(dims, d)
		}
	default:
		copyEl = ln(0)
		last := 1
		for ; last < nd; last++ {
			if !full(last - 1) {
				break
			}
			copyEl *= ln(last)
		}
		for d := last; d < nd; d++ {
			dims = append(dims, d)
		}
	}
	var out [][2]int
	if len(dims) == 0 {
		return [][2]int{{int(start), int(start) + int(copyEl)}}
	}
	idx := make([]uint64, len(dims))
	for {
		off := start
		for k, d := range dims {
			off += int64(idx[k]) * tileStride[d]
		}
		out = append(out, [2]int{int(off), int(off) + int(copyEl)})
		k := len(dims) - 1
		for ; k >= 0; k-- {
			if idx[k]+1 < ln(dims[k]) {
				idx[k]++
				break
			}
			idx[k] = 0
		}
		if k < 0 {
			return out
		}
	}
}
