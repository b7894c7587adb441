// Package tileio owns fetching and unfiltering the tiles of an opened
// array: it finds a field's data files in a fragment (by format version),
// reads exactly the byte ranges the fragment metadata gives, runs the
// field's filter pipeline in reverse, and charges the decoded bytes to a
// memory budget shared by every tile of a query. Both the dense and the
// sparse read paths load tiles through a Loader.
//
// The budget never makes a query wait on itself. Loads made ahead of need
// (prefetch) wait for room in the budget; a load the query cannot progress
// without (a merge cursor's tile, a tile of the chunk the consumer waits
// for) is granted at once, even beyond the budget. That overdraft is the
// query's inherent working set (one tile per fragment being merged, the
// tiles of one sorted slab), which the read paths measure up front with
// Charge and refuse with CheckWorkingSet when it exceeds the working-set
// limit, so memory stays bounded by the budget plus that limit.
package tileio

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/tileflight/tileflight/errkind"
	"github.com/tileflight/tileflight/filters"
	"github.com/tileflight/tileflight/format/datatype"
	"github.com/tileflight/tileflight/format/names"
	"github.com/tileflight/tileflight/format/pipeline"
	"github.com/tileflight/tileflight/format/schema"
	"github.com/tileflight/tileflight/format/wire"
	"github.com/tileflight/tileflight/internal/bufpool"
	"github.com/tileflight/tileflight/storage"
	"github.com/tileflight/tileflight/tdbarray"
)

// Special fields a fragment may hold besides the schema's dimensions and
// attributes (consolidated fragments with timestamps and delete metadata).
const (
	FieldTimestamps      = "__timestamps"
	FieldDeleteTimestamp = "__delete_timestamps"
	FieldDeleteCondition = "__delete_condition_index"
)

// DefaultMemoryBudget bounds the decoded bytes a query holds at once.
const DefaultMemoryBudget = 128 << 20

// minWorkingSetLimit is the smallest default working-set limit: tiny
// budgets (tests, constrained deployments) still read arrays whose merge
// or slab needs a few tiles at once.
const minWorkingSetLimit = 1 << 30

// Tile is one unfiltered tile of one field of one fragment. For var-sized
// fields Offsets holds Cells+1 little-endian uint64 offsets into Data (the
// last one is len(Data)): exactly Arrow's large offsets layout, so it can
// be wrapped without conversion. For nullable attributes Validity holds
// one byte per cell (1 = valid).
type Tile struct {
	Data     []byte
	Offsets  []byte
	Validity []byte
	Cells    uint64
	// Zstd, set only by LoadZstd, holds the tile's chunks still compressed
	// (Data is then nil): the frames alias the bytes read from storage.
	Zstd []filters.ZstdChunk

	charge int64
	loader *Loader
	once   sync.Once

	// own is the pooled buffer Data lies in (nil: Data is garbage
	// collected); recycle says the loader's reference to it is the
	// caller's to drop (LoadPooled), dropped says it was.
	own     *bufpool.Buf
	recycle bool
	dropped atomic.Bool
}

// Release returns the tile's memory to the budget. The tile's buffers may
// still be referenced by Arrow arrays built on them (they are garbage
// collected as usual); the budget only bounds what the loader keeps in
// flight. Release is idempotent.
func (t *Tile) Release() {
	if t == nil || t.loader == nil {
		return
	}
	t.once.Do(func() { t.loader.budget.release(t.charge) })
}

// Owner is the pooled buffer Data lies in, or nil when Data is garbage
// collected. An Arrow buffer wrapping Data retains it and frees it on
// release (arrowconv.NewColumnOwned), so that Data outlives Recycle for as
// long as such a buffer is in use.
func (t *Tile) Owner() *bufpool.Buf { return t.own }

// Recycle drops the reference to Data that LoadPooled gave the caller:
// once every holder of Owner has released it too, Data goes back to the
// free lists and is overwritten by a later load. The caller must not read
// Data (or Offsets, Validity) after Recycle except through what retained
// Owner. Idempotent; a no-op for tiles not loaded by LoadPooled.
func (t *Tile) Recycle() {
	if t == nil || t.own == nil || !t.recycle || !t.dropped.CompareAndSwap(false, true) {
		return
	}
	t.own.Release()
}

// Offset returns offset i of a var-sized tile (0 <= i <= Cells).
func (t *Tile) Offset(i int) uint64 { return binary.LittleEndian.Uint64(t.Offsets[8*i:]) }

// CellData returns the bytes of cell i (var-sized, or fixed of cellSize).
func (t *Tile) CellData(i int, cellSize int) []byte {
	if t.Offsets == nil {
		return t.Data[i*cellSize : (i+1)*cellSize]
	}
	return t.Data[t.Offset(i):t.Offset(i+1)]
}

// Options tune a Loader.
type Options struct {
	// MemoryBudget bounds the decoded bytes of tiles loaded ahead of need
	// and not yet released (default DefaultMemoryBudget). A single tile
	// larger than the budget is still loaded, alone.
	MemoryBudget int64
	// MaxWorkingSet bounds the decoded bytes a read may need at once to
	// make progress (default: 4 x MemoryBudget, at least 1 GiB); reads
	// needing more fail fast with errkind.ResourceExhausted.
	MaxWorkingSet int64
	// EncryptionKey decodes encrypted arrays.
	EncryptionKey []byte
	// Cache, when set, keeps decoded tiles across loaders (queries).
	Cache *Cache
	// Meter, when set, counts the tiles the loader holds.
	Meter *Meter
}

// Loader loads tiles of one opened array. It is safe for concurrent use.
type Loader struct {
	arr    *tdbarray.Array
	opt    Options
	budget *budget

	mu        sync.Mutex
	pipelines map[pipeKey]*filters.Pipeline
}

type pipeKey struct {
	schema  *schema.ArraySchema
	field   string
	role    int // 0 data, 1 offsets, 2 validity
	version uint32
}

// NewLoader returns a Loader for a.
func NewLoader(a *tdbarray.Array, opt Options) *Loader {
	if opt.MemoryBudget <= 0 {
		opt.MemoryBudget = DefaultMemoryBudget
	}
	if opt.MaxWorkingSet <= 0 {
		opt.MaxWorkingSet = max(minWorkingSetLimit, min(opt.MemoryBudget, 1<<61)*4)
	}
	return &Loader{arr: a, opt: opt, budget: &budget{size: opt.MemoryBudget, meter: opt.Meter}, pipelines: map[pipeKey]*filters.Pipeline{}}
}

// EncryptionKey is the key the loader decodes the array's tiles with
// (nil: none); the array's other generic tiles (delete commits) need it
// too.
func (l *Loader) EncryptionKey() []byte { return l.opt.EncryptionKey }

// fieldInfo is what loading needs to know about a field of a fragment.
type fieldInfo struct {
	name       string
	typ        datatype.Datatype
	cellValNum uint32
	nullable   bool
	dim        bool
	index      int // dimension or attribute index in the fragment's schema
	metaIndex  int // field index in the fragment metadata
	filters    pipeline.Pipeline
	file       string
	// zipped is set for a dimension of a fragment before format v5: the
	// field is then the whole __coords.tdb tile (cellValNum = dimension
	// count) and load keeps only this dimension's column of it.
	zipped *zippedCoords
}

func (f *fieldInfo) isVar() bool { return f.cellValNum == schema.VarNum }

func (l *Loader) field(frag *tdbarray.Fragment, name string) (*fieldInfo, error) {
	s := frag.Schema
	version := frag.Meta.Footer().Version
	footer := frag.Meta.Footer()
	nd, na := len(s.Dimensions), len(s.Attributes)
	special := func(k int, fname string) *fieldInfo {
		return &fieldInfo{name: name, typ: datatype.Uint64, cellValNum: 1, metaIndex: na + 1 + nd + k,
			filters: s.CoordsFilters, file: fname}
	}
	switch name {
	case FieldTimestamps:
		if !footer.HasTimestamps {
			return nil, fmt.Errorf("fragment has no timestamps")
		}
		return special(0, names.TimestampsFile), nil
	case FieldDeleteTimestamp, FieldDeleteCondition:
		if !footer.HasDeleteMeta {
			return nil, fmt.Errorf("fragment has no delete metadata")
		}
		k := 0
		if footer.HasTimestamps {
			k = 1
		}
		if name == FieldDeleteTimestamp {
			return special(k, names.DeleteTimestampsFile), nil
		}
		return special(k+1, names.DeleteConditionIndexFile), nil
	}
	if i := s.DimensionIndex(name); i >= 0 {
		if version < 5 {
			return legacyCoordsField(frag, i, name)
		}
		d := &s.Dimensions[i]
		return &fieldInfo{name: name, typ: d.Type, cellValNum: d.CellValNum, dim: true, index: i,
			metaIndex: frag.Layout.DimIndex(i), filters: s.DimensionFilters(i),
			file: names.DimFile(version, i, name, names.Fixed)}, nil
	}
	if i := s.AttributeIndex(name); i >= 0 {
		at := &s.Attributes[i]
		return &fieldInfo{name: name, typ: at.Type, cellValNum: at.CellValNum, nullable: at.Nullable, index: i,
			metaIndex: frag.Layout.AttrIndex(i), filters: at.Filters,
			file: names.AttrFile(version, i, name, names.Fixed)}, nil
	}
	return nil, errkind.Errorf(errkind.NotFound, "no field %q", name)
}

// HasField reports whether the fragment stores field name (schema
// evolution: an attribute added later is absent from older fragments).
func HasField(frag *tdbarray.Fragment, name string) bool {
	return frag.Schema.DimensionIndex(name) >= 0 || frag.Schema.AttributeIndex(name) >= 0
}

func (l *Loader) pipeline(frag *tdbarray.Fragment, f *fieldInfo, role int) (*filters.Pipeline, error) {
	version := frag.Meta.Footer().Version
	key := pipeKey{frag.Schema, f.name, role, version}
	l.mu.Lock()
	defer l.mu.Unlock()
	if p := l.pipelines[key]; p != nil {
		return p, nil
	}
	var (
		p   *filters.Pipeline
		err error
		fo  = filters.Options{EncryptionKey: l.opt.EncryptionKey}
	)
	switch role {
	case 0:
		p, err = filters.New(f.filters, f.typ, f.cellValNum, version, fo)
	case 1:
		fo.IsOffsets = true
		p, err = filters.New(frag.Schema.OffsetsFilters, datatype.Uint64, 1, version, fo)
	case 2:
		p, err = filters.New(frag.Schema.ValidityFilters, datatype.Uint8, 1, version, fo)
	}
	if err != nil {
		return nil, err
	}
	l.pipelines[key] = p
	return p, nil
}

// Load fetches and unfilters tile t of field name in frag, as a tile the
// caller needs now: it is charged to the budget without waiting for room.
// The caller must Release the tile.
func (l *Loader) Load(ctx context.Context, frag *tdbarray.Fragment, name string, t uint64) (*Tile, error) {
	return l.LoadWhen(ctx, frag, name, t, Now)
}

// Now is a need signal that has already fired.
var Now <-chan struct{} = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// LoadWhen is Load for a tile loaded ahead of need: it waits for room in
// the budget until need is closed (the caller now needs the tile: it is
// charged at once, overdrawing the budget) or ctx ends. A nil need never
// fires.
func (l *Loader) LoadWhen(ctx context.Context, frag *tdbarray.Fragment, name string, t uint64, need <-chan struct{}) (*Tile, error) {
	return l.loadWhen(ctx, frag, name, t, need, false)
}

// LoadPooled is LoadWhen for a reader that hands Data to Arrow arrays and
// can say when it is done with it: a fixed-size field's Data is then
// decoded into a buffer from the free lists (Tile.Owner), which returns to
// them once the caller has called Tile.Recycle and every Arrow buffer
// built on it has been released, instead of being left to the collector.
// Release (the budget) and Recycle (the memory) are independent.
func (l *Loader) LoadPooled(ctx context.Context, frag *tdbarray.Fragment, name string, t uint64, need <-chan struct{}) (*Tile, error) {
	return l.loadWhen(ctx, frag, name, t, need, true)
}

func (l *Loader) loadWhen(ctx context.Context, frag *tdbarray.Fragment, name string, t uint64, need <-chan struct{}, pooled bool) (*Tile, error) {
	return l.loadWhenHow(ctx, frag, name, t, need, loadHow{pooled: pooled})
}

// LoadZstd is LoadWhen for a reader that can send zstd frames on without
// decoding them: when the field is fixed-size, not nullable, and its tiles
// are filtered by zstd alone, the tile comes back with Zstd set and Data
// nil; any other tile (and one the cache holds decoded) comes back
// decoded, as LoadWhen returns it. The budget is charged the decoded size
// either way.
func (l *Loader) LoadZstd(ctx context.Context, frag *tdbarray.Fragment, name string, t uint64, need <-chan struct{}) (*Tile, error) {
	return l.loadWhenHow(ctx, frag, name, t, need, loadHow{zstd: true})
}

// loadHow says what a load returns beyond a whole decoded tile.
type loadHow struct {
	pooled bool       // LoadPooled
	rng    *byteRange // LoadRange
	zstd   bool       // LoadZstd
}

// ErrVacuumed is a read that found a fragment's files gone after the
// array was opened: a vacuum removed the fragment (a consolidation
// superseded it) while the read ran. Reads opened before a consolidation
// keep their fragments for the vacuum grace (-vacuum-grace); one that
// runs longer loses them. Reading again opens the consolidated fragment
// instead, so the kind is Unavailable: the same call succeeds later.
var ErrVacuumed error = errkind.New(errkind.Unavailable, errkind.Overrides,
	"the fragment was vacuumed during the read (it outlived -vacuum-grace after a consolidation); read again")

// tileError classifies err, a failure to size or load a tile of frag:
// DataLoss unless it already has a kind, and ErrVacuumed as well when a
// file was not found and the fragment's metadata file is gone too (the
// array was opened with it, and a vacuum removes it first). A data file
// missing beside its metadata is damage, and stays DataLoss alone.
func (l *Loader) tileError(ctx context.Context, frag *tdbarray.Fragment, err error) error {
	if errors.Is(err, storage.ErrNotFound) {
		if _, serr := l.arr.Store.Stat(ctx, frag.Key(l.arr, names.FragmentMetadataFile)); errors.Is(serr, storage.ErrNotFound) {
			err = fmt.Errorf("%w: %w", ErrVacuumed, err)
		}
	}
	if errkind.Of(err) == nil {
		err = errkind.Wrap(errkind.DataLoss, err)
	}
	return err
}

func (l *Loader) loadWhenHow(ctx context.Context, frag *tdbarray.Fragment, name string, t uint64, need <-chan struct{}, how loadHow) (*Tile, error) {
	tile, err := l.load(ctx, frag, name, t, need, how)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("fragment %s: field %q: tile %d: %w", frag.Name, name, t, l.tileError(ctx, frag, err))
	}
	return tile, nil
}

// Charge is what loading tile t of field name in frag charges the budget:
// its decoded bytes, from the fragment metadata.
func (l *Loader) Charge(frag *tdbarray.Fragment, name string, t uint64) (int64, error) {
	f, err := l.field(frag, name)
	if err != nil {
		return 0, fmt.Errorf("fragment %s: field %q: %w", frag.Name, name, err)
	}
	_, _, _, charge, err := l.sizes(frag, f, t)
	if err != nil {
		// Charge takes no context: the one Stat runs without a deadline.
		return 0, fmt.Errorf("fragment %s: field %q: tile %d: %w", frag.Name, name, t, l.tileError(context.Background(), frag, err))
	}
	return charge, nil
}

// MemoryBudget is the loader's budget for tiles loaded ahead of need.
func (l *Loader) MemoryBudget() int64 { return l.opt.MemoryBudget }

// Hold charges n bytes of result built from tiles (a dense read's chunk
// columns) to the read's budget: like a load, it waits for room until
// need is closed or ctx ends. Unhold gives them back.
func (l *Loader) Hold(ctx context.Context, n int64, need <-chan struct{}) error {
	return l.budget.acquire(ctx, n, need)
}

// Unhold gives back n bytes Hold charged.
func (l *Loader) Unhold(n int64) { l.budget.release(n) }

// MaxWorkingSet is the most decoded bytes a read may need at once.
func (l *Loader) MaxWorkingSet() int64 { return l.opt.MaxWorkingSet }

// CheckWorkingSet refuses a read whose progress needs more than
// MaxWorkingSet decoded bytes at once; what says what needs them (e.g.
// "merging 40 fragments"). The error tells the user what to change.
func (l *Loader) CheckWorkingSet(need int64, what string) error {
	if need <= l.opt.MaxWorkingSet {
		return nil
	}
	return errkind.Errorf(errkind.ResourceExhausted,
		"array %s: %s needs %d bytes of decoded tiles at once, more than the %d allowed with a memory budget of %d: raise -memory-budget, narrow the subarray, or consolidate the array's fragments",
		l.arr.Dir, what, need, l.opt.MaxWorkingSet, l.opt.MemoryBudget)
}

func (l *Loader) load(ctx context.Context, frag *tdbarray.Fragment, name string, t uint64, need <-chan struct{}, how loadHow) (*Tile, error) {
	pooled, rng := how.pooled, how.rng
	f, err := l.field(frag, name)
	if err != nil {
		return nil, err
	}
	if f.zipped != nil {
		// The coordinates tile is decoded whole and one column copied
		// out of it: no pooled buffer, no partial decode, no passthrough.
		pooled, rng, how.zstd = false, nil, false
	}
	// The decoded sizes come from the fragment metadata, and are charged
	// to the budget before anything is read, so that a load waiting for
	// room holds nothing.
	cells, fixedSize, varSize, charge, err := l.sizes(frag, f, t)
	if err != nil {
		return nil, err
	}
	if err := l.budget.acquire(ctx, charge, need); err != nil {
		return nil, err
	}
	tile := &Tile{charge: charge, loader: l, recycle: pooled}
	var key string
	if l.opt.Cache != nil {
		key = cacheKey(l.arr, frag, name, t, l.opt.EncryptionKey)
		if l.opt.Cache.get(key, tile) {
			return tile, nil
		}
	}
	ok := false
	defer func() {
		if !ok {
			tile.Release()
			tile.Recycle()
		}
	}()
	meta := frag.Meta
	// A pooled load reads a fixed-size field's persisted tile into a
	// pooled buffer when the store reads into the caller's memory; it goes
	// back to the free lists once decoded, or is the tile's pooled Data (no
	// filter). Other loads read into collected memory, as before: pooling
	// dense reads' compressed tiles, whose sizes vary, kept up to 16 MiB
	// idle in each of many size classes and raised the daemon's resident
	// memory after other queries by 30-40 MiB (a streamed 1 GiB scan after
	// five other bench cases: 311-320 MiB pooled, 289 not) for no
	// measurable speed (dense zstd DoGet 1.06x, 7 interleaved rounds).
	var fp *filters.Pipeline
	if !f.isVar() {
		if fp, err = l.pipeline(frag, f, 0); err != nil {
			return nil, err
		}
	}
	var read *bufpool.Buf
	defer func() {
		if read != nil {
			read.Release()
		}
	}()
	var fixed []byte
	if fp != nil && pooled {
		read, err = l.readTilePooled(ctx, frag, f.file, meta.TileOffset, meta.PersistedTileSize, f.metaIndex, t)
		if err != nil {
			return nil, err
		}
	}
	if read != nil {
		fixed = read.Bytes()
	} else {
		fixed, err = l.readTile(ctx, frag, f.file, meta.TileOffset, meta.PersistedTileSize, f.metaIndex, t)
		if err != nil {
			return nil, err
		}
	}
	var varBytes, validBytes []byte
	if f.isVar() {
		varBytes, err = l.readTile(ctx, frag, varFile(f), meta.TileVarOffset, meta.PersistedTileVarSize, f.metaIndex, t)
		if err != nil {
			return nil, err
		}
	}
	if f.nullable {
		validBytes, err = l.readTile(ctx, frag, validityFile(f), meta.TileValidityOffset, meta.PersistedTileValiditySize, f.metaIndex, t)
		if err != nil {
			return nil, err
		}
	}
	if how.zstd && !f.isVar() && !f.nullable {
		chunks, pass, err := fp.ZstdChunks(fixed, fixedSize)
		if err != nil {
			return nil, err
		}
		if pass {
			tile.Zstd, tile.Cells = chunks, cells
			ok = true
			return tile, nil
		}
	}
	partial := false // Data holds only the chunks LoadRange needs
	if f.isVar() {
		dataPipe, err := l.pipeline(frag, f, 0)
		if err != nil {
			return nil, err
		}
		offPipe, err := l.pipeline(frag, f, 1)
		if err != nil {
			return nil, err
		}
		offs, vals, err := dataPipe.UnfilterVarOwned(offPipe, fixed, varBytes, fixedSize, varSize)
		if err != nil {
			return nil, err
		}
		tile.Data, tile.Offsets, tile.Cells = vals, offs, cells
	} else {
		p := fp
		var data []byte
		// A tile the cache keeps is decoded whole (see LoadRange).
		partial = rng != nil && !pooled && !l.opt.Cache.keeps(charge) &&
			PartialMode(partialMode.Load()) != PartialOff
		switch {
		case partial:
			var a, b uint64
			var chunks, decoded int
			if data, a, b, chunks, decoded, err = p.UnfilterRange(fixed, fixedSize, rng.lo, rng.hi); err != nil {
				return nil, err
			}
			if decoded < chunks {
				partialTiles.Add(1)
				partialChunks.Add(int64(chunks))
				partialDecoded.Add(int64(decoded))
				if PartialMode(partialMode.Load()) == PartialPoison {
					poisonOutside(data, a, b)
				}
			} else {
				partial = false
			}
		case read != nil && p.Plain():
			// Data is the read buffer itself (pooled: the tile's).
			if data, err = p.UnfilterOwned(fixed, fixedSize); err != nil {
				return nil, err
			}
			tile.own, read = read, nil
		case pooled && !p.Plain() && p.FillsOut():
			tile.own = bufpool.New(int(fixedSize), int(fixedSize)+filters.DecodeSlack)
			if data, err = p.UnfilterInto(tile.own.Bytes(), fixed); err != nil {
				return nil, err
			}
		default:
			if data, err = p.UnfilterOwned(fixed, fixedSize); err != nil {
				return nil, err
			}
		}
		if f.zipped != nil {
			if data, err = f.zipped.column(data, cells); err != nil {
				return nil, err
			}
		}
		tile.Data, tile.Cells = data, cells
	}
	if f.nullable {
		p, err := l.pipeline(frag, f, 2)
		if err != nil {
			return nil, err
		}
		v, err := p.UnfilterOwned(validBytes, cells)
		if err != nil {
			return nil, fmt.Errorf("validity: %w", err)
		}
		tile.Validity = v
	}
	ok = true
	if l.opt.Cache != nil && !partial {
		l.opt.Cache.put(key, tile)
	}
	return tile, nil
}

func varFile(f *fieldInfo) string {
	if f.file == "" {
		return ""
	}
	return f.file[:len(f.file)-len(names.FileSuffix)] + "_var" + names.FileSuffix
}

func validityFile(f *fieldInfo) string {
	return f.file[:len(f.file)-len(names.FileSuffix)] + "_validity" + names.FileSuffix
}

func (l *Loader) readTile(ctx context.Context, frag *tdbarray.Fragment, file string,
	offset, size func(int, uint64) (uint64, error), field int, t uint64) ([]byte, error) {
	off, n, err := tileRange(file, offset, size, field, t)
	if err != nil {
		return nil, err
	}
	b, err := l.arr.Store.GetRange(ctx, frag.Key(l.arr, file), off, n)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	return b, nil
}

// maxPooledRead bounds a persisted tile read into a pooled buffer: the
// buffer is allocated before the store checks the range against the
// object's size, so a forged size in the metadata may cost this much at
// most. Larger tiles are read by GetRange, which checks first.
const maxPooledRead = 64 << 20

// readTilePooled is readTile into a pooled buffer, which the caller
// releases; it returns nil (and no error) when the store cannot read into
// the caller's memory (storage.RangeReader) or the tile is larger than
// maxPooledRead: read it with readTile then.
func (l *Loader) readTilePooled(ctx context.Context, frag *tdbarray.Fragment, file string,
	offset, size func(int, uint64) (uint64, error), field int, t uint64) (*bufpool.Buf, error) {
	if _, ok := l.arr.Store.(storage.RangeReader); !ok {
		return nil, nil
	}
	off, n, err := tileRange(file, offset, size, field, t)
	if err != nil || n > maxPooledRead {
		return nil, err
	}
	b := bufpool.New(int(n), 0)
	if err := storage.ReadRange(ctx, l.arr.Store, frag.Key(l.arr, file), off, b.Bytes()); err != nil {
		b.Release()
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	return b, nil
}

// tileRange is where tile t of a field's file lies, from the fragment
// metadata.
func tileRange(file string, offset, size func(int, uint64) (uint64, error), field int, t uint64) (off, n int64, err error) {
	o, err := offset(field, t)
	if err != nil {
		return 0, 0, err
	}
	s, err := size(field, t)
	if err != nil {
		return 0, 0, err
	}
	if s > 1<<40 || o > 1<<62 {
		return 0, 0, fmt.Errorf("%w: %s: tile at %d of size %d", wire.ErrCorrupt, file, o, s)
	}
	return int64(o), int64(s), nil
}

// sizes returns the decoded sizes of tile t of f from the fragment
// metadata, and the budget charge they add up to.
func (l *Loader) sizes(frag *tdbarray.Fragment, f *fieldInfo, t uint64) (cells, fixedSize, varSize uint64, charge int64, err error) {
	meta := frag.Meta
	cells, err = meta.TileCellNum(t)
	if err != nil {
		return 0, 0, 0, 0, err
	}
	if cells > 1<<40 {
		return 0, 0, 0, 0, fmt.Errorf("%w: tile of %d cells", wire.ErrCorrupt, cells)
	}
	if f.isVar() {
		fixedSize = 8 * (cells + 1)
		if varSize, err = meta.TileVarSize(f.metaIndex, t); err != nil {
			return 0, 0, 0, 0, err
		}
		if varSize > 1<<40 {
			return 0, 0, 0, 0, fmt.Errorf("%w: var tile of %d bytes", wire.ErrCorrupt, varSize)
		}
	} else {
		per := uint64(f.typ.Size()) * uint64(f.cellValNum)
		if per != 0 && cells > (1<<44)/per {
			return 0, 0, 0, 0, fmt.Errorf("%w: tile of %d cells of %d bytes", wire.ErrCorrupt, cells, per)
		}
		fixedSize = cells * per
	}
	charge = int64(fixedSize + varSize)
	if f.nullable {
		charge += int64(cells)
	}
	return cells, fixedSize, varSize, charge, nil
}

// budget counts decoded bytes held. Requests made ahead of need queue in
// arrival order and are granted while they fit (one larger than the whole
// budget when nothing else is held); a request whose need fires is
// granted at once, whatever is held.
type budget struct {
	size  int64
	meter *Meter // nil: not metered

	mu      sync.Mutex
	used    int64
	waiters []*waiter
}

type waiter struct {
	n     int64
	ready chan struct{} // closed when granted
}

func newBudget(size int64) *budget { return &budget{size: size} }

// inUse sums what every query's budget has granted, for the daemon's
// memory metric; each budget adds and subtracts exactly what it counts.
var inUse atomic.Int64

// BudgetInUse returns the decoded bytes that all running queries hold
// under their memory budgets.
func BudgetInUse() int64 { return inUse.Load() }

// fits reports whether n can be granted now to a request ahead of need.
func (b *budget) fits(n int64) bool {
	return b.used+n <= b.size || b.used == 0
}

func (b *budget) acquire(ctx context.Context, n int64, need <-chan struct{}) error {
	if n < 0 {
		n = 0
	}
	b.mu.Lock()
	if len(b.waiters) == 0 && b.fits(n) {
		b.used += n
		inUse.Add(n)
		b.meter.add(n)
		b.mu.Unlock()
		return nil
	}
	select {
	case <-need:
		b.used += n
		inUse.Add(n)
		b.meter.add(n)
		b.mu.Unlock()
		return nil
	default:
	}
	w := &waiter{n: n, ready: make(chan struct{})}
	b.waiters = append(b.waiters, w)
	b.mu.Unlock()
	select {
	case <-w.ready:
		return nil
	case <-need:
		if b.dequeue(w) {
			b.mu.Lock()
			b.used += n
			inUse.Add(n)
			b.meter.add(n)
			b.mu.Unlock()
		}
		return nil
	case <-ctx.Done():
		if !b.dequeue(w) {
			b.release(n) // granted meanwhile
		}
		return ctx.Err()
	}
}

// dequeue removes a waiter not yet granted; false means it was granted.
func (b *budget) dequeue(w *waiter) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	for i, x := range b.waiters {
		if x == w {
			b.waiters = append(b.waiters[:i], b.waiters[i+1:]...)
			b.grantLocked() // a large request at the head may have blocked smaller ones
			return true
		}
	}
	return false
}

func (b *budget) release(n int64) {
	if n < 0 {
		n = 0
	}
	b.mu.Lock()
	b.used -= n
	inUse.Add(-n)
	b.meter.add(-n)
	b.grantLocked()
	b.mu.Unlock()
}

func (b *budget) grantLocked() {
	for len(b.waiters) > 0 && b.fits(b.waiters[0].n) {
		w := b.waiters[0]
		b.waiters = b.waiters[1:]
		b.used += w.n
		inUse.Add(w.n)
		b.meter.add(w.n)
		close(w.ready)
	}
}

// queued is the number of requests waiting (for tests).
func (b *budget) queued() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.waiters)
}

// held is the number of bytes currently charged (for tests).
func (b *budget) held() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used
}
