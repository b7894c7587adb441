package ipcbody

import (
	"bytes"
	"encoding/binary"
	"math"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/klauspost/compress/zstd"
)

// messages feeds arrow-go's IPC reader a schema message and then ours.
type messages struct {
	list []*ipc.Message
	refs int64
}

func (m *messages) Message() (*ipc.Message, error) {
	if len(m.list) == 0 {
		return nil, nil
	}
	msg := m.list[0]
	m.list = m.list[1:]
	return msg, nil
}
func (m *messages) Retain()  { m.refs++ }
func (m *messages) Release() { m.refs-- }

func float64s(n int, f func(i int) float64) []byte {
	b := make([]byte, 8*n)
	for i := 0; i < n; i++ {
		binary.LittleEndian.PutUint64(b[8*i:], math.Float64bits(f(i)))
	}
	return b
}

// frames compresses b as one zstd frame per piece of at most piece bytes.
func frames(t *testing.T, b []byte, piece int) [][]byte {
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest))
	if err != nil {
		t.Fatal(err)
	}
	var out [][]byte
	for len(b) > 0 {
		n := min(piece, len(b))
		out = append(out, enc.EncodeAll(b[:n], nil))
		b = b[n:]
	}
	return out
}

// TestRecordBatchReadsBack builds messages with compressed, raw and empty
// buffers and has arrow-go's IPC reader (which decompresses ZSTD bodies
// itself) read them: every value must come back.
func TestRecordBatchReadsBack(t *testing.T) {
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "x", Type: arrow.PrimitiveTypes.Int64},
		{Name: "v", Type: arrow.PrimitiveTypes.Float64},
	}, nil)
	tests := []struct {
		name  string
		rows  int
		piece int  // bytes per zstd frame of v
		rawV  bool // v sent uncompressed too
	}{
		{"one frame", 1000, 1 << 20, false},
		{"many frames", 10000, 8192, false},
		{"odd frame sizes", 999, 800, false},
		{"one row", 1, 64, false},
		{"nothing compressed", 77, 0, true},
		{"zero rows", 0, 64, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			xs := make([]byte, 8*tc.rows)
			for i := 0; i < tc.rows; i++ {
				binary.LittleEndian.PutUint64(xs[8*i:], uint64(i*3))
			}
			vs := float64s(tc.rows, func(i int) float64 { return float64(i) * 0.25 })
			vbuf := Buffer{Raw: vs}
			if !tc.rawV {
				vbuf = Buffer{Frames: frames(t, vs, tc.piece), Size: int64(len(vs))}
			}
			m := RecordBatch(int64(tc.rows),
				[]Node{{Length: int64(tc.rows)}, {Length: int64(tc.rows)}},
				[]Buffer{{}, {Raw: xs}, {}, vbuf})
			body := bytes.Join(m.Body, nil)
			if int64(len(body)) != m.BodyLen {
				t.Fatalf("body is %d bytes, BodyLen %d", len(body), m.BodyLen)
			}
			sp := ipc.GetSchemaPayload(schema, memory.DefaultAllocator)
			defer sp.Release()
			mr := &messages{list: []*ipc.Message{
				ipc.NewMessage(sp.Meta(), memory.NewBufferBytes(nil)),
				ipc.NewMessage(memory.NewBufferBytes(m.Header), memory.NewBufferBytes(body)),
			}}
			r, err := ipc.NewReaderFromMessageReader(mr)
			if err != nil {
				t.Fatal(err)
			}
			defer r.Release()
			if !r.Next() {
				t.Fatalf("no record: %v", r.Err())
			}
			rec := r.RecordBatch()
			if rec.NumRows() != int64(tc.rows) {
				t.Fatalf("%d rows, want %d", rec.NumRows(), tc.rows)
			}
			x := rec.Column(0).(*array.Int64)
			v := rec.Column(1).(*array.Float64)
			for i := 0; i < tc.rows; i++ {
				if x.Value(i) != int64(i*3) || v.Value(i) != float64(i)*0.25 {
					t.Fatalf("row %d: x %d v %g", i, x.Value(i), v.Value(i))
				}
			}
		})
	}
}

// TestBuffersAreAligned checks the layout the format asks for: each
// buffer starts at a multiple of 8, compressed ones carry their size and
// raw ones -1, empty ones take no bytes.
func TestBuffersAreAligned(t *testing.T) {
	m := RecordBatch(3, []Node{{Length: 3}}, []Buffer{
		{},
		{Raw: []byte{1, 2, 3}},
		{Frames: [][]byte{{9, 9, 9, 9, 9}}, Size: 40},
		{Raw: []byte{7}},
	})
	body := bytes.Join(m.Body, nil)
	// raw(3): 8+3 -> 16; zstd(5): 8+5 -> 16; raw(1): 8+1 -> 16
	if len(body) != 48 || m.BodyLen != 48 {
		t.Fatalf("body %d bytes (BodyLen %d), want 48", len(body), m.BodyLen)
	}
	if got := int64(binary.LittleEndian.Uint64(body[0:])); got != -1 {
		t.Errorf("raw prefix %d, want -1", got)
	}
	if got := int64(binary.LittleEndian.Uint64(body[16:])); got != 40 {
		t.Errorf("zstd prefix %d, want 40", got)
	}
	if got := int64(binary.LittleEndian.Uint64(body[32:])); got != -1 {
		t.Errorf("raw prefix %d, want -1", got)
	}
}
