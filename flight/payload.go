package flight

import (
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/ipc"
)

// payloadWriter sends IPC payloads as FlightData messages, as arrow-go's
// flight.Writer does, but without first copying every body into a
// buffer of its own: a body made of one Arrow buffer (a batch of one
// fixed-size column without nulls, the common DoGet) is handed to gRPC
// as it is, and only bodies of several buffers are gathered into one
// reused buffer. gRPC still copies the message once into its own frame
// buffers, so this saves one copy of every byte a DoGet sends.
//
// The record's buffers must stay valid until WritePayload returns: the
// caller releases the record after ipc.Writer.Write, which is when the
// message has been serialized by SendMsg.
type payloadWriter struct {
	stream flight.DataStreamWriter
	parts  [][]byte // the body's slices, as SerializeBody writes them
	gather []byte
	fd     flight.FlightData
}

func newPayloadWriter(s flight.DataStreamWriter) *payloadWriter {
	return &payloadWriter{stream: s}
}

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
	var body []byte
	switch len(w.parts) {
	case 0:
	case 1:
		body = w.parts[0]
	default:
		w.gather = w.gather[:0]
		for _, part := range w.parts {
			w.gather = append(w.gather, part...)
		}
		body = w.gather
	}
	w.fd.DataHeader = meta.Bytes()
	w.fd.DataBody = body
	err := w.stream.Send(&w.fd)
	// Drop the references to the record's buffers, which the caller is
	// about to release.
	clear(w.parts)
	w.fd.DataBody = nil
	w.fd.DataHeader = nil
	return err
}

func (w *payloadWriter) Start() error { return nil }

func (w *payloadWriter) Close() error { return nil }
