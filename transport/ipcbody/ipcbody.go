// Package ipcbody builds Arrow IPC record batch messages whose buffers may
// be compressed already: the zstd frames of a TileDB tile go into the
// message as they are, with the IPC format's per-buffer compression
// (BodyCompression, method BUFFER), so that a server can hand a client
// compressed tiles without decompressing them.
//
// arrow-go's ipc writer compresses buffers itself and has no way to take
// bytes compressed elsewhere, so the message's flatbuffer header is built
// here. Only what a record batch of flat columns needs is written: the
// field nodes, the buffers, and the compression codec.
//
// Body layout (Arrow columnar format, "Compression"): each buffer is an
// 8-byte little-endian signed length followed by its bytes; the length is
// the buffer's uncompressed size when the bytes are zstd, -1 when they are
// stored as they are. An empty buffer is written as no bytes at all,
// without the length. Every buffer starts at a multiple of 8 bytes.
package ipcbody

import (
	"encoding/binary"

	flatbuffers "github.com/google/flatbuffers/go"
)

// Node is one field node: a column's length and null count.
type Node struct{ Length, NullCount int64 }

// Buffer is one buffer of the body. When Frames is nil the buffer is Raw,
// sent uncompressed; otherwise it is the concatenation of Frames, zstd
// frames (one or more, back to back) that decompress to Size bytes.
type Buffer struct {
	Raw    []byte
	Frames [][]byte
	Size   int64
}

// Message is a record batch message: Header is the IPC Message flatbuffer
// (FlightData's data_header) and Body the slices whose concatenation is the
// body (data_body), BodyLen bytes.
type Message struct {
	Header  []byte
	Body    [][]byte
	BodyLen int64
}

// The Arrow format's enumeration values this package writes (Schema.fbs,
// Message.fbs).
const (
	metadataV5         = 4 // MetadataVersion.V5
	headerRecordBatch  = 3 // MessageHeader.RecordBatch
	compressionZstd    = 1 // CompressionType.ZSTD
	uncompressedMarker = -1
)

// uncompressed is the length prefix of a buffer stored as it is.
var uncompressed = func() uint64 { v := int64(uncompressedMarker); return uint64(v) }()

var pad [8]byte

// RecordBatch builds the message of a record batch of rows rows whose
// columns' field nodes are nodes and whose buffers, in the order the
// columnar format lists them, are bufs. The body aliases the buffers'
// bytes; nothing is copied.
func RecordBatch(rows int64, nodes []Node, bufs []Buffer) Message {
	prefixes := make([]byte, 8*len(bufs))
	type span struct{ off, n int64 }
	spans := make([]span, len(bufs))
	var m Message
	var off int64
	for i, b := range bufs {
		start := off
		var n int64
		if b.Frames != nil {
			for _, f := range b.Frames {
				n += int64(len(f))
			}
		} else {
			n = int64(len(b.Raw))
		}
		if n == 0 && b.Size == 0 {
			spans[i] = span{start, 0}
			continue
		}
		p := prefixes[8*i : 8*i+8]
		if b.Frames != nil {
			binary.LittleEndian.PutUint64(p, uint64(b.Size))
			m.Body = append(m.Body, p)
			m.Body = append(m.Body, b.Frames...)
		} else {
			binary.LittleEndian.PutUint64(p, uncompressed)
			m.Body = append(m.Body, p, b.Raw)
		}
		off += 8 + n
		if r := off % 8; r != 0 {
			m.Body = append(m.Body, pad[:8-r])
			off += 8 - r
		}
		spans[i] = span{start, 8 + n}
	}
	m.BodyLen = off

	fb := flatbuffers.NewBuilder(128 + 16*(len(nodes)+len(bufs)))
	// BodyCompression {codec: ZSTD, method: BUFFER (the default, omitted)}
	fb.StartObject(2)
	fb.PrependByteSlot(0, compressionZstd, 0)
	comp := fb.EndObject()
	// Vectors of structs are written back to front.
	fb.StartVector(16, len(bufs), 8)
	for i := len(spans) - 1; i >= 0; i-- {
		fb.Prep(8, 16)
		fb.PrependInt64(spans[i].n)
		fb.PrependInt64(spans[i].off)
	}
	bufVec := fb.EndVector(len(bufs))
	fb.StartVector(16, len(nodes), 8)
	for i := len(nodes) - 1; i >= 0; i-- {
		fb.Prep(8, 16)
		fb.PrependInt64(nodes[i].NullCount)
		fb.PrependInt64(nodes[i].Length)
	}
	nodeVec := fb.EndVector(len(nodes))
	// RecordBatch {length, nodes, buffers, compression}
	fb.StartObject(5)
	fb.PrependInt64Slot(0, rows, 0)
	fb.PrependUOffsetTSlot(1, nodeVec, 0)
	fb.PrependUOffsetTSlot(2, bufVec, 0)
	fb.PrependUOffsetTSlot(3, comp, 0)
	rb := fb.EndObject()
	// Message {version, header_type, header, bodyLength}
	fb.StartObject(5)
	fb.PrependInt64Slot(3, m.BodyLen, 0)
	fb.PrependUOffsetTSlot(2, rb, 0)
	fb.PrependInt16Slot(0, metadataV5, 0)
	fb.PrependByteSlot(1, headerRecordBatch, 0)
	msg := fb.EndObject()
	fb.Finish(msg)
	m.Header = fb.FinishedBytes()
	return m
}
