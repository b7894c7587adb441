package writer

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"github.com/tileflight/tileflight/internal/radix"
	"math"
	"math/bits"
	"slices"
	"sort"

	"github.com/tileflight/tileflight/format/datatype"
	"github.com/tileflight/tileflight/format/schema"
)

// Sparse cells are put in global order by sorting keys, not by comparing
// coordinates: every component of the order (Hilbert value, space tile
// index per dimension in tile order, coordinate per dimension in cell
// order) becomes an unsigned word, the words are narrowed to the bits
// they actually span in this write and packed into as few uint64 keys as
// possible, and the keys are sorted by a stable LSD radix sort. Equal
// coordinates give equal keys and the reverse (every coordinate is a
// component), so duplicates are neighbours with equal keys. String
// dimensions cannot be packed; they keep a comparison sort over the
// precomputed words.

// keyComp is one component of the global order.
type keyComp struct {
	dim  int
	kind uint8 // compTile, compCoord, compHilbert, compVar
}

const (
	compTile uint8 = iota
	compCoord
	compHilbert
	compVar
)

// block is how many cells are keyed at a time: the scratch words stay in
// L1 and each component is evaluated by one typed loop per block.
const block = 2048

// orderKeys evaluates components for cells of fixed-size dimensions.
type orderKeys struct {
	s     *schema.ArraySchema
	dims  []*col
	comps []keyComp
	hv    []uint64 // Hilbert values, when the cell order is Hilbert
}

func newOrderKeys(s *schema.ArraySchema, cs map[string]*col, n int) *orderKeys {
	nd := len(s.Dimensions)
	k := &orderKeys{s: s, dims: make([]*col, nd)}
	for d := range s.Dimensions {
		k.dims[d] = cs[s.Dimensions[d].Name]
	}
	coord := func(d int) keyComp {
		if s.Dimensions[d].IsVar() {
			return keyComp{dim: d, kind: compVar}
		}
		return keyComp{dim: d, kind: compCoord}
	}
	if s.CellOrder == schema.Hilbert {
		k.hv = hilbertValues(s, k.dims, n)
		k.comps = append(k.comps, keyComp{kind: compHilbert})
		for d := 0; d < nd; d++ {
			k.comps = append(k.comps, coord(d))
		}
		return k
	}
	dimsIn := func(colMajor bool) []int {
		o := make([]int, nd)
		for i := range o {
			o[i] = i
		}
		if colMajor {
			slices.Reverse(o)
		}
		return o
	}
	for _, d := range dimsIn(s.TileOrder == schema.ColMajor) {
		dd := &s.Dimensions[d]
		if dd.IsVar() || len(dd.TileExtent) == 0 {
			continue
		}
		k.comps = append(k.comps, keyComp{dim: d, kind: compTile})
	}
	for _, d := range dimsIn(s.CellOrder == schema.ColMajor) {
		k.comps = append(k.comps, coord(d))
	}
	return k
}

func (k *orderKeys) hasVar() bool {
	for _, c := range k.comps {
		if c.kind == compVar {
			return true
		}
	}
	return false
}

// eval writes component c of cells [i0, i0+len(out)) to out.
func (k *orderKeys) eval(c keyComp, i0 int, out []uint64) {
	if c.kind == compHilbert {
		copy(out, k.hv[i0:])
		return
	}
	d := &k.s.Dimensions[c.dim]
	data := k.dims[c.dim].data
	switch d.Type.Size() {
	case 1:
		if d.Type.IsSigned() {
			signedWords(asSliceI8(data)[i0:], out)
		} else {
			unsignedWords(data[i0:], out)
		}
	case 2:
		if d.Type.IsSigned() {
			signedWords(asSlice[int16](data)[i0:], out)
		} else {
			unsignedWords(asSlice[uint16](data)[i0:], out)
		}
	case 4:
		switch {
		case d.Type == datatype.Float32:
			floatWords(asSlice[float32](data)[i0:], out)
		case d.Type.IsSigned():
			signedWords(asSlice[int32](data)[i0:], out)
		default:
			unsignedWords(asSlice[uint32](data)[i0:], out)
		}
	case 8:
		switch {
		case d.Type == datatype.Float64:
			floatWords(asSlice[float64](data)[i0:], out)
		case d.Type.IsSigned():
			signedWords(asSlice[int64](data)[i0:], out)
		default:
			unsignedWords(asSlice[uint64](data)[i0:], out)
		}
	}
	if c.kind != compTile {
		return
	}
	if d.Type == datatype.Float32 || d.Type == datatype.Float64 {
		lo := schema.AsFloat64(d.Type, d.Lo())
		ext := schema.AsFloat64(d.Type, d.TileExtent)
		for i, w := range out {
			out[i] = uint64(math.Floor((wordFloat(w) - lo) / ext))
		}
		return
	}
	// The words of integers keep differences, so the offset from the
	// domain start is a subtraction of words.
	base := orderWord(d.Type, d.Lo())
	ext := schema.AsUint64(d.Type, d.TileExtent)
	for i, w := range out {
		out[i] = (w - base) / ext
	}
}

func asSliceI8(b []byte) []int8 { return asSlice[int8](b) }

func signedWords[T int8 | int16 | int32 | int64](v []T, out []uint64) {
	v = v[:len(out)]
	for i, x := range v {
		out[i] = uint64(int64(x)) ^ 1<<63
	}
}

func unsignedWords[T uint8 | uint16 | uint32 | uint64](v []T, out []uint64) {
	v = v[:len(out)]
	for i, x := range v {
		out[i] = uint64(x)
	}
}

func floatWords[T float32 | float64](v []T, out []uint64) {
	v = v[:len(out)]
	for i, x := range v {
		f := float64(x)
		if f == 0 {
			f = 0 // -0 and +0 are one coordinate
		}
		u := math.Float64bits(f)
		if u>>63 != 0 {
			out[i] = ^u
		} else {
			out[i] = u | 1<<63
		}
	}
}

// wordFloat inverts floatWords.
func wordFloat(w uint64) float64 {
	if w>>63 != 0 {
		return math.Float64frombits(w &^ (1 << 63))
	}
	return math.Float64frombits(^w)
}

// packing places each component in a key word: value-min shifted left.
type packing struct {
	min   []uint64
	word  []int
	shift []uint
	bits  []int // per key word: bits used
}

// plan narrows every component to the bits it spans among the n cells
// and assigns it a place in the key words, most significant first.
func (k *orderKeys) plan(n int) packing {
	nc := len(k.comps)
	p := packing{min: make([]uint64, nc), word: make([]int, nc), shift: make([]uint, nc)}
	mx := make([]uint64, nc)
	for c := range p.min {
		p.min[c] = math.MaxUint64
	}
	buf := make([]uint64, block)
	for i0 := 0; i0 < n; i0 += block {
		b := buf[:min(block, n-i0)]
		for c, comp := range k.comps {
			k.eval(comp, i0, b)
			lo, hi := p.min[c], mx[c]
			for _, w := range b {
				lo = min(lo, w)
				hi = max(hi, w)
			}
			p.min[c], mx[c] = lo, hi
		}
	}
	width := make([]int, nc)
	for c := range width {
		width[c] = bits.Len64(mx[c] - p.min[c])
	}
	// Greedy assignment, then shifts counted from each word's low end so
	// that the radix sort only visits used bits.
	cur, used := -1, 64
	for c := 0; c < nc; c++ {
		if width[c] == 0 { // the same for every cell: orders nothing
			p.word[c] = -1
			continue
		}
		if used+width[c] > 64 {
			cur++
			used = 0
			p.bits = append(p.bits, 0)
		}
		p.word[c] = cur
		used += width[c]
		p.bits[cur] = used
	}
	for c := 0; c < nc; c++ {
		if p.word[c] < 0 {
			continue
		}
		after := 0
		for e := c + 1; e < nc; e++ {
			if p.word[e] == p.word[c] && e != c {
				after += width[e]
			}
		}
		p.shift[c] = uint(after)
	}
	return p
}

// sortedCells is a permutation putting cells in global order, with a test
// for duplicate neighbours.
type sortedCells struct {
	perm []uint32
	// words[w][i] is key word w of input cell i (packed path only).
	words [][]uint64
	// sorted0 is key word 0 in sorted order (packed path only).
	sorted0 []uint64
	cmp     func(a, b uint32) int // comparison path
}

// sameAsPrev reports whether sorted cell i has the coordinates of cell i-1.
func (sc *sortedCells) sameAsPrev(i int) bool {
	a, b := sc.perm[i-1], sc.perm[i]
	if sc.cmp != nil {
		return sc.cmp(a, b) == 0
	}
	if sc.sorted0[i] != sc.sorted0[i-1] {
		return false
	}
	for _, w := range sc.words[1:] {
		if w[a] != w[b] {
			return false
		}
	}
	return true
}

// globalOrder sorts the n cells into the array's global order (stably:
// duplicates keep their input order).
func globalOrder(s *schema.ArraySchema, cs map[string]*col, n int) (*sortedCells, error) {
	if uint64(n) > math.MaxUint32 {
		return nil, invalidf("sparse write: %d cells in one fragment; at most %d", n, uint32(math.MaxUint32))
	}
	k := newOrderKeys(s, cs, n)
	if k.hasVar() {
		return k.compareSort(n), nil
	}
	p := k.plan(n)
	words := make([][]uint64, len(p.bits))
	for w := range words {
		words[w] = make([]uint64, n)
	}
	buf := make([]uint64, block)
	for i0 := 0; i0 < n; i0 += block {
		b := buf[:min(block, n-i0)]
		for c, comp := range k.comps {
			if p.word[c] < 0 {
				continue
			}
			k.eval(comp, i0, b)
			dst := words[p.word[c]][i0 : i0+len(b)]
			lo, sh := p.min[c], p.shift[c]
			for i, v := range b {
				dst[i] |= (v - lo) << sh
			}
		}
	}
	sc := &sortedCells{perm: make([]uint32, n), words: words}
	for i := range sc.perm {
		sc.perm[i] = uint32(i)
	}
	if len(words) == 0 { // every cell has the same coordinates
		sc.words = [][]uint64{make([]uint64, n)}
		sc.sorted0 = sc.words[0]
		return sc, nil
	}
	keys := make([]uint64, n)
	var sorter radix.Sorter
	for w := len(words) - 1; w >= 0; w-- {
		src := words[w]
		if w == len(words)-1 {
			copy(keys, src)
		} else {
			for i, p := range sc.perm {
				keys[i] = src[p]
			}
		}
		sorter.Sort(keys, sc.perm, p.bits[w])
	}
	sc.sorted0 = keys
	return sc, nil
}

// compareSort orders cells with string dimensions: the fixed components
// are precomputed words, the strings compared as bytes.
func (k *orderKeys) compareSort(n int) *sortedCells {
	words := make([][]uint64, len(k.comps))
	for c, comp := range k.comps {
		if comp.kind == compVar {
			continue
		}
		w := make([]uint64, n)
		for i0 := 0; i0 < n; i0 += block {
			k.eval(comp, i0, w[i0:min(i0+block, n)])
		}
		words[c] = w
	}
	cmpf := func(a, b uint32) int {
		for c, comp := range k.comps {
			if comp.kind == compVar {
				col := k.dims[comp.dim]
				if r := bytes.Compare(col.cell(int(a), 0), col.cell(int(b), 0)); r != 0 {
					return r
				}
				continue
			}
			if r := cmp.Compare(words[c][a], words[c][b]); r != 0 {
				return r
			}
		}
		return 0
	}
	perm := make([]uint32, n)
	for i := range perm {
		perm[i] = uint32(i)
	}
	slices.SortStableFunc(perm, cmpf)
	return &sortedCells{perm: perm, cmp: cmpf}
}

// newestFirst orders the cells of each run of equal coordinates by
// descending per-cell timestamp (stably), as TileDB stores the versions
// of a cell in a consolidated fragment and its reader expects them: the
// newest first.
func newestFirst(sc *sortedCells, ts *col) {
	if ts == nil {
		return
	}
	at := func(p uint32) uint64 { return binary.LittleEndian.Uint64(ts.data[8*int(p):]) }
	n := len(sc.perm)
	for a := 0; a < n; {
		b := a + 1
		for b < n && sc.sameAsPrev(b) {
			b++
		}
		if b-a > 1 {
			run := sc.perm[a:b]
			sort.SliceStable(run, func(i, j int) bool { return at(run[i]) > at(run[j]) })
		}
		a = b
	}
}
