package b2nd

import (
	"context"
	"errors"
	"fmt"
	"sort"

	"github.com/tileflight/tileflight/b2nd/chunk"
	"github.com/tileflight/tileflight/b2nd/frame"
	"github.com/tileflight/tileflight/errkind"
	"github.com/tileflight/tileflight/storage"
)

// CreateOptions describe a new array (python-blosc2's defaults where a
// field is zero: zstd clevel 1 with shuffle, a contiguous frame).
type CreateOptions struct {
	Shape, Chunks, Blocks []int64
	Dtype                 string
	Codec                 int
	CLevel                int
	Filters               [6]uint8
	FiltersMeta           [6]uint8
	Sparse                bool
	// UseDict compresses each chunk with a dictionary (zstd only).
	UseDict bool
}

// Create writes a new array whose chunks are all special zero chunks (as
// blosc2.zeros does): nothing is compressed until cells are written.
func Create(ctx context.Context, st storage.Store, name string, o CreateOptions) (*Array, error) {
	dt, err := ParseDtype(o.Dtype)
	if err != nil {
		return nil, errkind.Errorf(errkind.InvalidArgument, "array %s: %v", name, err)
	}
	if o.UseDict && o.Codec != chunk.CodecZstd {
		return nil, errkind.Errorf(errkind.Unimplemented, "array %s: use_dict is written for the zstd codec only", name)
	}
	nd := len(o.Shape)
	if nd == 0 || nd > MaxDims || len(o.Chunks) != nd || len(o.Blocks) != nd {
		return nil, errkind.Errorf(errkind.InvalidArgument, "array %s: shape, chunks and blocks need the same 1 to %d dimensions", name, MaxDims)
	}
	for i := range o.Shape {
		// A dimension of size 0 may have chunks and blocks of 0 (what
		// python-blosc2 picks for it).
		zero := o.Shape[i] == 0 && o.Chunks[i] == 0 && o.Blocks[i] == 0
		if !zero && (o.Shape[i] < 0 || o.Chunks[i] <= 0 || o.Blocks[i] <= 0 || o.Blocks[i] > o.Chunks[i]) {
			return nil, errkind.Errorf(errkind.InvalidArgument, "array %s: dimension %d: shape %d, chunks %d, blocks %d (want 0 < blocks <= chunks)", name, i, o.Shape[i], o.Chunks[i], o.Blocks[i])
		}
	}
	g, err := NewGeometry(o.Shape, o.Chunks, o.Blocks, dt.ItemSize)
	if err != nil {
		return nil, errkind.Errorf(errkind.InvalidArgument, "array %s: %v", name, err)
	}
	if g.ChunkNBytes() > chunk.MaxBlockSize || g.BlockNBytes() > chunk.MaxBlockSize {
		return nil, errkind.Errorf(errkind.InvalidArgument, "array %s: chunks of %d bytes are too large", name, g.ChunkNBytes())
	}
	if _, err := chunk.CodecFormat(o.Codec); err != nil {
		return nil, errkind.Errorf(errkind.InvalidArgument, "array %s: %v", name, err)
	}
	m := &Meta{Version: 0, Shape: o.Shape, ChunkShape: o.Chunks, BlockShape: o.Blocks, Dtype: o.Dtype}
	h := &frame.Header{Type: frame.Contiguous, Codec: o.Codec, CLevel: o.CLevel, SplitMode: chunk.AutoSplit,
		Typesize: dt.ItemSize, BlockSize: g.BlockNBytes(), ChunkSize: g.ChunkNBytes(), NThreadsC: 1, NThreadsD: 1,
		Filters: o.Filters, FiltersMeta: o.FiltersMeta, UseDict: o.UseDict, Metalayers: []frame.Meta{{Name: "b2nd", Content: m.Encode()}}}
	if o.Sparse {
		h.Type = frame.Sparse
	}
	if g.NChunks == 0 {
		// python-blosc2 stores block and chunk sizes of 0 for an empty array.
		h.BlockSize, h.ChunkSize = 0, 0
	}
	a := &Array{Store: st, Name: name, Sparse: o.Sparse, Header: h, Meta: m, Dtype: dt, Geometry: g}
	a.Offsets = make([]frame.Offset, g.NChunks)
	for i := range a.Offsets {
		a.Offsets[i] = frame.SpecialOffset(chunk.SpecialZero)
	}
	if err := a.commit(ctx, nil, nil, map[int64]bool{}); err != nil {
		return nil, err
	}
	return Open(ctx, st, name)
}

// Box is an inclusive box of cells: Lo[d]..Hi[d].
type Box struct{ Lo, Hi []int64 }

// Write replaces the cells of box with data (the box's items in C order,
// in the dtype's byte order). Every chunk the box touches is decoded (if
// stored), overlaid and compressed again with the array's parameters.
// A contiguous frame is then written again whole (one Put: readers see
// the old or the new array); a sparse frame gets each new chunk object
// first, then its index file (each Put is atomic, and a chunk file written
// before a failure is not referenced by the old index unless it replaced
// one in place - see docs/protocol.md).
func (a *Array) Write(ctx context.Context, box Box, data []byte) error {
	nd := len(a.Shape)
	if len(box.Lo) != nd || len(box.Hi) != nd {
		return errkind.Errorf(errkind.InvalidArgument, "array %s: the subarray needs %d dimensions", a.Name, nd)
	}
	n := int64(1)
	for d := range box.Lo {
		if box.Lo[d] < 0 || box.Hi[d] >= a.Shape[d] || box.Lo[d] > box.Hi[d] {
			return errkind.Errorf(errkind.InvalidArgument, "array %s: dim%d: [%d, %d] is outside [0, %d]", a.Name, d, box.Lo[d], box.Hi[d], a.Shape[d]-1)
		}
		n *= box.Hi[d] - box.Lo[d] + 1
	}
	if int64(len(data)) != n*int64(a.ItemSize) {
		return errkind.Errorf(errkind.InvalidArgument, "array %s: %d bytes for %d cells of %d bytes", a.Name, len(data), n, a.ItemSize)
	}
	// Chunks touched, in C order.
	lo := make([]int64, nd)
	hi := make([]int64, nd)
	for d := range lo {
		lo[d], hi[d] = box.Lo[d]/a.ChunkShape[d], box.Hi[d]/a.ChunkShape[d]
	}
	newChunks := map[int64][]byte{}
	cc := append([]int64(nil), lo...)
	p := a.Header.Params()
	p.BlockSize = a.BlockNBytes()
	buf := make([]byte, a.ChunkNBytes())
	for {
		ci := a.ChunkIndex(cc)
		c, err := a.ReadChunk(ctx, ci)
		if err != nil {
			return err
		}
		err = c.Decode(buf)
		c.Close()
		if err != nil {
			return a.ChunkErr(ci, err)
		}
		a.overlay(cc, box, data, buf)
		enc, err := chunk.Encode(p, buf)
		if err != nil {
			return fmt.Errorf("array %s: chunk %d: %w", a.Name, ci, err)
		}
		newChunks[ci] = enc
		d := nd - 1
		for ; d >= 0; d-- {
			cc[d]++
			if cc[d] <= hi[d] {
				break
			}
			cc[d] = lo[d]
		}
		if d < 0 {
			break
		}
	}
	return a.commit(ctx, newChunks, nil, nil)
}

// overlay copies the cells of box that fall in chunk cc from data into
// the decoded chunk buf.
func (a *Array) overlay(cc []int64, box Box, data, buf []byte) {
	nd := len(cc)
	is := int64(a.ItemSize)
	lo := make([]int64, nd)
	hi := make([]int64, nd)
	for d := range cc {
		lo[d] = max(box.Lo[d], cc[d]*a.ChunkShape[d])
		hi[d] = min(box.Hi[d], (cc[d]+1)*a.ChunkShape[d]-1)
	}
	x := append([]int64(nil), lo...)
	l := make([]int64, nd)
	for {
		var bi int64
		for d := range x {
			bi = bi*(box.Hi[d]-box.Lo[d]+1) + x[d] - box.Lo[d]
			l[d] = x[d] - cc[d]*a.ChunkShape[d]
		}
		co := a.ItemOffset(l)
		copy(buf[co*is:(co+1)*is], data[bi*is:(bi+1)*is])
		d := nd - 1
		for ; d >= 0; d-- {
			x[d]++
			if x[d] <= hi[d] {
				break
			}
			x[d] = lo[d]
		}
		if d < 0 {
			return
		}
	}
}

// SetVLMeta replaces the vlmetalayers named in values (raw msgpack bytes)
// and writes the frame (or the sframe index) again.
func (a *Array) SetVLMeta(ctx context.Context, values map[string][]byte) error {
	vl := append([]frame.Meta(nil), a.VLMeta...)
	keys := make([]string, 0, len(values))
	for k := range values {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if len(k) >= 32 {
			return errkind.Errorf(errkind.InvalidArgument, "array %s: vlmeta key %q is longer than 31 bytes (c-blosc2's limit)", a.Name, k)
		}
		enc, err := frame.EncodeVLMeta(values[k])
		if err != nil {
			return err
		}
		found := false
		for i := range vl {
			if vl[i].Name == k {
				vl[i].Content, found = enc, true
			}
		}
		if !found {
			vl = append(vl, frame.Meta{Name: k, Content: enc})
		}
	}
	return a.commit(ctx, nil, vl, nil)
}

// commit writes the frame with newChunks replacing chunks (nil: none) and
// vl as the vlmetalayers (nil: keep).
func (a *Array) commit(ctx context.Context, newChunks map[int64][]byte, vl []frame.Meta, _ map[int64]bool) error {
	if vl == nil {
		vl = a.VLMeta
	}
	h := *a.Header
	h.HasVLMeta = len(vl) > 0
	h.NBytes = int64(len(a.Offsets)) * int64(a.ChunkNBytes())
	offs := append([]frame.Offset(nil), a.Offsets...)
	trailer, err := frame.EncodeTrailer(vl)
	if err != nil {
		return errkind.Errorf(errkind.InvalidArgument, "array %s: %v", a.Name, err)
	}
	if a.Sparse {
		used := map[int64]bool{}
		for _, o := range offs {
			if o.Special() == 0 {
				used[int64(o)] = true
			}
		}
		var cbytes int64
		keys := make([]int64, 0, len(newChunks))
		for ci := range newChunks {
			keys = append(keys, ci)
		}
		sort.Slice(keys, func(i, j int) bool { return keys[i] < keys[j] })
		for _, ci := range keys {
			file := int64(offs[ci])
			if offs[ci].Special() != 0 {
				// A new chunk object: its own number when free.
				file = ci
				for used[file] {
					file++
				}
				used[file] = true
			}
			if err := a.Store.Put(ctx, ChunkKey(a.Name, file), newChunks[ci]); err != nil {
				return fmt.Errorf("array %s: chunk %d: %w", a.Name, ci, err)
			}
			offs[ci] = frame.Offset(file)
		}
		for _, c := range newChunks {
			cbytes += int64(len(c))
		}
		h.CBytes = a.Header.CBytes + cbytes
		if newChunks == nil {
			h.CBytes = a.Header.CBytes
		}
		idx, err := frame.EncodeOffsets(offs)
		if err != nil {
			return err
		}
		if len(offs) == 0 {
			idx = nil
		}
		head, err := frame.EncodeHeader(&h, 0)
		if err != nil {
			return err
		}
		total := int64(len(head) + len(idx) + len(trailer))
		if head, err = frame.EncodeHeader(&h, total); err != nil {
			return err
		}
		out := append(append(append([]byte(nil), head...), idx...), trailer...)
		if err := a.Store.Put(ctx, a.Name+"/"+IndexFile, out); err != nil {
			return fmt.Errorf("array %s: index: %w", a.Name, err)
		}
		a.Offsets, a.VLMeta, a.Header = offs, vl, &h
		return nil
	}
	// Contiguous: chunks in index order, stored ones copied.
	var body []byte
	for ci, o := range offs {
		if c, ok := newChunks[int64(ci)]; ok {
			offs[ci] = frame.Offset(len(body))
			body = append(body, c...)
			continue
		}
		if o.Special() != 0 {
			continue
		}
		old, err := a.Store.GetRange(ctx, a.Name, int64(a.Header.HeaderLen)+int64(o), a.chunkEnd[ci]-int64(o))
		if err != nil {
			return a.ChunkErr(int64(ci), err)
		}
		nb, cb, err := chunk.Sizes(old)
		if err != nil || cb > len(old) || nb != a.ChunkNBytes() {
			return a.ChunkErr(int64(ci), errkind.Errorf(errkind.DataLoss, "corrupt chunk (nbytes %d, cbytes %d): %v", nb, cb, err))
		}
		offs[ci] = frame.Offset(len(body))
		body = append(body, old[:cb]...)
	}
	h.CBytes = int64(len(body))
	idx, err := frame.EncodeOffsets(offs)
	if err != nil {
		return err
	}
	if len(offs) == 0 {
		// An empty array (a dimension of size 0) has no offsets chunk, as
		// c-blosc2 writes it (it refuses to open one that has).
		idx = nil
	}
	head, err := frame.EncodeHeader(&h, 0)
	if err != nil {
		return err
	}
	total := int64(len(head) + len(body) + len(idx) + len(trailer))
	if head, err = frame.EncodeHeader(&h, total); err != nil {
		return err
	}
	out := make([]byte, 0, total)
	out = append(append(append(append(out, head...), body...), idx...), trailer...)
	if err := a.Store.Put(ctx, a.Name, out); err != nil {
		return fmt.Errorf("array %s: %w", a.Name, err)
	}
	return nil
}

// Drop deletes the array at name, a contiguous frame (one file) or a
// sparse frame (a directory; its index goes first, so that a half-dropped
// array no longer opens). It reports false, and deletes nothing, when
// nothing is at name.
func Drop(ctx context.Context, st storage.Store, name string) (bool, error) {
	e, err := st.Stat(ctx, name)
	if err != nil {
		if errors.Is(err, storage.ErrNotFound) {
			return false, nil
		}
		return false, err
	}
	if e.IsDir {
		if err := st.Delete(ctx, name+"/"+IndexFile); err != nil {
			return true, err
		}
		return true, st.DeletePrefix(ctx, name)
	}
	return true, st.Delete(ctx, name)
}

// ColToRowMajor reorders the items (of itemSize bytes) of the box lo..hi
// (inclusive) from col-major (Fortran) order to C order, as Write takes
// them.
func ColToRowMajor(data []byte, lo, hi []int64, itemSize int) []byte {
	is := itemSize
	nd := len(lo)
	ext := make([]int64, nd)
	for d := range lo {
		ext[d] = hi[d] - lo[d] + 1
	}
	out := make([]byte, len(data))
	n := len(data) / is
	x := make([]int64, nd)
	for k := 0; k < n; k++ {
		// k is the col-major index: x[0] varies fastest.
		var r int64
		for d := 0; d < nd; d++ {
			r = r*ext[d] + x[d]
		}
		copy(out[int(r)*is:(int(r)+1)*is], data[k*is:(k+1)*is])
		for d := 0; d < nd; d++ {
			x[d]++
			if x[d] < ext[d] {
				break
			}
			x[d] = 0
		}
	}
	return out
}
