package transport

import (
	"context"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/tileflight/tileflight/transport/sendconn"
)

// payloadWriter sends IPC payloads as FlightData messages, as arrow-go's
// flight.Writer does, but without copying bodies into buffers of its own.
// On a server with sendCodec (ServerOptions) a body goes to gRPC as
// the record's own buffers, and the record stays retained until gRPC has
// passed them on: gRPC then copies each byte once, into its write buffer,
// or, on a sendconn.Conn, not at all (the Conn writes the buffers where
// they are and the record is released once it has). On any
// other server a body of one buffer is handed to the protobuf codec as it
// is and only bodies of several buffers are gathered into one reused
// buffer; that codec copies the message while SendMsg runs.
//
// The caller names the record being written (holding) before
// ipc.Writer.Write and may release it as soon as Write returns.
type payloadWriter struct {
	stream   Sender
	zeroCopy bool
	conn     *sendconn.Conn    // the stream's connection, when it is one (nil: gRPC copies)
	rec      arrow.RecordBatch // the record whose payloads are being written
	parts    [][]byte          // the body's slices, as SerializeBody writes them
	gather   []byte
	fd       flight.FlightData
}

// Sender is the sending side of a DoGet stream
// (flight.FlightService_DoGetServer is one).
type Sender interface {
	Send(*flight.FlightData) error
	SendMsg(any) error
	Context() context.Context
}

func newPayloadWriter(s Sender) *payloadWriter {
	w := &payloadWriter{stream: s, zeroCopy: zeroCopy(s.Context())}
	if w.zeroCopy && onSendconn(s.Context()) {
		w.conn = sendconn.FromContext(s.Context())
	}
	return w
}

// holding names the record that the next payloads belong to.
func (w *payloadWriter) holding(rec arrow.RecordBatch) { w.rec = rec }

// Write records one slice of a body (a buffer or its padding).
func (w *payloadWriter) Write(p []byte) (int, error) {
	w.parts = append(w.parts, p)
	return len(p), nil
}

func (w *payloadWriter) WritePayload(p ipc.Payload) error {
	meta := p.Meta()
	defer meta.Release()
	w.parts = w.parts[:0]
	if err := p.SerializeBody(w); err != nil {
		return err
	}
	defer clear(w.parts) // drop the references to the record's buffers
	return w.send(meta.Bytes(), w.parts)
}

// send sends one message: header is its IPC metadata (data_header), the
// concatenation of parts its body, slices of the record being held.
func (w *payloadWriter) send(header []byte, parts [][]byte) error {
	if w.zeroCopy {
		m := outgoingData{header: header, parts: parts}
		if w.rec != nil && len(parts) > 0 {
			rec := w.rec
			rec.Retain()
			release := rec.Release
			conn := w.conn
			var id uint64
			if conn != nil {
				// The connection may write the parts from where they
				// are; the record is released once it has.
				id = conn.Hold(parts)
				release = func() { conn.Done(id, rec.Release) }
			}
			var once sync.Once
			m.release = func() { once.Do(release) }
			err := w.stream.SendMsg(&m)
			if conn != nil && err == nil {
				conn.Sent(id)
			}
			return err
		}
		return w.stream.SendMsg(&m)
	}
	var body []byte
	switch len(parts) {
	case 0:
	case 1:
		body = parts[0]
	default:
		w.gather = w.gather[:0]
		for _, part := range parts {
			w.gather = append(w.gather, part...)
		}
		body = w.gather
	}
	w.fd.DataHeader = header
	w.fd.DataBody = body
	err := w.stream.Send(&w.fd)
	w.fd.DataBody = nil
	w.fd.DataHeader = nil
	return err
}

func (w *payloadWriter) Start() error { return nil }

func (w *payloadWriter) Close() error { return nil }
