package flightsvc

import (
	"context"
	"fmt"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	aflight "github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/tileflight/tileflight/arrowconv"
	"github.com/tileflight/tileflight/errkind"
	"github.com/tileflight/tileflight/query"
	"github.com/tileflight/tileflight/reader"
	"github.com/tileflight/tileflight/reader/base"
	"github.com/tileflight/tileflight/reader/ndarray"
	"github.com/tileflight/tileflight/tdbarray"
	"github.com/tileflight/tileflight/tracing"
	"github.com/tileflight/tileflight/transport"
)

// descriptorQuery turns a flight descriptor into a query: PATH ["a/b"] or
// ["a", "b"] is {"array": "a/b"}; CMD is the query JSON itself.
func descriptorQuery(fd *aflight.FlightDescriptor) (*query.Query, error) {
	if fd == nil {
		return nil, errkind.Errorf(errkind.InvalidArgument, "missing flight descriptor: send a PATH descriptor [\"array/name\"] or a CMD descriptor holding a query JSON")
	}
	switch fd.Type {
	case aflight.DescriptorPATH:
		if len(fd.Path) == 0 {
			return nil, errkind.Errorf(errkind.InvalidArgument, "PATH descriptor is empty: give the array name, e.g. [\"demo/dense\"]")
		}
		for _, p := range fd.Path {
			if p == "" {
				return nil, errkind.Errorf(errkind.InvalidArgument, "PATH descriptor %q has an empty element", fd.Path)
			}
		}
		name := strings.Join(fd.Path, "/")
		if err := query.ValidateArrayName(name); err != nil {
			return nil, err
		}
		return &query.Query{Array: name, Limit: -1}, nil
	case aflight.DescriptorCMD:
		return query.Parse(fd.Cmd)
	}
	return nil, errkind.Errorf(errkind.InvalidArgument, "descriptor type %v: want PATH or CMD", fd.Type)
}

// arrowSchema is the Arrow schema of the columns a query asks for (all
// columns in docs/protocol.md, "Arrow type mapping" order when it names none).
func arrowSchema(a *tdbarray.Array, name string, columns []string) (*arrow.Schema, error) {
	if a.B2ND != nil {
		return ndarray.B2NDSchema(a, columns)
	}
	s := a.Schema
	if columns == nil {
		for _, d := range s.Dimensions {
			columns = append(columns, d.Name)
		}
		for _, at := range s.Attributes {
			columns = append(columns, at.Name)
		}
	}
	fields := make([]arrowconv.Field, 0, len(columns))
	for _, c := range columns {
		f, err := base.FieldFor(s, c)
		if err != nil {
			return nil, errkind.Errorf(errkind.InvalidArgument, "array %q has no column %q (columns: %s)", name, c, strings.Join(columnNames(a), ", "))
		}
		fields = append(fields, f)
	}
	sc, err := arrowconv.Schema(fields, nil)
	if err != nil {
		return nil, fmt.Errorf("array %q: %w", name, err)
	}
	return sc, nil
}

func columnNames(a *tdbarray.Array) []string {
	var out []string
	for _, d := range a.Schema.Dimensions {
		out = append(out, d.Name)
	}
	for _, at := range a.Schema.Attributes {
		out = append(out, at.Name)
	}
	return out
}

// querySchema opens the query's array and returns its result schema.
func (s *Service) querySchema(ctx context.Context, q *query.Query) (*tdbarray.Array, *arrow.Schema, error) {
	a, err := s.openArray(ctx, q.Array, q.Timestamp)
	if err != nil {
		return nil, nil, err
	}
	sc, err := arrowSchema(a, q.Array, q.Columns)
	if err != nil {
		return nil, nil, err
	}
	return a, sc, nil
}

// GetSchema returns the Arrow schema of the descriptor's query.
func (s *Service) GetSchema(ctx context.Context, fd *aflight.FlightDescriptor) (*aflight.SchemaResult, error) {
	q, err := descriptorQuery(fd)
	if err != nil {
		return nil, toStatus(err)
	}
	callInfo(ctx).SetArray(q.Array)
	sc, err := s.resultSchema(ctx, q)
	if err != nil {
		return nil, toStatus(err)
	}
	return &aflight.SchemaResult{Schema: aflight.SerializeSchema(sc, memory.DefaultAllocator)}, nil
}

// GetFlightInfo resolves the descriptor's query and splits it into
// endpoints whose tickets cover disjoint parts of the result.
func (s *Service) GetFlightInfo(ctx context.Context, fd *aflight.FlightDescriptor) (*aflight.FlightInfo, error) {
	q, err := descriptorQuery(fd)
	if err != nil {
		return nil, toStatus(err)
	}
	callInfo(ctx).SetArray(q.Array)
	info, err := s.flightInfo(ctx, q, fd)
	if err != nil {
		return nil, toStatus(err)
	}
	return info, nil
}

func (s *Service) flightInfo(ctx context.Context, q *query.Query, fd *aflight.FlightDescriptor) (*aflight.FlightInfo, error) {
	sc, parts, total, err := s.partition(ctx, q)
	if err != nil {
		return nil, err
	}
	info := &aflight.FlightInfo{
		Schema:           aflight.SerializeSchema(sc, memory.DefaultAllocator),
		FlightDescriptor: fd,
		TotalRecords:     total,
		TotalBytes:       -1,
		Ordered:          orderedParts(q),
	}
	for _, p := range parts {
		t, err := p.MarshalJSON()
		if err != nil {
			return nil, err
		}
		info.Endpoint = append(info.Endpoint, &aflight.FlightEndpoint{Ticket: &aflight.Ticket{Ticket: t}})
	}
	if s.cfg.Cluster != nil {
		s.cfg.Cluster.assign(info.Endpoint)
	}
	return info, nil
}

// orderedParts says whether the parts of q's result concatenate in q's
// order: endpoints are cut in result order, and only unordered results
// leave the order of their concatenation open.
func orderedParts(q *query.Query) bool {
	return q.Layout != query.LayoutUnordered && q.Layout != query.LayoutDefault
}

// PollFlightInfo is refused: the JSON protocol has no long-running
// queries to poll.
func (s *Service) PollFlightInfo(ctx context.Context, fd *aflight.FlightDescriptor) (*aflight.PollInfo, error) {
	return nil, toStatus(errkind.Errorf(errkind.Unimplemented, "PollFlightInfo: JSON queries are answered by GetFlightInfo at once; use it"))
}

// ListFlights returns one FlightInfo per array whose name starts with the
// criteria's expression (all arrays when it is empty).
func (s *Service) ListFlights(c *aflight.Criteria, stream aflight.FlightService_ListFlightsServer) error {
	ctx := stream.Context()
	prefix := ""
	if c != nil {
		prefix = string(c.Expression)
	}
	if strings.ContainsRune(prefix, 0) {
		return toStatus(errkind.Errorf(errkind.InvalidArgument, "ListFlights criteria %q: NUL byte in the name prefix", prefix))
	}
	arrays, err := s.listArrays(ctx, prefix)
	if err != nil {
		return toStatus(err)
	}
	for _, e := range arrays {
		a, sc, err := s.querySchema(ctx, &query.Query{Array: e.Name, Limit: -1})
		if err != nil {
			// One unreadable array must not hide the others.
			s.cfg.Log.Warn().Str("array", e.Name).Err(err).Msg("ListFlights: skipping an array that does not open")
			continue
		}
		_ = a
		ticket, _ := (&query.Query{Array: e.Name, Limit: -1}).MarshalJSON()
		info := &aflight.FlightInfo{
			Schema:           aflight.SerializeSchema(sc, memory.DefaultAllocator),
			FlightDescriptor: &aflight.FlightDescriptor{Type: aflight.DescriptorPATH, Path: []string{e.Name}},
			Endpoint:         []*aflight.FlightEndpoint{{Ticket: &aflight.Ticket{Ticket: ticket}}},
			TotalRecords:     -1,
			TotalBytes:       -1,
		}
		if s.cfg.Cluster != nil {
			s.cfg.Cluster.assign(info.Endpoint)
		}
		if err := stream.Send(info); err != nil {
			return err
		}
	}
	return nil
}

// DoGet streams the result of the ticket's query. Batches go out as the
// reader produces them; gRPC flow control paces the reader to the client.
func (s *Service) DoGet(t *aflight.Ticket, stream aflight.FlightService_DoGetServer) error {
	ctx := stream.Context()
	if t == nil || len(t.Ticket) == 0 {
		return toStatus(errkind.Errorf(errkind.InvalidArgument, "empty ticket: a ticket is a query JSON such as {\"array\": \"demo/dense\"}"))
	}
	q, err := query.Parse(t.Ticket)
	if err != nil {
		return toStatus(err)
	}
	ci := callInfo(ctx)
	ci.SetArray(q.Array)
	release, err := s.acquireStream(ctx)
	if err != nil {
		return toStatus(err)
	}
	defer release()

	pctx, span := tracing.Start(ctx, "plan", attribute.String("tileflight.array", q.Array))
	rs, err := s.openStream(pctx, q)
	tracing.Fail(span, err)
	span.End()
	if err != nil {
		return toStatus(err)
	}
	defer rs.Close()
	return SendRecords(ctx, stream, rs.Schema(), func() (arrow.RecordBatch, error) { return rs.Next(ctx) },
		func(rec arrow.RecordBatch) {
			ci.AddRows(rec.NumRows())
			ci.AddBytes(recordBytes(rec))
		})
}

// SendRecords writes the records next returns, until io.EOF, to a DoGet
// stream (transport.SendRecords, whose errors it maps to gRPC statuses).
// A *reader.ZstdBatch goes out with its compressed columns undecoded
// (zstdRecord shows it to the transport). Each record is released once
// written, after sent (when not nil) has seen it.
func SendRecords(ctx context.Context, stream aflight.FlightService_DoGetServer, sc *arrow.Schema,
	next func() (arrow.RecordBatch, error), sent func(arrow.RecordBatch)) error {
	// encode spans one record from the reader handing it over to its
	// message written (IPC encoding, gRPC's flow control included).
	var encode trace.Span
	seen := func(rec arrow.RecordBatch) {
		if encode != nil {
			encode.End()
			encode = nil
		}
		if sent == nil {
			return
		}
		if z, ok := rec.(zstdRecord); ok {
			rec = z.ZstdBatch
		}
		sent(rec)
	}
	return toStatus(transport.SendRecords(ctx, stream, sc, func() (arrow.RecordBatch, error) {
		rec, err := next()
		if err == nil && rec != nil {
			_, encode = tracing.Start(ctx, "encode", attribute.Int64("tileflight.rows", rec.NumRows()))
		}
		if zb, ok := rec.(*reader.ZstdBatch); ok {
			return zstdRecord{zb}, err
		}
		return rec, err
	}, seen))
}

// zstdRecord is a *reader.ZstdBatch as a transport.ZstdBatch.
type zstdRecord struct{ *reader.ZstdBatch }

func (z zstdRecord) ZstdColumn(i int) ([][]byte, int64) {
	if c := z.Compressed(i); c != nil {
		return c.Frames, c.Size
	}
	return nil, 0
}

// recordBytes is the size of a record's buffers, for the access log and
// the DoPut limit.
func recordBytes(rec arrow.RecordBatch) int64 {
	if zb, ok := rec.(*reader.ZstdBatch); ok {
		return zb.UncompressedBytes()
	}
	var n int64
	var add func(d arrow.ArrayData)
	add = func(d arrow.ArrayData) {
		for _, b := range d.Buffers() {
			if b != nil {
				n += int64(b.Len())
			}
		}
		for _, c := range d.Children() {
			add(c)
		}
	}
	for _, c := range rec.Columns() {
		add(c.Data())
	}
	return n
}
