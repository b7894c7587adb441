package transport

import (
	"encoding/binary"
	"sync/atomic"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/bitutil"

	"github.com/tileflight/tileflight/transport/ipcbody"
)

// ZstdBatch is a record batch some of whose columns are still the zstd
// frames of the tiles they were stored in (the reader's pass-through
// batches, seen through the service's adapter: transport does not know
// the reader). SendRecords sends those columns as Arrow IPC
// ZSTD-compressed buffers without decompressing them.
type ZstdBatch interface {
	arrow.RecordBatch
	// ZstdColumn is column i when it is compressed: zstd frames that,
	// decompressed back to back, are the column's Arrow data buffer of
	// size bytes. frames is nil when column i is plain.
	ZstdColumn(i int) (frames [][]byte, size int64)
	// Plain is column i when it is not compressed (else nil).
	Plain(i int) arrow.Array
	// Decode is the batch with every column decompressed (released by
	// the caller); an error is a corrupt frame.
	Decode() (arrow.RecordBatch, error)
}

// zstdSent and zstdSentRaw count the compressed bytes of tiles sent as
// they are stored and what they hold (metrics: zstd_passthrough_*).
var zstdSent, zstdSentRaw atomic.Uint64

// ZstdSent is the compressed bytes of tiles sent as they are stored
// (ZstdBatch columns) since the process started, and raw what they hold.
func ZstdSent() (compressed, raw uint64) { return zstdSent.Load(), zstdSentRaw.Load() }

// countZstd adds b's compressed columns to the counters.
func countZstd(b ZstdBatch) {
	for i := 0; i < int(b.NumCols()); i++ {
		if frames, size := b.ZstdColumn(i); frames != nil {
			for _, f := range frames {
				zstdSent.Add(uint64(len(f)))
			}
			zstdSentRaw.Add(uint64(size))
		}
	}
}

// zstdMessage builds the IPC message of b, its compressed columns as
// ZSTD-compressed buffers (their frames as the file holds them) and its
// other columns as uncompressed buffers of the same message. ok is false
// when an uncompressed column is not a flat array this can lay out (the
// caller then sends b decompressed, as any other record).
func zstdMessage(b ZstdBatch) (m ipcbody.Message, ok bool) {
	rows := b.NumRows()
	var nodes []ipcbody.Node
	var bufs []ipcbody.Buffer
	for i := 0; i < int(b.NumCols()); i++ {
		if frames, size := b.ZstdColumn(i); frames != nil {
			nodes = append(nodes, ipcbody.Node{Length: rows})
			bufs = append(bufs, ipcbody.Buffer{}, ipcbody.Buffer{Frames: frames, Size: size})
			continue
		}
		col := b.Plain(i)
		more, ok := flatBuffers(col)
		if !ok {
			return ipcbody.Message{}, false
		}
		nodes = append(nodes, ipcbody.Node{Length: int64(col.Len()), NullCount: int64(col.NullN())})
		bufs = append(bufs, more...)
	}
	return ipcbody.RecordBatch(rows, nodes, bufs), true
}

// flatBuffers lays out the buffers of a flat array with no offset into its
// buffers: a validity bitmap (empty without nulls), then fixed-width
// values, or offsets and values for binaries and strings.
func flatBuffers(a arrow.Array) ([]ipcbody.Buffer, bool) {
	d := a.Data()
	if d.Offset() != 0 || len(d.Children()) != 0 || d.DataType().ID() == arrow.DICTIONARY {
		return nil, false
	}
	n := d.Len()
	raw := func(k int, size int) ([]byte, bool) {
		bs := d.Buffers()
		if k >= len(bs) || bs[k] == nil {
			return nil, size == 0
		}
		b := bs[k].Bytes()
		if len(b) < size {
			return nil, false
		}
		return b[:size], true
	}
	var validity []byte
	if d.NullN() > 0 {
		v, ok := raw(0, int(bitutil.BytesForBits(int64(n))))
		if !ok {
			return nil, false
		}
		validity = v
	}
	out := []ipcbody.Buffer{{Raw: validity}}
	switch t := d.DataType().(type) {
	case arrow.FixedWidthDataType:
		v, ok := raw(1, int(bitutil.BytesForBits(int64(n)*int64(t.BitWidth()))))
		if !ok {
			return nil, false
		}
		return append(out, ipcbody.Buffer{Raw: v}), true
	case arrow.BinaryDataType:
		var w int
		switch t.ID() {
		case arrow.BINARY, arrow.STRING:
			w = 4
		case arrow.LARGE_BINARY, arrow.LARGE_STRING:
			w = 8
		default: // views
			return nil, false
		}
		offs, ok := raw(1, (n+1)*w)
		if !ok {
			return nil, false
		}
		first, last := offsetAt(offs, 0, w), offsetAt(offs, n, w)
		if first != 0 || last < 0 {
			return nil, false
		}
		vals, ok := raw(2, int(last))
		if !ok {
			return nil, false
		}
		return append(out, ipcbody.Buffer{Raw: offs}, ipcbody.Buffer{Raw: vals}), true
	}
	return nil, false
}

func offsetAt(b []byte, i, w int) int64 {
	if w == 4 {
		return int64(int32(binary.LittleEndian.Uint32(b[4*i:])))
	}
	return int64(binary.LittleEndian.Uint64(b[8*i:]))
}
