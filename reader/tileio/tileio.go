// Package tileio owns fetching and unfiltering the tiles of an opened
// array: it finds a field's data files in a fragment (by format version),
// reads exactly the byte ranges the fragment metadata gives, runs the
// field's filter pipeline in reverse, and charges the decoded bytes to a
// memory budget shared by every tile of a query, so that a query never
// holds more decoded data than it was allowed. Both the dense and the
// sparse read paths load tiles through a Loader.
package tileio

import (
	"context"
	"encoding/binary"
	"fmt"
	"sync"

	"golang.org/x/sync/semaphore"

	"github.com/tileflight/tileflight/array"
	"github.com/tileflight/tileflight/errkind"
	"github.com/tileflight/tileflight/filters"
	"github.com/tileflight/tileflight/format/datatype"
	"github.com/tileflight/tileflight/format/names"
	"github.com/tileflight/tileflight/format/pipeline"
	"github.com/tileflight/tileflight/format/schema"
	"github.com/tileflight/tileflight/format/wire"
)

// Special fields a fragment may hold besides the schema's dimensions and
// attributes (consolidated fragments with timestamps and delete metadata).
const (
	FieldTimestamps      = "__timestamps"
	FieldDeleteTimestamp = "__delete_timestamps"
	FieldDeleteCondition = "__delete_condition_index"
)

// DefaultMemoryBudget bounds the decoded bytes a query holds at once.
const DefaultMemoryBudget = 512 << 20

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

	charge int64
	loader *Loader
	once   sync.Once
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
	// MemoryBudget bounds the decoded bytes of tiles loaded and not yet
	// released (default DefaultMemoryBudget). A single tile larger than
	// the budget is still loaded, alone.
	MemoryBudget int64
	// EncryptionKey decodes encrypted arrays.
	EncryptionKey []byte
}

// Loader loads tiles of one opened array. It is safe for concurrent use.
type Loader struct {
	arr    *array.Array
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
func NewLoader(a *array.Array, opt Options) *Loader {
	if opt.MemoryBudget <= 0 {
		opt.MemoryBudget = DefaultMemoryBudget
	}
	return &Loader{arr: a, opt: opt, budget: newBudget(opt.MemoryBudget), pipelines: map[pipeKey]*filters.Pipeline{}}
}

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
}

func (f *fieldInfo) isVar() bool { return f.cellValNum == schema.VarNum }

func (l *Loader) field(frag *array.Fragment, name string) (*fieldInfo, error) {
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
			return nil, errkind.Errorf(errkind.Unimplemented, "reading coordinates of format version %d fragments (zipped __coords.tdb) is not supported", version)
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
func HasField(frag *array.Fragment, name string) bool {
	return frag.Schema.DimensionIndex(name) >= 0 || frag.Schema.AttributeIndex(name) >= 0
}

func (l *Loader) pipeline(frag *array.Fragment, f *fieldInfo, role int) (*filters.Pipeline, error) {
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
		fo  = filters.Options{EncryptionKey: l.opt.EncryptionKey, Concurrency: 1}
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

// Load fetches and unfilters tile t of field name in frag. It blocks until
// the decoded size fits in the memory budget or ctx ends. The caller must
// Release the tile.
func (l *Loader) Load(ctx context.Context, frag *array.Fragment, name string, t uint64) (*Tile, error) {
	tile, err := l.load(ctx, frag, name, t)
	if err != nil {
		if errkind.Of(err) == nil {
			err = errkind.Wrap(errkind.DataLoss, err)
		}
		return nil, fmt.Errorf("fragment %s: field %q: tile %d: %w", frag.Name, name, t, err)
	}
	return tile, nil
}

func (l *Loader) load(ctx context.Context, frag *array.Fragment, name string, t uint64) (*Tile, error) {
	f, err := l.field(frag, name)
	if err != nil {
		return nil, err
	}
	meta := frag.Meta
	fixed, err := l.readTile(ctx, frag, f.file, meta.TileOffset, meta.PersistedTileSize, f.metaIndex, t)
	if err != nil {
		return nil, err
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
	// The decoded sizes come from the fragment metadata, and are charged
	// to the budget before anything is decoded.
	cells, err := meta.TileCellNum(t)
	if err != nil {
		return nil, err
	}
	if cells > 1<<40 {
		return nil, fmt.Errorf("%w: tile of %d cells", wire.ErrCorrupt, cells)
	}
	var fixedSize, varSize uint64
	if f.isVar() {
		fixedSize = 8 * (cells + 1)
		if varSize, err = meta.TileVarSize(f.metaIndex, t); err != nil {
			return nil, err
		}
		if varSize > 1<<40 {
			return nil, fmt.Errorf("%w: var tile of %d bytes", wire.ErrCorrupt, varSize)
		}
	} else {
		fixedSize = cells * uint64(f.typ.Size()) * uint64(f.cellValNum)
	}
	charge := int64(fixedSize + varSize)
	if f.nullable {
		charge += int64(cells)
	}
	if err := l.budget.acquire(ctx, charge); err != nil {
		return nil, err
	}
	tile := &Tile{charge: charge, loader: l}
	ok := false
	defer func() {
		if !ok {
			tile.Release()
		}
	}()
	if f.isVar() {
		dataPipe, err := l.pipeline(frag, f, 0)
		if err != nil {
			return nil, err
		}
		offPipe, err := l.pipeline(frag, f, 1)
		if err != nil {
			return nil, err
		}
		offs, vals, err := dataPipe.UnfilterVarTile(offPipe, fixed, varBytes, make([]byte, fixedSize), make([]byte, varSize))
		if err != nil {
			return nil, err
		}
		tile.Data, tile.Offsets, tile.Cells = vals, offs, cells
	} else {
		p, err := l.pipeline(frag, f, 0)
		if err != nil {
			return nil, err
		}
		data, err := p.UnfilterTile(make([]byte, fixedSize), fixed)
		if err != nil {
			return nil, err
		}
		tile.Data, tile.Cells = data, cells
	}
	if f.nullable {
		p, err := l.pipeline(frag, f, 2)
		if err != nil {
			return nil, err
		}
		v, err := p.UnfilterTile(make([]byte, cells), validBytes)
		if err != nil {
			return nil, fmt.Errorf("validity: %w", err)
		}
		tile.Validity = v
	}
	ok = true
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

func (l *Loader) readTile(ctx context.Context, frag *array.Fragment, file string,
	offset, size func(int, uint64) (uint64, error), field int, t uint64) ([]byte, error) {
	off, err := offset(field, t)
	if err != nil {
		return nil, err
	}
	n, err := size(field, t)
	if err != nil {
		return nil, err
	}
	if n > 1<<40 {
		return nil, fmt.Errorf("%w: %s: tile size %d", wire.ErrCorrupt, file, n)
	}
	b, err := l.arr.Store.GetRange(ctx, frag.Key(l.arr, file), int64(off), int64(n))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	return b, nil
}

// budget is a byte-weighted semaphore; a request larger than the whole
// budget waits for the budget to be entirely free and then takes all of it.
type budget struct {
	size int64
	sem  *semaphore.Weighted
}

func newBudget(size int64) *budget { return &budget{size: size, sem: semaphore.NewWeighted(size)} }

func (b *budget) clamp(n int64) int64 { return max(0, min(n, b.size)) }

func (b *budget) acquire(ctx context.Context, n int64) error {
	if err := b.sem.Acquire(ctx, b.clamp(n)); err != nil {
		return err
	}
	return nil
}

func (b *budget) release(n int64) { b.sem.Release(b.clamp(n)) }
