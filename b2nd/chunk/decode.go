package chunk

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"

	"github.com/klauspost/compress/zstd"
)

// Chunk is a parsed chunk over its bytes, ready to decode block by block.
// A chunk parsed by ParseHead holds only its head (header, block starts,
// dictionary): its blocks are decoded from their own bytes (BlockRange,
// DecodeBlockAt), so that a reader fetches only the blocks it needs.
type Chunk struct {
	Header
	data    []byte
	bstarts []int32
	// ends[i] is where block i's bytes end: the next block start above
	// bstarts[i], or cbytes (c-blosc2 stores blocks in the order its
	// threads finish them, so block numbers need not follow offsets).
	ends []int32
	dict []byte
	zd   *zstd.Decoder
	// head is set when data holds only the head of the chunk.
	head bool
}

// Span is a byte range [Off, Off+Len) of a decoded block.
type Span struct{ Off, Len int }

// Parse checks b as one whole chunk (header, block starts, dictionary) and
// returns a view that decodes its blocks. wantNBytes, when not negative,
// is the decoded size the caller expects (the frame says it); a chunk that
// claims another is corrupt.
func Parse(b []byte, wantNBytes int) (*Chunk, error) {
	h, err := ParseHeader(b)
	if err != nil {
		return nil, err
	}
	if h.CBytes > len(b) {
		return nil, corrupt("truncated: cbytes %d but %d bytes present", h.CBytes, len(b))
	}
	c, need, err := parse(h, b, wantNBytes)
	if err == nil && need > 0 {
		err = corrupt("truncated: %d bytes, the head needs %d", len(b), need)
	}
	return c, err
}

// ParseHead parses a chunk from a prefix b of its bytes (at least the
// MinHeaderLen bytes of the header). When the prefix is too short for the
// head (header, block starts, dictionary; a repeated-value chunk's value),
// need is the prefix length to read and call again with; forged sizes are
// bounded by the header's cbytes, checked by the caller against what is
// stored. Blocks are then decoded with DecodeBlockAt from the bytes
// BlockRange names.
func ParseHead(b []byte, wantNBytes int) (c *Chunk, need int, err error) {
	h, err := ParseHeader(b)
	if err != nil {
		if h.Extended && len(b) < ExtendedHeaderLen && h.CBytes >= ExtendedHeaderLen {
			return nil, ExtendedHeaderLen, nil
		}
		return nil, 0, err
	}
	return parse(h, b, wantNBytes)
}

// HeadLen is how many bytes of a chunk of nbytes in blocks of blocksize
// bytes ParseHead usually needs (an extended header and the block starts;
// a dictionary asks for more).
func HeadLen(nbytes, blocksize int) int {
	if blocksize <= 0 {
		return ExtendedHeaderLen
	}
	return ExtendedHeaderLen + 4*((nbytes+blocksize-1)/blocksize) + 4
}

func parse(h Header, b []byte, wantNBytes int) (*Chunk, int, error) {
	if wantNBytes >= 0 && h.NBytes != wantNBytes {
		return nil, 0, corrupt("holds %d bytes, want %d", h.NBytes, wantNBytes)
	}
	c := &Chunk{Header: h, data: b[:min(len(b), h.CBytes)], head: len(b) < h.CBytes}
	if h.Extended && h.B2Flags&b2InstrCode != 0 {
		return nil, 0, corrupt("instrumented chunks hold no data")
	}
	if h.Extended && h.B2Flags&b2Lazy != 0 && h.Special() == SpecialNone {
		return nil, 0, corrupt("a lazy chunk (an in-memory c-blosc2 structure) found in storage")
	}
	if h.Special() != SpecialNone {
		if len(c.data) < h.CBytes {
			return nil, h.CBytes, nil
		}
		return c, 0, nil
	}
	if h.Memcpyed() {
		if h.CBytes != h.HeaderLen()+h.NBytes {
			return nil, 0, corrupt("memcpyed chunk of %d bytes holds cbytes %d", h.NBytes, h.CBytes)
		}
		return c, 0, nil
	}
	nb := h.NBlocks()
	hl := h.HeaderLen()
	if nb > (h.CBytes-hl)/4 {
		return nil, 0, corrupt("%d blocks do not fit %d bytes", nb, h.CBytes)
	}
	end := hl + 4*nb
	if end > len(c.data) {
		return nil, end + 4, nil
	}
	c.bstarts = make([]int32, nb)
	for i := range c.bstarts {
		c.bstarts[i] = int32(binary.LittleEndian.Uint32(c.data[hl+4*i:]))
	}
	if h.Extended && h.B2Flags&b2UseDict != 0 {
		if end+4 > len(c.data) {
			if end+4 > h.CBytes {
				return nil, 0, corrupt("truncated dictionary size")
			}
			return nil, end + 4, nil
		}
		ds := int(int32(binary.LittleEndian.Uint32(c.data[end:])))
		if ds <= 0 || ds > MaxDictSize || end+4+ds > h.CBytes {
			return nil, 0, corrupt("bad dictionary size %d", ds)
		}
		if end+4+ds > len(c.data) {
			return nil, end + 4 + ds, nil
		}
		c.dict = c.data[end+4 : end+4+ds]
		end += 4 + ds
		if h.Format() == FormatZstd {
			zd, err := dictZstd(c.dict)
			if err != nil {
				return nil, 0, corrupt("zstd dictionary: %v", err)
			}
			c.zd = zd
		}
	}
	for i, s := range c.bstarts {
		if int(s) < end || int(s) >= h.CBytes {
			c.Close()
			return nil, 0, corrupt("block %d starts at %d, outside [%d, %d)", i, s, end, h.CBytes)
		}
	}
	sorted := slices.Clone(c.bstarts)
	slices.Sort(sorted)
	c.ends = make([]int32, nb)
	for i, s := range c.bstarts {
		k, _ := slices.BinarySearch(sorted, s+1)
		c.ends[i] = int32(h.CBytes)
		if k < len(sorted) {
			c.ends[i] = sorted[k]
		}
	}
	return c, 0, nil
}

// BlockRange is where the stored bytes of block i lie in the chunk
// (empty for a special chunk, whose blocks need none).
func (c *Chunk) BlockRange(i int) (off, end int) {
	switch {
	case i < 0 || i >= c.NBlocks() || c.Special() != SpecialNone:
		return 0, 0
	case c.Memcpyed():
		off = c.HeaderLen() + i*c.BlockSize
		return off, off + c.BlockLen(i)
	}
	return int(c.bstarts[i]), int(c.ends[i])
}

// BlockBytes is the stored bytes of block i of a chunk holding all its
// bytes (Parse), nil for a chunk holding its head only.
func (c *Chunk) BlockBytes(i int) []byte {
	if c.head {
		return nil
	}
	off, end := c.BlockRange(i)
	return c.data[off:end]
}

// Head tells whether the chunk holds only its head (see ParseHead).
func (c *Chunk) Head() bool { return c.head }

// Close releases the chunk's dictionary decoder.
func (c *Chunk) Close() {
	if c.zd != nil {
		c.zd.Close()
		c.zd = nil
	}
}

// BlockLen is the decoded length of block i.
func (c *Chunk) BlockLen(i int) int {
	if (i+1)*c.BlockSize > c.NBytes {
		return c.NBytes - i*c.BlockSize
	}
	return c.BlockSize
}

// UsesDelta tells whether decoding a block other than 0 needs block 0.
func (c *Chunk) UsesDelta() bool {
	if c.Special() != SpecialNone || c.Memcpyed() {
		return false
	}
	for _, f := range c.Filters {
		if f == FilterDelta {
			return true
		}
	}
	return false
}

// FillSpecial fills dst (a part of the chunk's decoded bytes starting at
// byte offset off) for a special chunk; uninitialized chunks read as zeros.
func (c *Chunk) FillSpecial(dst []byte, off int) {
	switch c.Special() {
	case SpecialZero, SpecialUninit:
		clear(dst)
	case SpecialNaN:
		// The NaN item (float32 for 4-byte items, else float64) repeated
		// from the chunk's start; dst begins at byte off, which a run of
		// DecodeBlockTo may put inside an item, and may end inside one.
		ts, item := 8, uint64(0x7ff8000000000000)
		if c.Typesize == 4 {
			ts, item = 4, uint64(math.Float32bits(float32(math.NaN())))
		}
		var ib [8]byte
		binary.LittleEndian.PutUint64(ib[:], item)
		i := 0
		for ; i < len(dst) && (off+i)%ts != 0; i++ {
			dst[i] = ib[(off+i)%ts]
		}
		if ts == 4 {
			for ; i+4 <= len(dst); i += 4 {
				binary.LittleEndian.PutUint32(dst[i:], uint32(item))
			}
		} else {
			for ; i+8 <= len(dst); i += 8 {
				binary.LittleEndian.PutUint64(dst[i:], item)
			}
		}
		for ; i < len(dst); i++ {
			dst[i] = ib[(off+i)%ts]
		}
	case SpecialValue:
		v := c.data[ExtendedHeaderLen:c.CBytes]
		ts := len(v)
		for i := range dst {
			dst[i] = v[(off+i)%ts]
		}
	}
}

// DecodeBlock decodes block i into dst (BlockLen(i) bytes). ref is the
// decoded block 0, needed only when UsesDelta and i > 0. tmp, when long
// enough, is scratch space (2*BlockSize bytes) to avoid allocations. The
// chunk must hold all its bytes (Parse, not ParseHead).
func (c *Chunk) DecodeBlock(i int, dst, ref, tmp []byte) error {
	if c.head {
		return fmt.Errorf("block %d: the chunk holds only its head", i)
	}
	off, end := c.BlockRange(i)
	return c.DecodeBlockAt(i, c.data[off:end], dst, ref, tmp, nil)
}

// DecodeBlockAt decodes block i from src, its stored bytes (the chunk's
// bytes in BlockRange(i)), into dst as DecodeBlock does. spans, when not
// nil, are the byte ranges of the block the caller reads: a block whose
// only filter is shuffle is then unshuffled only there (the rest of dst
// is left as it was), since a box narrower than a block needs a fraction
// of it; other blocks are decoded whole.
func (c *Chunk) DecodeBlockAt(i int, src, dst, ref, tmp []byte, spans []Span) error {
	nb := c.NBlocks()
	if i < 0 || i >= nb {
		return fmt.Errorf("block %d of %d", i, nb)
	}
	bsize := c.BlockLen(i)
	dst = dst[:bsize]
	if sp := c.Special(); sp != SpecialNone {
		c.FillSpecial(dst, i*c.BlockSize)
		return nil
	}
	if c.Memcpyed() {
		if len(src) < bsize {
			return corrupt("block %d: %d bytes stored, want %d", i, len(src), bsize)
		}
		copy(dst, src[:bsize])
		return nil
	}
	// Filters run backward over a scratch buffer; decompression writes into
	// buf, filters alternate between buf and alt, the result lands in dst.
	// Without filters to undo, streams decompress straight into dst.
	if len(tmp) < 2*c.BlockSize {
		tmp = make([]byte, 2*c.BlockSize)
	}
	buf, alt := tmp[:bsize], tmp[c.BlockSize:c.BlockSize+bsize]
	nofilter := c.noFilter()
	if nofilter {
		buf = dst
	}
	// Split streams that are shuffle's byte planes are unshuffled from
	// where they are, and a plane stored raw (incompressible low bytes of
	// floats often are) is read where it lies instead of being copied
	// first.
	var pa [16][]byte
	planes, err := c.streams(i, src, buf, nofilter, pa[:0])
	if err != nil || nofilter {
		return err
	}
	if planes != nil {
		if spans == nil {
			UnshufflePlanesSpan(planes, dst, 0, bsize)
		}
		for _, sp := range spans {
			UnshufflePlanesSpan(planes, dst, sp.Off, sp.Off+sp.Len)
		}
		return nil
	}
	if ts, ok := c.shuffleOnly(); ok && spans != nil {
		for _, sp := range spans {
			UnshuffleSpan(ts, buf, dst, sp.Off, sp.Off+sp.Len)
		}
		return nil
	}
	// Undo the filters, last first.
	cur := buf
	for k := 5; k >= 0; k-- {
		f := c.Filters[k]
		meta := c.FiltersMeta[k]
		other := alt
		if &cur[0] == &alt[0] {
			other = buf
		}
		switch f {
		case FilterNone, FilterTruncPrec:
			continue
		case FilterShuffle:
			ts := c.Typesize
			if meta != 0 {
				ts = int(meta)
			}
			Unshuffle(ts, cur, other)
		case FilterBitshuffle:
			Bitunshuffle(c.Typesize, cur, other, c.Version)
		case FilterDelta:
			if i > 0 && len(ref) < bsize {
				return fmt.Errorf("block %d: the delta filter needs block 0", i)
			}
			DeltaDecode(c.Typesize, i == 0, ref, cur)
			continue
		case FilterBytedelta, FilterBytedeltaBuggy:
			ts := c.Typesize
			if meta != 0 {
				ts = int(meta)
			}
			BytedeltaDecode(ts, f == FilterBytedeltaBuggy, cur, other)
		default:
			return errUnsupportedFilter(f)
		}
		cur = other
	}
	copy(dst, cur)
	return nil
}

// noFilter tells whether the chunk's blocks have no filter to undo.
func (c *Chunk) noFilter() bool {
	for _, f := range c.Filters {
		if f != FilterNone && f != FilterTruncPrec {
			return false
		}
	}
	return true
}

// streams decompresses the streams of block i (of a chunk neither special
// nor memcpyed) from src into buf (the block's length). When the streams
// are shuffle's byte planes (shuffle the one filter, one stream per byte
// of the element), it returns them, appended to planes: a stream stored
// raw is then src's own bytes, not copied into buf. Otherwise it returns
// nil and buf holds the streams back to back.
func (c *Chunk) streams(i int, src, buf []byte, nofilter bool, planes [][]byte) ([][]byte, error) {
	bsize := len(buf)
	nstreams, keep := c.streamLayout(i)
	neblock := bsize / nstreams
	if neblock == 0 {
		return nil, corrupt("block %d: %d bytes in %d streams", i, bsize, nstreams)
	}
	for j := 0; j < nstreams; j++ {
		out := buf[j*neblock : (j+1)*neblock]
		if len(src) < 4 {
			return nil, corrupt("block %d stream %d: truncated size", i, j)
		}
		cb := int(int32(binary.LittleEndian.Uint32(src)))
		src = src[4:]
		switch {
		case cb == 0:
			clear(out)
		case cb < 0:
			if len(src) < 1 {
				return nil, corrupt("block %d stream %d: truncated token", i, j)
			}
			tok := src[0]
			src = src[1:]
			if tok&1 == 0 || cb < -255 {
				return nil, corrupt("block %d stream %d: unsupported token %#x (size %d)", i, j, tok, cb)
			}
			// A run of one byte (the constant exponent byte of floats in
			// a narrow range): filled by doubling copies, at memmove speed.
			out[0] = byte(-cb)
			for k := 1; k < len(out); k *= 2 {
				copy(out[k:], out[:k])
			}
		default:
			if cb > len(src) {
				return nil, corrupt("block %d stream %d: %d compressed bytes, %d left", i, j, cb, len(src))
			}
			if cb == neblock && keep {
				out = src[:cb]
			} else if cb == neblock {
				copy(out, src[:cb])
			} else if err := decompressStream(c.Format(), src[:cb], out, c.dict, c.zd, slack(out, nofilter)); err != nil {
				return nil, corrupt("block %d stream %d: %v", i, j, err)
			}
			src = src[cb:]
		}
		if keep {
			planes = append(planes, out)
		}
	}
	if !keep {
		return nil, nil
	}
	return planes, nil
}

// streamLayout is how many streams block i has, and whether they are
// shuffle's byte planes (see streams).
func (c *Chunk) streamLayout(i int) (nstreams int, planar bool) {
	bsize := c.BlockLen(i)
	leftover := bsize < c.BlockSize || c.NBytes%c.BlockSize != 0 && i == c.NBlocks()-1
	nstreams = 1
	if c.Split() && !leftover {
		nstreams = c.Typesize
	}
	ts, ok := c.shuffleOnly()
	return nstreams, ok && nstreams > 1 && ts == nstreams && bsize%nstreams == 0
}

// Run names len(Dst) bytes of a decoded block, from its byte Off, and
// where they go (see DecodeBlockTo).
type Run struct {
	Off int
	Dst []byte
}

// DecodeBlockTo decodes the byte ranges runs of block i from src (its
// stored bytes, as for DecodeBlockAt) straight to each run's Dst: a reader that knows where each part of a block goes in its output
// (a record batch's buffer) writes it there, without a decoded block in
// between. A block of shuffle's byte planes is unshuffled run by run
// from its streams (the unshuffle is the copy out); a block wholly in one
// run is decoded into place; any other is decoded into tmp and copied.
// tmp is scratch of 3*BlockSize bytes (allocated when shorter); ref is as
// for DecodeBlock.
func (c *Chunk) DecodeBlockTo(i int, src, ref, tmp []byte, runs []Run) error {
	nb := c.NBlocks()
	if i < 0 || i >= nb {
		return fmt.Errorf("block %d of %d", i, nb)
	}
	bsize := c.BlockLen(i)
	for _, r := range runs {
		if r.Off < 0 || r.Off+len(r.Dst) > bsize {
			return fmt.Errorf("block %d: a run of %d bytes at %d is outside the block (%d bytes)", i, len(r.Dst), r.Off, bsize)
		}
	}
	if len(runs) == 1 && runs[0].Off == 0 && len(runs[0].Dst) == bsize {
		return c.DecodeBlockAt(i, src, runs[0].Dst, ref, tmp, nil)
	}
	if c.Special() != SpecialNone {
		for _, r := range runs {
			c.FillSpecial(r.Dst, i*c.BlockSize+r.Off)
		}
		return nil
	}
	if len(tmp) < 3*c.BlockSize {
		tmp = make([]byte, 3*c.BlockSize)
	}
	if _, planar := c.streamLayout(i); planar && !c.Memcpyed() {
		var pa [16][]byte
		planes, err := c.streams(i, src, tmp[:bsize], false, pa[:0])
		if err != nil {
			return err
		}
		if planes != nil {
			for _, r := range runs {
				UnshufflePlanesTo(planes, r.Off, r.Off+len(r.Dst), r.Dst)
			}
			return nil
		}
	}
	blk := tmp[2*c.BlockSize : 2*c.BlockSize+bsize]
	if err := c.DecodeBlockAt(i, src, blk, ref, tmp[:2*c.BlockSize], nil); err != nil {
		return err
	}
	for _, r := range runs {
		copy(r.Dst, blk[r.Off:])
	}
	return nil
}

// slack is how much of the scratch after out a decoder may overwrite: the
// streams decompress into the scratch buffer (the next stream's place, or
// the unused second half), but not into dst, when there is nothing to undo.
func slack(out []byte, nofilter bool) int {
	if nofilter {
		return 0
	}
	return min(64, cap(out)-len(out))
}

// shuffleOnly tells whether shuffle is the one filter to undo (trunc_prec
// needs no undoing), and with which element size.
func (c *Chunk) shuffleOnly() (int, bool) {
	ts, n := 0, 0
	for k, f := range c.Filters {
		switch f {
		case FilterNone, FilterTruncPrec:
		case FilterShuffle:
			ts = c.Typesize
			if m := c.FiltersMeta[k]; m != 0 {
				ts = int(m)
			}
			n++
		default:
			return 0, false
		}
	}
	return ts, n == 1
}

func errUnsupportedFilter(f uint8) error {
	return unsupportedErr(fmt.Sprintf("blosc2 chunk: filter %d is not supported (a user-defined or plugin filter)", f))
}

// Decode decodes the whole chunk into dst (NBytes bytes).
func (c *Chunk) Decode(dst []byte) error {
	dst = dst[:c.NBytes]
	if c.Special() != SpecialNone {
		c.FillSpecial(dst, 0)
		return nil
	}
	tmp := make([]byte, 2*c.BlockSize)
	for i := 0; i < c.NBlocks(); i++ {
		off := i * c.BlockSize
		if err := c.DecodeBlock(i, dst[off:], dst[:c.BlockLen(0)], tmp); err != nil {
			return err
		}
	}
	return nil
}

// Validate checks that the chunk's codec and filters are ones this package
// decodes, before any block is.
func (c *Chunk) Validate() error {
	if c.Special() != SpecialNone || c.Memcpyed() {
		return nil
	}
	switch c.Format() {
	case FormatBloscLZ, FormatLZ4, FormatZlib, FormatZstd:
	default:
		return unsupportedErr(fmt.Sprintf("blosc2 chunk: codec format %d (a user-defined codec %d) is not supported", c.Format(), c.UDCodec))
	}
	for _, f := range c.Filters {
		switch f {
		case FilterNone, FilterShuffle, FilterBitshuffle, FilterDelta, FilterTruncPrec, FilterBytedelta, FilterBytedeltaBuggy:
		default:
			return errUnsupportedFilter(f)
		}
	}
	return nil
}
