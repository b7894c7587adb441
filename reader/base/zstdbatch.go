package base

import (
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/apache/arrow-go/v18/arrow"
	arrowarray "github.com/apache/arrow-go/v18/arrow/array"

	"github.com/tileflight/tileflight/arrowconv"
	"github.com/tileflight/tileflight/errkind"
	"github.com/tileflight/tileflight/filters"
)

// ZstdColumn is a column of a ZstdBatch still in the zstd frames it was
// stored in: decompressed back to back, Frames (Sizes[i] bytes each) are
// the column's Arrow data buffer, Size bytes.
type ZstdColumn struct {
	Frames [][]byte
	Sizes  []uint64
	Size   int64
}

// ZstdBatch is a record batch some of whose columns are still the zstd
// frames of the tiles they were stored in (Options.ZstdPassThrough): a
// Flight server sends those as Arrow IPC ZSTD-compressed buffers without
// decompressing them (flight.SendRecords). Plain and Compressed give the
// columns as they are. As an arrow.RecordBatch it decompresses the
// compressed columns on first use, so that a consumer that does not know
// the type still sees every value; such a use panics if a frame turns out
// to be corrupt, which a consumer that cannot take compressed columns
// avoids by not asking for them.
type ZstdBatch struct {
	schema *arrow.Schema
	fields []arrowconv.Field
	rows   int64
	plain  []arrow.Array // nil where compressed
	zstd   []*ZstdColumn // nil where plain
	refs   atomic.Int64

	once    sync.Once
	decoded arrow.RecordBatch
	err     error
}

// NewZstdBatch makes a batch of rows rows whose column i is plain[i] or,
// where that is nil, zstd[i]; it takes over one reference to each plain
// column.
func NewZstdBatch(schema *arrow.Schema, fields []arrowconv.Field, rows int64, plain []arrow.Array, zstd []*ZstdColumn) *ZstdBatch {
	b := &ZstdBatch{schema: schema, fields: fields, rows: rows, plain: plain, zstd: zstd}
	b.refs.Store(1)
	return b
}

// Plain is column i when it is not compressed (else nil).
func (b *ZstdBatch) Plain(i int) arrow.Array { return b.plain[i] }

// Compressed is column i when it is compressed (else nil).
func (b *ZstdBatch) Compressed(i int) *ZstdColumn { return b.zstd[i] }

// UncompressedBytes is the size of the batch's buffers once decompressed,
// counted without decompressing anything.
func (b *ZstdBatch) UncompressedBytes() int64 {
	var n int64
	for i, z := range b.zstd {
		if z != nil {
			n += z.Size
			continue
		}
		for _, buf := range b.plain[i].Data().Buffers() {
			if buf != nil {
				n += int64(buf.Len())
			}
		}
	}
	return n
}

// Decode returns the batch with every column decompressed (one reference,
// the caller's to release), or the error a corrupt frame gives.
func (b *ZstdBatch) Decode() (arrow.RecordBatch, error) {
	b.once.Do(func() {
		cols := make([]arrow.Array, len(b.plain))
		defer func() {
			for _, c := range cols {
				if c != nil {
					c.Release()
				}
			}
		}()
		for i, z := range b.zstd {
			if z == nil {
				cols[i] = b.plain[i]
				cols[i].Retain()
				continue
			}
			data := make([]byte, z.Size)
			if err := filters.DecodeZstdFrames(z.Frames, z.Sizes, data); err != nil {
				b.err = errkind.Wrap(errkind.DataLoss, fmt.Errorf("column %q: %w", b.fields[i].Name, err))
				return
			}
			col, err := arrowconv.NewColumn(b.fields[i], data, nil, nil, int(b.rows))
			if err != nil {
				b.err = errkind.Wrap(errkind.DataLoss, fmt.Errorf("column %q: %w", b.fields[i].Name, err))
				return
			}
			cols[i] = col
		}
		b.decoded = arrowarray.NewRecordBatch(b.schema, cols, b.rows)
	})
	if b.err != nil {
		return nil, b.err
	}
	b.decoded.Retain()
	return b.decoded, nil
}

// whole is the decompressed batch, for the arrow.RecordBatch methods.
func (b *ZstdBatch) whole() arrow.RecordBatch {
	rec, err := b.Decode()
	if err != nil {
		panic(err)
	}
	rec.Release() // b.decoded keeps its own reference
	return rec
}

func (b *ZstdBatch) Retain() { b.refs.Add(1) }

func (b *ZstdBatch) Release() {
	if b.refs.Add(-1) != 0 {
		return
	}
	for _, c := range b.plain {
		if c != nil {
			c.Release()
		}
	}
	if b.decoded != nil {
		b.decoded.Release()
	}
}

func (b *ZstdBatch) Schema() *arrow.Schema    { return b.schema }
func (b *ZstdBatch) NumRows() int64           { return b.rows }
func (b *ZstdBatch) NumCols() int64           { return int64(len(b.plain)) }
func (b *ZstdBatch) ColumnName(i int) string  { return b.schema.Field(i).Name }
func (b *ZstdBatch) Columns() []arrow.Array   { return b.whole().Columns() }
func (b *ZstdBatch) Column(i int) arrow.Array { return b.whole().Column(i) }
func (b *ZstdBatch) MarshalJSON() ([]byte, error) {
	rec, err := b.Decode()
	if err != nil {
		return nil, err
	}
	defer rec.Release()
	return rec.MarshalJSON()
}
func (b *ZstdBatch) SetColumn(i int, col arrow.Array) (arrow.RecordBatch, error) {
	return b.whole().SetColumn(i, col)
}
func (b *ZstdBatch) NewSlice(i, j int64) arrow.RecordBatch { return b.whole().NewSlice(i, j) }
