package b2nd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime/debug"
	"sort"
	"sync"

	"github.com/tileflight/tileflight/b2nd/chunk"
	"github.com/tileflight/tileflight/b2nd/frame"
	"github.com/tileflight/tileflight/errkind"
	"github.com/tileflight/tileflight/storage"
)

// IndexFile is the name of a sparse frame's index file.
const IndexFile = "chunks.b2frame"

// headerProbe is how much of a cframe is read first: the header of every
// array python-blosc2 writes fits.
const headerProbe = 4096

// Array is an opened Blosc2 NDArray.
type Array struct {
	Store  storage.Store
	Name   string
	Sparse bool
	Header *frame.Header
	Meta   *Meta
	Dtype  *Dtype
	// Offsets is the chunk index (cframe: byte offsets after the header;
	// sframe: chunk file numbers; or special values).
	Offsets []frame.Offset
	// VLMeta are the variable-length metalayers, contents still chunks.
	VLMeta []frame.Meta
	// Size is the cframe's object size (the index file's for an sframe).
	Size int64
	// IndexBytes is the whole index file of an sframe.
	Geometry
	// chunkEnd[i] bounds the bytes of stored chunk i in a cframe.
	chunkEnd []int64
}

// Geometry is the layout of an array's items in chunks and blocks.
type Geometry struct {
	Shape, ChunkShape, BlockShape []int64
	// ChunksPer is the number of chunks along each dimension; BlocksPer
	// the number of blocks of a chunk along each dimension (the chunk
	// padded to a multiple of the block shape).
	ChunksPer, BlocksPer []int64
	ItemSize             int
	// BlockItems and ChunkItems count the items of a block and of a
	// padded chunk.
	BlockItems, ChunkItems int64
	NChunks                int64
}

// NewGeometry derives the chunk and block layout.
func NewGeometry(shape, chunks, blocks []int64, itemsize int) (Geometry, error) {
	g := Geometry{Shape: shape, ChunkShape: chunks, BlockShape: blocks, ItemSize: itemsize, BlockItems: 1, ChunkItems: 1, NChunks: 1}
	for i := range shape {
		if chunks[i] <= 0 || blocks[i] <= 0 {
			g.ChunksPer = append(g.ChunksPer, 0)
			g.BlocksPer = append(g.BlocksPer, 0)
			g.NChunks = 0
			continue
		}
		cp := (shape[i] + chunks[i] - 1) / chunks[i]
		bp := (chunks[i] + blocks[i] - 1) / blocks[i]
		g.ChunksPer = append(g.ChunksPer, cp)
		g.BlocksPer = append(g.BlocksPer, bp)
		g.BlockItems *= blocks[i]
		g.ChunkItems *= bp * blocks[i]
		g.NChunks *= cp
		if g.ChunkItems*int64(itemsize) > chunk.MaxBlockSize*4 || g.NChunks > 1<<40 {
			return g, errkind.Errorf(errkind.DataLoss, "b2nd: chunks of %d items or %d chunks are too many", g.ChunkItems, g.NChunks)
		}
	}
	return g, nil
}

// ChunkNBytes is the decoded size of every chunk.
func (g *Geometry) ChunkNBytes() int { return int(g.ChunkItems) * g.ItemSize }

// BlockNBytes is the decoded size of a block.
func (g *Geometry) BlockNBytes() int { return int(g.BlockItems) * g.ItemSize }

// ChunkIndex is the C-order number of the chunk with coordinates cc.
func (g *Geometry) ChunkIndex(cc []int64) int64 {
	var n int64
	for i, c := range cc {
		n = n*g.ChunksPer[i] + c
	}
	return n
}

func dataLoss(name string, err error) error {
	if errkind.Of(err) != nil {
		return fmt.Errorf("array %s: %w", name, err)
	}
	if errors.Is(err, io.ErrUnexpectedEOF) {
		return errkind.Errorf(errkind.DataLoss, "array %s: truncated: %v", name, err)
	}
	return fmt.Errorf("array %s: %w", name, err)
}

// Open opens the .b2nd array name: a file (cframe) or a directory holding
// chunks.b2frame (sframe).
func Open(ctx context.Context, st storage.Store, name string) (*Array, error) {
	e, err := st.Stat(ctx, name)
	if err != nil {
		if errors.Is(err, storage.ErrNotFound) {
			return nil, errkind.Errorf(errkind.NotFound, "no such array %q", name)
		}
		return nil, err
	}
	a := &Array{Store: st, Name: name, Sparse: e.IsDir}
	key := name
	if a.Sparse {
		key = name + "/" + IndexFile
		ie, err := st.Stat(ctx, key)
		if err != nil {
			if errors.Is(err, storage.ErrNotFound) {
				return nil, errkind.Errorf(errkind.DataLoss, "array %s: the sparse frame has no %s", name, IndexFile)
			}
			return nil, err
		}
		e = ie
	}
	a.Size = e.Size
	if err := a.load(ctx, key); err != nil {
		return nil, dataLoss(name, err)
	}
	return a, nil
}

func (a *Array) load(ctx context.Context, key string) error {
	if a.Size < frame.MinHeaderLen+frame.TrailerTailLen {
		return errkind.Errorf(errkind.DataLoss, "frame of %d bytes is truncated", a.Size)
	}
	head, err := a.Store.GetRange(ctx, key, 0, min(a.Size, headerProbe))
	if err != nil {
		return err
	}
	hl, err := frame.PeekHeaderLen(head)
	if err != nil {
		return err
	}
	if int64(hl) > a.Size {
		return errkind.Errorf(errkind.DataLoss, "header of %d bytes in a frame of %d", hl, a.Size)
	}
	if hl > len(head) {
		if head, err = a.Store.GetRange(ctx, key, 0, int64(hl)); err != nil {
			return err
		}
	}
	h, err := frame.ParseHeader(head)
	if err != nil {
		return err
	}
	a.Header = h
	if h.FrameLen != a.Size {
		return errkind.Errorf(errkind.DataLoss, "frame says %d bytes, the object holds %d (truncated or extended)", h.FrameLen, a.Size)
	}
	if (h.Type == frame.Sparse) != a.Sparse {
		return errkind.Errorf(errkind.DataLoss, "frame type %d does not match its storage (directory: %v)", h.Type, a.Sparse)
	}
	mb, ok := h.Meta("b2nd")
	if !ok {
		return errkind.Errorf(errkind.Unimplemented, "a Blosc2 frame without the b2nd metalayer (a plain super-chunk) is not an NDArray")
	}
	if a.Meta, err = ParseMeta(mb); err != nil {
		return err
	}
	if a.Dtype, err = ParseDtype(a.Meta.Dtype); err != nil {
		return err
	}
	if a.Dtype.ItemSize != h.Typesize && !(h.Typesize == 1 && a.Dtype.ItemSize > 255) {
		return errkind.Errorf(errkind.DataLoss, "dtype %s has %d bytes, the frame's typesize is %d", a.Meta.Dtype, a.Dtype.ItemSize, h.Typesize)
	}
	if a.Geometry, err = NewGeometry(a.Meta.Shape, a.Meta.ChunkShape, a.Meta.BlockShape, a.Dtype.ItemSize); err != nil {
		return err
	}
	// Trailer.
	tail, err := a.Store.GetRange(ctx, key, a.Size-frame.TrailerTailLen, frame.TrailerTailLen)
	if err != nil {
		return err
	}
	tl, err := frame.TrailerLen(tail)
	if err != nil {
		return err
	}
	tstart := a.Size - int64(tl)
	if tstart < int64(hl) {
		return errkind.Errorf(errkind.DataLoss, "trailer of %d bytes overlaps the header", tl)
	}
	tb, err := a.Store.GetRange(ctx, key, tstart, int64(tl))
	if err != nil {
		return err
	}
	if a.VLMeta, err = frame.ParseTrailer(tb); err != nil {
		return err
	}
	// Offsets index.
	if a.NChunks == 0 || h.NBytes == 0 {
		return nil
	}
	offPos := int64(hl)
	if !a.Sparse {
		offPos += h.CBytes
	}
	if offPos+chunk.ExtendedHeaderLen > tstart {
		return errkind.Errorf(errkind.DataLoss, "the offsets index at %d is outside the frame (trailer at %d)", offPos, tstart)
	}
	ob, err := a.Store.GetRange(ctx, key, offPos, tstart-offPos)
	if err != nil {
		return err
	}
	offs, err := frame.ParseOffsets(ob, a.NChunks)
	if err != nil {
		return err
	}
	if int64(len(offs)) != a.NChunks {
		return errkind.Errorf(errkind.DataLoss, "the offsets index holds %d chunks, the shape needs %d", len(offs), a.NChunks)
	}
	a.Offsets = offs
	if !a.Sparse {
		// Each stored chunk ends at the next stored chunk's start (or at
		// the index), so one ranged read fetches it.
		var starts []int64
		for _, o := range offs {
			if o.Special() == 0 {
				if o < 0 || int64(o) >= h.CBytes {
					return errkind.Errorf(errkind.DataLoss, "a chunk offset %d is outside the %d chunk bytes", int64(o), h.CBytes)
				}
				starts = append(starts, int64(o))
			}
		}
		sort.Slice(starts, func(i, j int) bool { return starts[i] < starts[j] })
		a.chunkEnd = make([]int64, len(offs))
		for i, o := range offs {
			if o.Special() != 0 {
				continue
			}
			k := sort.Search(len(starts), func(k int) bool { return starts[k] > int64(o) })
			end := h.CBytes
			if k < len(starts) {
				end = starts[k]
			}
			a.chunkEnd[i] = end
		}
	}
	return nil
}

// ChunkKey is the object holding chunk file number n of an sframe.
func ChunkKey(name string, n int64) string { return fmt.Sprintf("%s/%08X.chunk", name, n) }

// ChunkErr names chunk n in err.
func (a *Array) ChunkErr(n int64, err error) error {
	if errkind.Of(err) == nil && errors.Is(err, io.ErrUnexpectedEOF) {
		err = errkind.Errorf(errkind.DataLoss, "truncated: %v", err)
	}
	if errors.Is(err, storage.ErrNotFound) {
		err = errkind.Errorf(errkind.DataLoss, "missing: %v", err)
	}
	return fmt.Errorf("array %s: chunk %d: %w", a.Name, n, err)
}

// ReadChunk reads chunk n (C order) and parses it; special chunks of the
// index come back as special chunks without any read.
func (a *Array) ReadChunk(ctx context.Context, n int64) (*chunk.Chunk, error) {
	if n < 0 || n >= int64(len(a.Offsets)) {
		return nil, fmt.Errorf("array %s: chunk %d of %d", a.Name, n, len(a.Offsets))
	}
	o := a.Offsets[n]
	p := a.Header.Params()
	p.Typesize = min(a.ItemSize, 255)
	if k := o.Special(); k != 0 {
		if k != chunk.SpecialZero && k != chunk.SpecialNaN && k != chunk.SpecialUninit {
			return nil, a.ChunkErr(n, errkind.Errorf(errkind.DataLoss, "unknown special kind %d in the index", k))
		}
		return chunk.Parse(chunk.Special(p, k, a.ChunkNBytes()), a.ChunkNBytes())
	}
	var b []byte
	var err error
	if a.Sparse {
		b, err = a.Store.Get(ctx, ChunkKey(a.Name, int64(o)))
	} else {
		pos := int64(a.Header.HeaderLen) + int64(o)
		b, err = a.Store.GetRange(ctx, a.Name, pos, a.chunkEnd[n]-int64(o))
	}
	if err != nil {
		return nil, a.ChunkErr(n, err)
	}
	c, err := chunk.Parse(b, a.ChunkNBytes())
	if err != nil {
		return nil, a.ChunkErr(n, err)
	}
	if err := c.Validate(); err != nil {
		return nil, a.ChunkErr(n, err)
	}
	return c, nil
}

// ReadChunkHead reads the head of chunk n (header, block starts,
// dictionary: see chunk.ParseHead) when the chunk lies in a contiguous
// frame, so that the caller then reads only the blocks it needs with
// ReadChunkBytes; an sframe chunk (one object each) and special chunks are
// read whole, as ReadChunk does.
func (a *Array) ReadChunkHead(ctx context.Context, n int64) (*chunk.Chunk, error) {
	if a.Sparse || n < 0 || n >= int64(len(a.Offsets)) || a.Offsets[n].Special() != 0 {
		return a.ReadChunk(ctx, n)
	}
	return a.chunkHead(n, func(pos, size int64) ([]byte, error) { return a.Store.GetRange(ctx, a.Name, pos, size) })
}

// ChunkHeadMapped is ReadChunkHead for a read holding data, the frame's
// file as MapFrame mapped it: the head's bytes are copied from the mapping
// instead of read from the store (no open and read of the file per chunk,
// which were 1 % of a whole 256 MiB read's CPU and more of a small box's).
// A file truncated under the mapping is DataLoss, as with the store.
func (a *Array) ChunkHeadMapped(ctx context.Context, n int64, data []byte) (*chunk.Chunk, error) {
	if a.Sparse || n < 0 || n >= int64(len(a.Offsets)) || a.Offsets[n].Special() != 0 {
		return a.ReadChunk(ctx, n)
	}
	return a.chunkHead(n, func(pos, size int64) ([]byte, error) {
		if pos < 0 || size < 0 || pos+size > int64(len(data)) {
			return nil, errkind.Errorf(errkind.DataLoss, "truncated: bytes [%d, %d) of a mapped file of %d", pos, pos+size, len(data))
		}
		b := make([]byte, size)
		return b, copyMapped(b, data[pos:pos+size])
	})
}

// copyMapped copies src, bytes of a mapped file, to dst; the fault of a
// page the file no longer has (another program truncated it) is DataLoss,
// not a crash.
func copyMapped(dst, src []byte) (err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			if _, fault := r.(interface{ Addr() uintptr }); !fault {
				panic(r)
			}
			err = errkind.Errorf(errkind.DataLoss, "the file changed while it was read (%v)", r)
		}
	}()
	copy(dst, src)
	return nil
}

// chunkHead reads the head of stored chunk n (not special) with get
// (bytes [pos, pos+size) of the frame's file), asking for more bytes when
// the head needs them.
func (a *Array) chunkHead(n int64, get func(pos, size int64) ([]byte, error)) (*chunk.Chunk, error) {
	o := int64(a.Offsets[n])
	pos := int64(a.Header.HeaderLen) + o
	stored := a.chunkEnd[n] - o
	want := int64(chunk.HeadLen(a.ChunkNBytes(), a.BlockNBytes()))
	var c *chunk.Chunk
	for try := 0; ; try++ {
		b, err := get(pos, min(want, stored))
		if err != nil {
			return nil, a.ChunkErr(n, err)
		}
		var need int
		c, need, err = chunk.ParseHead(b, a.ChunkNBytes())
		if err != nil {
			return nil, a.ChunkErr(n, err)
		}
		if c != nil {
			break
		}
		if int64(need) <= int64(len(b)) || int64(need) > stored || try == 3 {
			return nil, a.ChunkErr(n, errkind.Errorf(errkind.DataLoss, "truncated: its head needs %d bytes, %d stored", need, stored))
		}
		want = int64(need)
	}
	if int64(c.CBytes) > stored {
		c.Close()
		return nil, a.ChunkErr(n, errkind.Errorf(errkind.DataLoss, "truncated: cbytes %d but %d bytes stored", c.CBytes, stored))
	}
	if err := c.Validate(); err != nil {
		c.Close()
		return nil, a.ChunkErr(n, err)
	}
	return c, nil
}

// MapFrame maps a contiguous frame's file into memory when its store can
// (storage.Mapper); ok is false otherwise (read with ReadChunkBytes then).
// Mappings are shared and kept across reads (see mapCache), keyed by the
// file's identity (storage.Mapper.MapID: device, inode, size, time), and
// used only when the file still has the size the array was opened with:
// release hands it back. Reads of a mapping fault if another program truncates
// the file meanwhile: the reader turns that into an error.
func (a *Array) MapFrame(ctx context.Context) (data []byte, release func(), ok bool) {
	m, isMapper := a.Store.(storage.Mapper)
	if a.Sparse || !isMapper {
		return nil, nil, false
	}
	return frameMaps.get(ctx, m, a)
}

// frameMaps caches the mappings of contiguous frames: a mapping made for
// one read serves the next ones without mapping (and faulting in) the
// file's pages again.
var frameMaps = &mapCache{max: 16}

type mapKey struct {
	st   storage.Mapper
	name string
	id   string // storage.Mapper.MapID
}

type mapEntry struct {
	data    []byte
	unmap   func() error
	refs    int
	used    uint64
	evicted bool
}

// mapCache holds at most max mappings; the least recently used one is
// dropped for a new one, and unmapped once no read holds it.
type mapCache struct {
	mu    sync.Mutex
	max   int
	clock uint64
	m     map[mapKey]*mapEntry
}

func (c *mapCache) get(ctx context.Context, st storage.Mapper, a *Array) ([]byte, func(), bool) {
	id, err := st.MapID(ctx, a.Name)
	if err != nil {
		return nil, nil, false
	}
	k := mapKey{st, a.Name, id}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[mapKey]*mapEntry{}
	}
	e := c.m[k]
	if e == nil {
		data, unmap, err := st.Map(ctx, a.Name)
		if err != nil {
			return nil, nil, false
		}
		e = &mapEntry{data: data, unmap: unmap}
		c.m[k] = e
		// Drop the least recently used mappings beyond max; a new
		// version of a file (another size or time) replaces its old one.
		for len(c.m) > c.max || c.stale(k) {
			var old mapKey
			var oe *mapEntry
			for ok, ov := range c.m {
				if ok == k {
					continue
				}
				if ok.st == k.st && ok.name == k.name {
					old, oe = ok, ov
					break
				}
				if oe == nil || ov.used < oe.used {
					old, oe = ok, ov
				}
			}
			if oe == nil {
				break
			}
			delete(c.m, old)
			oe.evicted = true
			if oe.refs == 0 {
				oe.unmap()
			}
		}
	}
	if int64(len(e.data)) != a.Size {
		return nil, nil, false // the file changed since the array was opened
	}
	c.clock++
	e.used = c.clock
	e.refs++
	return e.data, func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		e.refs--
		if e.refs == 0 && e.evicted {
			e.unmap()
		}
	}, true
}

// stale tells whether another mapping of k's file (an older version) is
// cached.
func (c *mapCache) stale(k mapKey) bool {
	for ok := range c.m {
		if ok != k && ok.st == k.st && ok.name == k.name {
			return true
		}
	}
	return false
}

// ChunkPos is where stored chunk n of a contiguous frame starts in its
// file, and how many bytes it may hold.
func (a *Array) ChunkPos(n int64) (pos, size int64) {
	o := int64(a.Offsets[n])
	return int64(a.Header.HeaderLen) + o, a.chunkEnd[n] - o
}

// ReadChunkBytes reads the bytes [off, end) of chunk n (a range
// BlockRange names in the chunk ReadChunkHead returned) into dst, which
// must hold end-off bytes.
func (a *Array) ReadChunkBytes(ctx context.Context, n int64, off, end int, dst []byte) error {
	if off < 0 || end < off || len(dst) != end-off || n < 0 || n >= int64(len(a.Offsets)) || a.Sparse || a.Offsets[n].Special() != 0 {
		return a.ChunkErr(n, fmt.Errorf("no stored bytes [%d, %d)", off, end))
	}
	o := int64(a.Offsets[n])
	if int64(end) > a.chunkEnd[n]-o {
		return a.ChunkErr(n, errkind.Errorf(errkind.DataLoss, "truncated: bytes up to %d of a chunk of %d", end, a.chunkEnd[n]-o))
	}
	if err := storage.ReadRange(ctx, a.Store, a.Name, int64(a.Header.HeaderLen)+o+int64(off), dst); err != nil {
		return a.ChunkErr(n, err)
	}
	return nil
}

// VLMetaValues decodes every vlmetalayer to its raw (msgpack) bytes.
func (a *Array) VLMetaValues() (map[string][]byte, error) {
	out := map[string][]byte{}
	for _, m := range a.VLMeta {
		v, err := frame.VLMeta(m.Content)
		if err != nil {
			return nil, fmt.Errorf("array %s: vlmeta %q: %w", a.Name, m.Name, err)
		}
		out[m.Name] = v
	}
	return out, nil
}
