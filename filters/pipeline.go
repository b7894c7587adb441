// Package filters owns TileDB's filter pipeline runner and its compression
// filters: cutting a tile into chunks the way TileDB does, running every
// chunk through the stages in both directions, the serialized chunk framing
// (u64 chunk count; per chunk u32 original length, u32 filtered length,
// u32 metadata length, metadata, data), the var-sized tile rules (cells
// never split across chunks, strings whose offsets travel inside the
// values tile under RLE and dictionary encoding), and the compressors
// gzip, zstd, lz4, bzip2, RLE, dictionary, delta and double delta.
//
// The other filters (shuffles, bit width reduction, positive delta,
// checksums, float scaling, XOR, WebP, AES-256-GCM) are package codecs;
// both kinds meet in package stage's contract.
package filters

import (
	"errors"
	"fmt"
	"math"
	"runtime"

	"github.com/tileflight/tileflight/errkind"
	"github.com/tileflight/tileflight/filters/stage"
	"github.com/tileflight/tileflight/format/datatype"
	"github.com/tileflight/tileflight/format/pipeline"
)

// ErrChecksum is wrapped by every error caused by a checksum filter that
// found the data altered (the Flight layer maps it to DataLoss).
var ErrChecksum error = errkind.New(errkind.DataLoss, errkind.Overrides, "checksum mismatch")

// ErrUnsupported is wrapped when a pipeline cannot be built or run for the
// given datatype (e.g. delta on floats, dictionary on fixed-size data).
// Kind: Internal until a caller wraps it with the kind it knows
// (errkind.Fallback): whether the user or the stored data is at fault.
var ErrUnsupported error = errkind.New(errkind.Internal, errkind.Fallback, "unsupported")

// MaxChunkSize is the chunk size TileDB uses for every chunked tile. The
// max chunk size stored in a pipeline is only consulted for zero, which
// turns chunking off; any other value is ignored, as in TileDB.
const MaxChunkSize = 64 * 1024

// Options carries what the pipeline needs beyond its serialized form.
type Options struct {
	// EncryptionKey, when non-empty, is the array's AES-256-GCM key: like
	// TileDB, the runner appends the encryption filter to the pipeline
	// (unless it already holds one, as generic tile pipelines do).
	EncryptionKey []byte
	// IsOffsets marks the pipeline of a var-sized field's offsets tile.
	IsOffsets bool
	// Concurrency bounds the goroutines that unfilter one tile's chunks;
	// 0 means GOMAXPROCS, 1 means sequential.
	Concurrency int
}

// Pipeline is a filter pipeline bound to one field's tiles: the datatype
// and cell layout of the tiles it filters and the format version they are
// (or were) written with. It is safe for concurrent use.
type Pipeline struct {
	desc       pipeline.Pipeline
	filters    []pipeline.Filter // desc.Filters plus the encryption filter
	typ        datatype.Datatype
	cellValNum uint32
	version    uint32
	opts       Options
	stages     []stage.Stage
	inTypes    []datatype.Datatype // input datatype of each stage (forward)
	cellSize   int
	// strings is true for var-sized STRING_ASCII/UTF8 data under RLE or
	// dictionary encoding at a version where TileDB leaves the offsets tile
	// empty and encodes the offsets inside the values tile.
	strings  bool
	chunking bool
	// fills: the first filter writes every byte of a chunk it unfilters
	// successfully, so tiles may be decoded into unzeroed memory.
	fills bool
}

// New binds pipeline p to tiles of datatype t with cellValNum values per
// cell (0 or TileDB's 0xFFFFFFFF for var-sized values tiles) written at format
// version. Offsets tiles are built with t = UINT64, cellValNum 1 and
// opts.IsOffsets; validity tiles with t = UINT8, cellValNum 1.
func New(p pipeline.Pipeline, t datatype.Datatype, cellValNum uint32, version uint32, opts Options) (*Pipeline, error) {
	if !t.Valid() || t.Size() == 0 {
		return nil, fmt.Errorf("filter pipeline: %w: datatype %s", ErrUnsupported, t)
	}
	if cellValNum == math.MaxUint32 {
		cellValNum = 0
	}
	pl := &Pipeline{desc: p, typ: t, cellValNum: cellValNum, version: version, opts: opts}
	pl.filters = append([]pipeline.Filter(nil), p.Filters...)
	// Generic tiles serialize the encryption filter in their pipeline;
	// attribute pipelines never do and get it appended.
	if len(opts.EncryptionKey) > 0 && !p.Has(pipeline.AES256GCM) {
		pl.filters = append(pl.filters, pipeline.Filter{Type: pipeline.AES256GCM, Reinterpret: datatype.Any})
	}
	pl.cellSize = t.Size()
	if cellValNum != 0 {
		pl.cellSize *= int(cellValNum)
	}
	isVar := cellValNum == 0
	pl.strings = isVar && skipOffsets(p, t, version)
	pl.chunking = useChunking(p, isVar, t, version)
	cur := t
	for i, f := range pl.filters {
		if pl.strings && i > 0 && (f.Type == pipeline.RLE || f.Type == pipeline.Dictionary) {
			return nil, fmt.Errorf("filter pipeline: %w: %s must be the first filter on var-sized strings", ErrUnsupported, f.Type)
		}
		s, err := newStage(f, cur, pl.cellSize, opts)
		if err != nil {
			return nil, fmt.Errorf("filter pipeline: filter %d (%s): %w", i, f.Type, err)
		}
		pl.stages = append(pl.stages, s)
		pl.inTypes = append(pl.inTypes, cur)
		cur = s.OutputType(cur)
	}
	pl.fills = len(pl.stages) == 0 || fillsOut(pl.stages[0])
	return pl, nil
}

// Datatype is the datatype of the tiles the pipeline filters.
func (p *Pipeline) Datatype() datatype.Datatype { return p.typ }

// Filters returns the filters run, including an appended encryption filter.
func (p *Pipeline) Filters() []pipeline.Filter { return p.filters }

// CarriesOffsets reports whether the values tile carries the cell offsets
// (var-sized strings under RLE or dictionary encoding from format 12/13/17):
// the offsets tile is then written as an empty tile (zero chunks).
func (p *Pipeline) CarriesOffsets() bool { return p.strings }

// Chunked reports whether tiles are cut into chunks of MaxChunkSize.
func (p *Pipeline) Chunked() bool { return p.chunking }

// skipOffsets is TileDB's rule for leaving a var string field's offsets
// out of the offsets tile: RLE from format 12 (ASCII) / 17 (UTF-8),
// dictionary from 13 (ASCII) / 17 (UTF-8).
func skipOffsets(p pipeline.Pipeline, t datatype.Datatype, version uint32) bool {
	ascii := t == datatype.StringASCII
	utf8 := t == datatype.StringUTF8
	if ((version >= 12 && ascii) || (version >= 17 && utf8)) && p.Has(pipeline.RLE) {
		return true
	}
	return ((version >= 13 && ascii) || (version >= 17 && utf8)) && p.Has(pipeline.Dictionary)
}

// useChunking is TileDB's rule for chunking a tile. Note its string test
// is looser than skipOffsets for UTF-8 (any version from 12/13).
func useChunking(p pipeline.Pipeline, isVar bool, t datatype.Datatype, version uint32) bool {
	if p.MaxChunkSize == 0 {
		return false
	}
	if isVar && (t == datatype.StringASCII || t == datatype.StringUTF8) {
		if version >= 12 && p.Has(pipeline.RLE) {
			return false
		}
		if version >= 13 && p.Has(pipeline.Dictionary) {
			return false
		}
		return true
	}
	return !p.Has(pipeline.WebP)
}

func (p *Pipeline) concurrency() int {
	if p.opts.Concurrency > 0 {
		return p.opts.Concurrency
	}
	return runtime.GOMAXPROCS(0)
}

func (p *Pipeline) ctx(i int) *stage.Context {
	return &stage.Context{Type: p.inTypes[i], CellValNum: p.cellValNum, Version: p.version, IsOffsets: p.opts.IsOffsets}
}

// stageErr names the chunk and the filter in an error and maps checksum
// failures onto ErrChecksum.
func (p *Pipeline) stageErr(chunk, nchunks, i int, dir string, err error) error {
	e := fmt.Errorf("chunk %d of %d: filter %d (%s) %s: %w", chunk, nchunks, i, p.filters[i].Type, dir, err)
	if isChecksum(err) && !errors.Is(err, ErrChecksum) {
		return fmt.Errorf("%w: %w", ErrChecksum, e)
	}
	return e
}
