package filters

import (
	"encoding/binary"
	"fmt"
	"slices"
	"sync"

	"github.com/tileflight/tileflight/filters/stage"
	"github.com/tileflight/tileflight/format/wire"
)

// intoReverser is implemented by stages that can write their output into
// a buffer the runner owns (same method as codecs.IntoReverser).
type intoReverser interface {
	ReverseInto(ctx *stage.Context, in stage.Buffers, dst []byte) (stage.Buffers, error)
}

// chunk is one filtered chunk of a serialized tile.
type chunk struct {
	orig uint32
	meta []byte
	data []byte
}

// parseChunks reads the chunk framing of a filtered tile. The chunks'
// original lengths must add up to want, the size the caller expects.
func parseChunks(filtered []byte, want uint64) ([]chunk, error) {
	r := wire.NewReader(filtered)
	n := r.Count(8, 12, "tile: number of chunks")
	if r.Err() != nil {
		return nil, r.Err()
	}
	chunks := make([]chunk, n)
	var total uint64
	for i := range chunks {
		c := &chunks[i]
		c.orig = r.Uint32("chunk original length")
		flen := r.Uint32("chunk filtered length")
		mlen := r.Uint32("chunk metadata length")
		c.meta = r.BytesU64(uint64(mlen), "chunk metadata")
		c.data = r.BytesU64(uint64(flen), "chunk data")
		if r.Err() != nil {
			return nil, fmt.Errorf("chunk %d of %d: %w", i, n, r.Err())
		}
		total += uint64(c.orig)
	}
	if total != want {
		return nil, fmt.Errorf("%w: chunks hold %d bytes, the tile %d", wire.ErrCorrupt, total, want)
	}
	return chunks, nil
}

// parallelMin is the tile size from which chunks are unfiltered on
// several goroutines; below it the hand-off costs more than it saves.
const parallelMin = 256 << 10

// UnfilterTile reverses the pipeline over a serialized fixed-size tile
// (or validity tile, or offsets tile) and writes the tile's bytes into dst,
// whose length must be the unfiltered tile size the caller knows (from the
// fragment metadata or the cell count). It returns dst. Nothing is
// allocated from lengths in the file beyond what len(dst) allows.
func (p *Pipeline) UnfilterTile(dst []byte, filtered []byte) ([]byte, error) {
	return p.unfilterTile(dst, filtered, false)
}

// decodeSlack is how far past its end a chunk's decoder may scribble:
// zstd's 16-byte copy loops write up to 16 bytes beyond their output and
// fall back to exact copies when the buffer has no such room. Which is
// faster depends on the data (BenchmarkBareZstd): chunks decoded in
// parallel get no slack (they cannot overrun a neighbour being decoded).
const decodeSlack = 32

// unfilterTile is UnfilterTile; tailSlack says whether dst's capacity
// past its length is the caller's scratch (decodeSlack bytes of it).
func (p *Pipeline) unfilterTile(dst []byte, filtered []byte, tailSlack bool) ([]byte, error) {
	chunks, err := parseChunks(filtered, uint64(len(dst)))
	if err != nil {
		return nil, err
	}
	offs := make([]int, len(chunks)+1)
	for i, c := range chunks {
		offs[i+1] = offs[i] + int(c.orig)
	}
	conc := p.concurrency()
	if conc <= 1 || len(chunks) < 2 || len(dst) < parallelMin {
		// In order, a chunk may scribble over the next one's space before
		// that is decoded, and the last one into the tail slack.
		end := len(dst)
		if tailSlack {
			end = min(cap(dst), len(dst)+decodeSlack)
		}
		full := dst[:end]
		for i := range chunks {
			out := full[offs[i]:offs[i+1]:min(end, offs[i+1]+decodeSlack)]
			if err := p.unfilterChunk(chunks[i], out, nil, i, len(chunks)); err != nil {
				return nil, err
			}
		}
		return dst, nil
	}
	run := func(i int) error {
		return p.unfilterChunk(chunks[i], dst[offs[i]:offs[i+1]:offs[i+1]], nil, i, len(chunks))
	}
	if err := parallel(len(chunks), conc, run); err != nil {
		return nil, err // dst may be partly written (and not zeroed)
	}
	return dst, nil
}

// DecodeSlack is how many bytes past a tile's length UnfilterInto may use
// as scratch, when dst's capacity has them.
const DecodeSlack = decodeSlack

// Plain reports whether the pipeline has no filter: UnfilterOwned then
// returns its input's own bytes, moved over their chunk framing.
func (p *Pipeline) Plain() bool { return len(p.stages) == 0 }

// FillsOut reports whether unfiltering writes every byte of the tile
// whenever it succeeds (see fillsOut), so that UnfilterInto may be given
// memory that holds anything.
func (p *Pipeline) FillsOut() bool { return p.fills }

// UnfilterInto is UnfilterTile into a buffer the caller owns whose
// capacity past len(dst), up to DecodeSlack bytes, is scratch the
// decoders may scribble over (it is faster for some data, see
// decodeSlack). Unless FillsOut, dst must be zeroed. filtered is not
// referenced once it returns.
func (p *Pipeline) UnfilterInto(dst, filtered []byte) ([]byte, error) {
	return p.unfilterTile(dst, filtered, true)
}

// UnfilterOwned is UnfilterTile for a serialized tile the caller owns
// and drops afterwards, unfiltering to size bytes. A tile with no filter
// is not copied into a new buffer: one chunk is returned as a slice of
// filtered, several are moved over their framing to its start (one move
// in place, no allocation). Other pipelines unfilter into a new buffer
// of size bytes, which the caller must have bounded (as for UnfilterTile).
func (p *Pipeline) UnfilterOwned(filtered []byte, size uint64) ([]byte, error) {
	if len(p.stages) != 0 {
		return p.unfilterTile(p.tileBuffer(size, size+decodeSlack), filtered, true)
	}
	chunks, err := parseChunks(filtered, size)
	if err != nil {
		return nil, err
	}
	for i, c := range chunks {
		if err := c.plainErr(i, len(chunks)); err != nil {
			return nil, err
		}
	}
	if len(chunks) == 1 {
		return chunks[0].data[:size:size], nil
	}
	// Every chunk's payload sits after its own framing, so moving the
	// payloads down in order never overwrites one not yet moved.
	o := 0
	for _, c := range chunks {
		o += copy(filtered[o:], c.data)
	}
	return filtered[:size:size], nil
}

// plainErr checks chunk i of n of a tile with no filter: its payload is
// its original bytes, with no metadata.
func (c chunk) plainErr(i, n int) error {
	if len(c.meta) != 0 || len(c.data) != int(c.orig) {
		return fmt.Errorf("%w: chunk %d of %d: unfiltered chunk of %d bytes (+%d metadata) for %d", wire.ErrCorrupt, i, n, len(c.data), len(c.meta), c.orig)
	}
	return nil
}

// parallel runs f(0..n-1) on up to conc goroutines and returns the error
// of the lowest failing index.
func parallel(n, conc int, f func(int) error) error {
	errs := make([]error, n)
	var wg sync.WaitGroup
	var mu sync.Mutex
	next := 0
	for g := 0; g < min(conc, n); g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				mu.Lock()
				i := next
				next++
				mu.Unlock()
				if i >= n {
					return
				}
				errs[i] = f(i)
			}
		}()
	}
	wg.Wait()
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}

// unfilterChunk runs the stages in reverse over one chunk; the first
// filter writes into out (len = the chunk's original length). offsets is
// non-nil for var-sized strings whose offsets the first filter decodes.
func (p *Pipeline) unfilterChunk(c chunk, out []byte, offsets []uint64, ci, nc int) error {
	if len(p.stages) == 0 {
		if len(c.meta) != 0 || len(c.data) != len(out) {
			return fmt.Errorf("%w: chunk %d of %d: unfiltered chunk of %d bytes (+%d metadata) for %d", wire.ErrCorrupt, ci, nc, len(c.data), len(c.meta), len(out))
		}
		copy(out, c.data)
		return nil
	}
	// Intermediate results may be larger than the chunk (RLE triples byte
	// data, checksums and dictionaries add metadata) but never by much.
	limit := 16*len(out) + 1<<20
	bufs := stage.Buffers{Data: [][]byte{c.data}}
	if len(c.meta) > 0 {
		bufs.Meta = [][]byte{c.meta}
	}
	for i := len(p.stages) - 1; i >= 0; i-- {
		ctx := p.ctx(i)
		if i == 0 && offsets != nil {
			ctx.VarOffsets = offsets
		}
		var err error
		switch s := p.stages[i].(type) {
		case *compStage:
			var dst []byte
			if i == 0 {
				dst = out
			}
			bufs, err = s.reverse(ctx, bufs, dst, limit)
		case intoReverser:
			if i == 0 {
				bufs, err = s.ReverseInto(ctx, bufs, out)
			} else {
				bufs, err = s.ReverseInto(ctx, bufs, nil)
			}
		default:
			bufs, err = s.Reverse(ctx, bufs)
		}
		if err != nil {
			return p.stageErr(ci, nc, i, "reverse", err)
		}
		if n := stage.Size(bufs.Data) + stage.Size(bufs.Meta); n > limit && i > 0 {
			return p.stageErr(ci, nc, i, "reverse", fmt.Errorf("%w: %d bytes out of a %d-byte chunk", wire.ErrCorrupt, n, len(out)))
		}
	}
	if stage.Size(bufs.Meta) != 0 {
		return fmt.Errorf("%w: chunk %d of %d: %d metadata bytes left over after the first filter", wire.ErrCorrupt, ci, nc, stage.Size(bufs.Meta))
	}
	if n := stage.Size(bufs.Data); n != len(out) {
		return fmt.Errorf("%w: chunk %d of %d: unfiltered to %d bytes, the chunk header says %d", wire.ErrCorrupt, ci, nc, n, len(out))
	}
	// Stages that could not write into out (or several parts) are copied.
	o := 0
	for _, part := range bufs.Data {
		if len(part) > 0 && &part[0] != &out[o] {
			copy(out[o:], part)
		}
		o += len(part)
	}
	return nil
}

// chunkSize is TileDB's chunk size for a tile of size bytes made of
// cellSize-byte cells: the global 64 KiB rounded down to whole cells, at
// least one cell, at most the tile.
func chunkSize(size, cellSize uint64) uint64 {
	cs := min(uint64(MaxChunkSize), size)
	cs = cs / cellSize * cellSize
	return max(cs, cellSize)
}

// fixedChunks returns the chunk boundaries of a fixed-size tile.
func (p *Pipeline) fixedChunks(size uint64) []uint64 {
	cs := size
	if p.chunking {
		cs = chunkSize(size, uint64(p.cellSize))
	}
	if size == cs {
		return []uint64{0, size}
	}
	if size == 0 {
		return []uint64{0} // zero chunks, as TileDB frames an empty chunked tile
	}
	bounds := []uint64{0}
	for o := cs; o < size; o += cs {
		bounds = append(bounds, o)
	}
	return append(bounds, size)
}

// varChunks returns the chunk boundaries of a var-sized values tile: cells
// are never split; a cell that overflows the chunk joins it while the
// chunk is at most half full or would stay within 150% of the chunk size,
// and starts a new chunk otherwise (a cell larger than a chunk then gets
// one of its own). Like TileDB, this can end with an empty chunk.
func (p *Pipeline) varChunks(size uint64, offsets []uint64) ([]uint64, error) {
	cs := size
	if p.chunking {
		cs = chunkSize(size, uint64(p.typ.Size()))
	}
	if size == cs {
		return []uint64{0, size}, nil
	}
	bounds := []uint64{0}
	cur := uint64(0)
	lo, hi := cs/2, cs+cs/2
	for c, off := range offsets {
		end := size
		if c+1 < len(offsets) {
			end = offsets[c+1]
		}
		cellSize := end - off
		next := cur + cellSize
		if next <= cs {
			cur = next
			continue
		}
		if cur <= lo || next <= hi {
			if next > 0xFFFFFFFF {
				return nil, fmt.Errorf("%w: chunk exceeds 4 GiB", ErrUnsupported)
			}
			bounds = append(bounds, off+cellSize)
			cur = 0
			continue
		}
		bounds = append(bounds, off)
		if cellSize > cs {
			if cellSize > 0xFFFFFFFF {
				return nil, fmt.Errorf("%w: cell exceeds 4 GiB", ErrUnsupported)
			}
			if c != len(offsets)-1 {
				bounds = append(bounds, off+cellSize)
			}
			cur = 0
		} else {
			cur = cellSize
		}
	}
	return append(bounds, size), nil
}

// FilterTile runs the pipeline forward over a fixed-size (or validity, or
// offsets) tile and returns the serialized tile exactly as TileDB frames
// it: chunks of MaxChunkSize rounded to whole cells unless chunking is off.
func (p *Pipeline) FilterTile(data []byte) ([]byte, error) {
	return p.filterChunks(data, p.fixedChunks(uint64(len(data))), nil)
}

// FilterTileParts is FilterTile over the tile that is the concatenation
// of parts, without concatenating them: a chunk lying inside one part is
// filtered straight from it, and only a chunk straddling parts is first
// copied (into a buffer of one chunk). A dense write uses it for a tile
// whose cells arrived in several input batches.
func (p *Pipeline) FilterTileParts(parts [][]byte) ([]byte, error) {
	if len(parts) == 1 {
		return p.FilterTile(parts[0])
	}
	// starts[k] is where parts[k] begins in the tile.
	starts := make([]uint64, len(parts)+1)
	for k, pt := range parts {
		starts[k+1] = starts[k] + uint64(len(pt))
	}
	size := starts[len(parts)]
	bounds := p.fixedChunks(size)
	chunk := func(i int) []byte {
		lo, hi := bounds[i], bounds[i+1]
		if lo == hi {
			return []byte{} // the one empty chunk of an empty unchunked tile
		}
		k, _ := slices.BinarySearch(starts, lo+1) // first part start past lo
		k--
		if hi <= starts[k+1] {
			return parts[k][lo-starts[k] : hi-starts[k]]
		}
		buf := make([]byte, 0, hi-lo)
		for o := lo; o < hi; k++ {
			e := min(hi, starts[k+1])
			buf = append(buf, parts[k][o-starts[k]:e-starts[k]]...)
			o = e
		}
		return buf
	}
	return p.filterChunksFrom(chunk, bounds, size, nil)
}

func (p *Pipeline) filterChunks(data []byte, bounds []uint64, offsets []uint64) ([]byte, error) {
	chunk := func(i int) []byte { return data[bounds[i]:bounds[i+1]] }
	return p.filterChunksFrom(chunk, bounds, uint64(len(data)), offsets)
}

// filterChunksFrom filters the chunks [bounds[i], bounds[i+1]) of a tile
// of size bytes, chunk(i) giving each one's bytes, and frames them.
func (p *Pipeline) filterChunksFrom(chunk func(int) []byte, bounds []uint64, size uint64, offsets []uint64) ([]byte, error) {
	n := len(bounds) - 1
	type result struct{ meta, data []byte }
	res := make([]result, n)
	run := func(i int) error {
		in := chunk(i)
		bufs := stage.Buffers{Data: [][]byte{in}}
		for s, st := range p.stages {
			ctx := p.ctx(s)
			if s == 0 && offsets != nil {
				ctx.VarOffsets = offsets
			}
			var err error
			if bufs, err = st.Forward(ctx, bufs); err != nil {
				return p.stageErr(i, n, s, "forward", err)
			}
		}
		res[i] = result{stage.Concat(bufs.Meta), stage.Concat(bufs.Data)}
		if uint64(len(res[i].meta)) > 0xFFFFFFFF || uint64(len(res[i].data)) > 0xFFFFFFFF {
			return fmt.Errorf("chunk %d of %d: %w: filtered chunk exceeds 4 GiB", i, n, ErrUnsupported)
		}
		return nil
	}
	var err error
	if conc := p.concurrency(); conc > 1 && n > 1 && size >= parallelMin {
		err = parallel(n, conc, run)
	} else {
		for i := 0; i < n && err == nil; i++ {
			err = run(i)
		}
	}
	if err != nil {
		return nil, err
	}
	total := 8
	for _, r := range res {
		total += 12 + len(r.meta) + len(r.data)
	}
	out := make([]byte, 0, total)
	out = binary.LittleEndian.AppendUint64(out, uint64(n))
	for i, r := range res {
		out = binary.LittleEndian.AppendUint32(out, uint32(bounds[i+1]-bounds[i]))
		out = binary.LittleEndian.AppendUint32(out, uint32(len(r.data)))
		out = binary.LittleEndian.AppendUint32(out, uint32(len(r.meta)))
		out = append(out, r.meta...)
		out = append(out, r.data...)
	}
	return out, nil
}

// emptyTile is what TileDB writes for an offsets tile whose offsets travel
// in the values tile: zero chunks.
var emptyTile = []byte{0, 0, 0, 0, 0, 0, 0, 0}

// FilterVarTile filters a var-sized field's tile pair: offsets holds one
// start offset per cell (relative to values, the first 0), and off is the
// pipeline of the offsets tile (built with IsOffsets). It returns the
// serialized offsets and values tiles. When the values pipeline carries
// the offsets (CarriesOffsets), the offsets tile is TileDB's empty tile.
func (p *Pipeline) FilterVarTile(off *Pipeline, offsets []uint64, values []byte) (filteredOffsets, filteredValues []byte, err error) {
	if err := checkOffsets(values, offsets); err != nil && !(len(offsets) == 0 && len(values) == 0) {
		return nil, nil, fmt.Errorf("var tile: %w", err)
	}
	var strOffs []uint64
	if p.strings {
		strOffs = offsets
	}
	bounds, err := p.varChunks(uint64(len(values)), offsets)
	if err != nil {
		return nil, nil, fmt.Errorf("var tile: %w", err)
	}
	filteredValues, err = p.filterChunks(values, bounds, strOffs)
	if err != nil {
		return nil, nil, fmt.Errorf("var tile values: %w", err)
	}
	if p.strings {
		return append([]byte(nil), emptyTile...), filteredValues, nil
	}
	ob := make([]byte, 8*len(offsets))
	for i, o := range offsets {
		binary.LittleEndian.PutUint64(ob[8*i:], o)
	}
	filteredOffsets, err = off.FilterTile(ob)
	if err != nil {
		return nil, nil, fmt.Errorf("var tile offsets: %w", err)
	}
	return filteredOffsets, filteredValues, nil
}

// UnfilterVarOwned is UnfilterVarTile into new buffers of offsetsSize
// (8*(cells+1)) and valuesSize bytes, which the caller must have bounded
// (from the fragment metadata). Buffers every byte of which unfiltering
// writes are not zeroed first (see fillsOut): the offsets whenever the
// values carry them or the offsets pipeline fills its output, the values
// when their pipeline does.
func (p *Pipeline) UnfilterVarOwned(off *Pipeline, filteredOffsets, filteredValues []byte, offsetsSize, valuesSize uint64) (offsets, values []byte, err error) {
	var dstOffsets, dstValues []byte
	if p.strings || off.fills {
		dstOffsets = allocDirty(int(offsetsSize), int(offsetsSize))
	} else {
		dstOffsets = make([]byte, offsetsSize)
	}
	if !p.strings && p.fills {
		dstValues = allocDirty(int(valuesSize), int(valuesSize))
	} else {
		dstValues = make([]byte, valuesSize)
	}
	return p.UnfilterVarTile(off, filteredOffsets, filteredValues, dstOffsets, dstValues)
}

// UnfilterVarTile reverses a var-sized field's tile pair. dstOffsets must
// be 8*(cells+1) bytes and dstValues the unfiltered values size (both
// known from the fragment metadata). It returns the offsets as cells+1
// little-endian u64 (the last one = len(values), ready to be an Arrow
// large offsets buffer) and the values, both aliasing the dst buffers.
// The offsets are checked to be non-decreasing and within the values.
func (p *Pipeline) UnfilterVarTile(off *Pipeline, filteredOffsets, filteredValues, dstOffsets, dstValues []byte) (offsets, values []byte, err error) {
	if len(dstOffsets) < 8 || len(dstOffsets)%8 != 0 {
		return nil, nil, fmt.Errorf("var tile: offsets buffer of %d bytes is not cells+1 offsets", len(dstOffsets))
	}
	n := len(dstOffsets)/8 - 1
	if p.strings {
		chunks, err := parseChunks(filteredValues, uint64(len(dstValues)))
		if err != nil {
			return nil, nil, fmt.Errorf("var tile values: %w", err)
		}
		if len(chunks) != 1 {
			return nil, nil, fmt.Errorf("var tile values: %w: %d chunks, strings with %s are one chunk", wire.ErrCorrupt, len(chunks), p.filters[0].Type)
		}
		offs := make([]uint64, n)
		if err := p.unfilterChunk(chunks[0], dstValues, offs, 0, 1); err != nil {
			return nil, nil, fmt.Errorf("var tile values: %w", err)
		}
		for i, o := range offs {
			binary.LittleEndian.PutUint64(dstOffsets[8*i:], o)
		}
	} else {
		if _, err := off.UnfilterTile(dstOffsets[:8*n], filteredOffsets); err != nil {
			return nil, nil, fmt.Errorf("var tile offsets: %w", err)
		}
		if _, err := p.UnfilterTile(dstValues, filteredValues); err != nil {
			return nil, nil, fmt.Errorf("var tile values: %w", err)
		}
		prev := uint64(0)
		for i := 0; i < n; i++ {
			o := binary.LittleEndian.Uint64(dstOffsets[8*i:])
			if o < prev || o > uint64(len(dstValues)) {
				return nil, nil, fmt.Errorf("var tile offsets: %w: offset %d of cell %d is out of order or past the %d value bytes", wire.ErrCorrupt, o, i, len(dstValues))
			}
			prev = o
		}
	}
	binary.LittleEndian.PutUint64(dstOffsets[8*n:], uint64(len(dstValues)))
	return dstOffsets, dstValues, nil
}

// UnfilterRange is UnfilterOwned for a caller that will read only bytes
// [lo, hi) of a fixed-size tile of size bytes. Every chunk of a filtered
// tile runs the whole pipeline on its own, so only the chunks overlapping
// [lo, hi) need decoding; it decodes just those when they are at most
// half of the tile's chunks, and the whole tile otherwise (a larger part
// saves too little to be worth a tile nobody else can use). A tile with
// no filter is, as in UnfilterOwned, moved over its framing in filtered
// itself, then only those chunks are moved. It returns the tile buffer
// (len size) and the byte range [a, b) it holds decoded, chunk aligned
// and covering [lo, hi): the bytes outside it are unspecified and must
// not be read. chunks and decoded count the tile's chunks and those
// decoded.
func (p *Pipeline) UnfilterRange(filtered []byte, size, lo, hi uint64) (data []byte, a, b uint64, chunks, decoded int, err error) {
	cs, err := parseChunks(filtered, size)
	if err != nil {
		return nil, 0, 0, 0, 0, err
	}
	plain := len(p.stages) == 0
	hi = min(hi, size)
	first, last := len(cs), -1 // the chunks overlapping [lo, hi)
	offs := make([]uint64, len(cs)+1)
	for i, c := range cs {
		offs[i+1] = offs[i] + uint64(c.orig)
		if lo < hi && offs[i] < hi && offs[i+1] > lo {
			first, last = min(first, i), i
		}
	}
	n := last - first + 1
	if last < 0 || 2*n > len(cs) {
		data, err = p.UnfilterOwned(filtered, size)
		return data, 0, size, len(cs), len(cs), err
	}
	if plain {
		// Each chunk's payload lies past its own place in the tile (after
		// the framing of it and of the chunks before it), so moving the
		// needed ones down in order never overwrites one not yet moved.
		for i := first; i <= last; i++ {
			c := cs[i]
			if err := c.plainErr(i, len(cs)); err != nil {
				return nil, 0, 0, 0, 0, err
			}
			copy(filtered[offs[i]:], c.data)
		}
		return filtered[:size:size], offs[first], offs[last+1], len(cs), n, nil
	}
	dst := p.tileBuffer(size, size+decodeSlack)
	// In order, as unfilterTile does: a chunk may scribble up to
	// decodeSlack bytes into the next one's space (decoded after it, or
	// not needed) and the tile's last chunk into the tail slack.
	end := int(min(uint64(cap(dst)), size+decodeSlack))
	full := dst[:end]
	for i := first; i <= last; i++ {
		out := full[offs[i]:offs[i+1]:min(uint64(end), offs[i+1]+decodeSlack)]
		if err := p.unfilterChunk(cs[i], out, nil, i, len(cs)); err != nil {
			return nil, 0, 0, 0, 0, err
		}
	}
	return dst, offs[first], offs[last+1], len(cs), n, nil
}
