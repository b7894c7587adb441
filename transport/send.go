package transport

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/tileflight/tileflight/errkind"
)

// SendRecords writes the records next returns, until io.EOF, to a DoGet
// stream as one IPC stream of schema sc (bodies go to gRPC as the
// record's buffers: payloadWriter). A ZstdBatch goes out with its
// compressed columns as Arrow IPC ZSTD-compressed buffers, undecoded (its
// other columns uncompressed in the same message). Each record is
// released once written, after sent (when not nil) has seen it.
//
// The error is not a gRPC status: the caller maps it. An error from next
// is returned as it is and ends the stream; so is an errkind error found
// decoding a corrupt frame; a failed write means the client went away or
// the transport failed, and is returned with the context's reason when
// there is one. The caller's deferred cleanup stops the source.
func SendRecords(ctx context.Context, stream Sender, sc *arrow.Schema,
	next func() (arrow.RecordBatch, error), sent func(arrow.RecordBatch)) error {
	pw := newPayloadWriter(stream)
	// Without dictionaries a record's message depends on nothing sent
	// before it, so messages are built one by one (which lets a
	// compressed batch be built by hand between them); with dictionaries
	// arrow-go's writer keeps track of what it has sent.
	var w *ipc.Writer
	if hasDictionaries(sc) {
		w = ipc.NewWriterWithPayloadWriter(pw, ipc.WithSchema(sc))
	} else {
		p := ipc.GetSchemaPayload(sc, memory.DefaultAllocator)
		err := pw.WritePayload(p)
		p.Release()
		if err != nil {
			return clientGone(ctx, err)
		}
	}
	for {
		rec, err := next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			if w != nil {
				w.Close()
			}
			return err
		}
		werr := writeRecord(pw, w, sc, rec)
		if sent != nil {
			sent(rec)
		}
		rec.Release()
		if werr != nil {
			if errkind.Of(werr) != nil {
				return werr // a corrupt frame, found decoding
			}
			return clientGone(ctx, werr)
		}
	}
	if w != nil {
		if err := w.Close(); err != nil {
			return clientGone(ctx, err)
		}
	}
	return nil
}

// writeRecord sends one record: through w when the stream has one, else
// as a message built on its own.
func writeRecord(pw *payloadWriter, w *ipc.Writer, sc *arrow.Schema, rec arrow.RecordBatch) error {
	if zb, ok := rec.(ZstdBatch); ok {
		if m, ok := zstdMessage(zb); ok && w == nil {
			pw.holding(rec)
			defer pw.holding(nil)
			if err := pw.send(m.Header, m.Body); err != nil {
				return err
			}
			countZstd(zb)
			return nil
		}
		whole, err := zb.Decode()
		if err != nil {
			return err
		}
		defer whole.Release()
		rec = whole
	}
	pw.holding(rec)
	defer pw.holding(nil)
	if w != nil {
		return w.Write(rec)
	}
	if !rec.Schema().Equal(sc) {
		return fmt.Errorf("a record batch of schema %s in a stream of schema %s", rec.Schema(), sc)
	}
	p, err := ipc.GetRecordBatchPayload(rec)
	if err != nil {
		return err
	}
	defer p.Release()
	return pw.WritePayload(p)
}

// hasDictionaries reports a dictionary-encoded field anywhere in sc.
func hasDictionaries(sc *arrow.Schema) bool {
	var dict func(t arrow.DataType) bool
	dict = func(t arrow.DataType) bool {
		switch t := t.(type) {
		case *arrow.DictionaryType:
			return true
		case arrow.NestedType:
			for _, f := range t.Fields() {
				if dict(f.Type) {
					return true
				}
			}
		}
		return false
	}
	for _, f := range sc.Fields() {
		if dict(f.Type) {
			return true
		}
	}
	return false
}

// clientGone prefers the context's reason (the client cancelled) over the
// transport's error text.
func clientGone(ctx context.Context, err error) error {
	if cerr := ctx.Err(); cerr != nil {
		return fmt.Errorf("sending batches: %w", cerr)
	}
	return err
}
