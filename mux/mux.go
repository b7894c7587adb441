// Package mux serves two Flight services on one port: the native service
// (package flightsvc: JSON queries, PATH descriptors, snake_case actions)
// and Flight SQL (package sqlsvc, arrow-go's flightsql server). It
// implements arrow-go's FlightServiceServer and hands each call to one of
// them, deciding by what the call carries (docs/protocol.md, "Flight SQL"):
//
//   - a CMD descriptor or a ticket whose bytes are not a JSON object is
//     Flight SQL's (a serialized protobuf Any, first byte 0x0a); every
//     other descriptor or ticket is the native service's;
//   - DoPut is routed by the descriptor of its first message;
//   - an action whose type holds no "_" is Flight SQL's (CamelCase:
//     CreatePreparedStatement, ...); the native actions are snake_case;
//   - ListActions lists the native actions, then Flight SQL's;
//   - Handshake, ListFlights and DoExchange are the native service's.
//
// Neither service knows of the other. Interceptors (metrics, access log,
// auth, panic recovery) are installed on the gRPC server around the mux,
// so they cover both alike.
package mux

import (
	"bytes"
	"context"
	"io"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	aflight "github.com/apache/arrow-go/v18/arrow/flight"

	"github.com/tileflight/tileflight/flightsvc"
)

// Streamer is implemented by a Flight SQL server that can resolve a
// statement ticket into its result stream itself. The mux then sends that
// stream as the native service sends a query's (one-buffer bodies handed
// to gRPC without a copy: flightsvc.SendRecords) instead of through
// arrow-go's generic Flight SQL DoGet, which copies every batch body once
// more. ok is false for tickets it leaves to the generic path (catalog
// commands).
type Streamer interface {
	StreamTicket(ctx context.Context, ticket []byte) (sc *arrow.Schema, chunks <-chan aflight.StreamChunk, ok bool, err error)
}

// Mux dispatches Flight RPCs to the native service or to Flight SQL.
type Mux struct {
	// FlightServer is the native service; the RPCs the mux does not
	// route (Handshake, ListFlights, DoExchange) are its.
	aflight.FlightServer
	sql aflight.FlightServer
	// native are the native service's action types.
	native map[string]bool
}

// New returns a mux over the native service and the Flight SQL server;
// sql nil serves the native service alone (every call goes to it).
func New(native, sql aflight.FlightServer) *Mux {
	m := &Mux{FlightServer: native, sql: sql, native: map[string]bool{}}
	// The native service lists its actions without looking at the call.
	_ = native.ListActions(&aflight.Empty{}, &actionLister{ctx: context.Background(), send: func(t *aflight.ActionType) {
		m.native[t.GetType()] = true
	}})
	return m
}

// isJSON tells the native protocol's descriptors and tickets (a JSON
// object) from Flight SQL's (a serialized protobuf Any, whose first byte
// is the tag of its type_url field, 0x0a).
func isJSON(b []byte) bool {
	b = bytes.TrimLeft(b, " \t\r\n")
	return len(b) > 0 && b[0] == '{'
}

// sqlBytes says whether a CMD descriptor's or a ticket's bytes go to
// Flight SQL.
func (m *Mux) sqlBytes(b []byte) bool {
	return m.sql != nil && len(b) > 0 && !isJSON(b)
}

// sqlDescriptor says whether a descriptor goes to Flight SQL.
func (m *Mux) sqlDescriptor(fd *aflight.FlightDescriptor) bool {
	return fd != nil && fd.Type == aflight.DescriptorCMD && m.sqlBytes(fd.Cmd)
}

// sqlAction says whether an action type is Flight SQL's: one the native
// service does not list and without "_" (no native action is one word
// today; the list keeps a future one from going to Flight SQL).
func (m *Mux) sqlAction(typ string) bool {
	return m.sql != nil && !m.native[typ] && !strings.Contains(typ, "_")
}

func (m *Mux) GetSchema(ctx context.Context, fd *aflight.FlightDescriptor) (*aflight.SchemaResult, error) {
	if m.sqlDescriptor(fd) {
		return m.sql.GetSchema(ctx, fd)
	}
	return m.FlightServer.GetSchema(ctx, fd)
}

func (m *Mux) GetFlightInfo(ctx context.Context, fd *aflight.FlightDescriptor) (*aflight.FlightInfo, error) {
	if m.sqlDescriptor(fd) {
		return m.sql.GetFlightInfo(ctx, fd)
	}
	return m.FlightServer.GetFlightInfo(ctx, fd)
}

func (m *Mux) PollFlightInfo(ctx context.Context, fd *aflight.FlightDescriptor) (*aflight.PollInfo, error) {
	if m.sqlDescriptor(fd) {
		return m.sql.PollFlightInfo(ctx, fd)
	}
	return m.FlightServer.PollFlightInfo(ctx, fd)
}

func (m *Mux) DoGet(t *aflight.Ticket, stream aflight.FlightService_DoGetServer) error {
	if t == nil || !m.sqlBytes(t.Ticket) {
		return m.FlightServer.DoGet(t, stream)
	}
	st, ok := m.sql.(Streamer)
	if !ok {
		return m.sql.DoGet(t, stream)
	}
	ctx := stream.Context()
	sc, chunks, ok, err := st.StreamTicket(ctx, t.Ticket)
	if err != nil {
		return err
	}
	if !ok {
		return m.sql.DoGet(t, stream)
	}
	defer func() {
		for c := range chunks {
			if c.Data != nil {
				c.Data.Release()
			}
		}
	}()
	// The statement's rows were counted for the access log where they
	// were produced, so nothing is noted per record here.
	return flightsvc.SendRecords(ctx, stream, sc, func() (arrow.RecordBatch, error) {
		select {
		case <-ctx.Done():
			return nil, context.Cause(ctx) // cancel_query, CancelFlightInfo, the timeout: say which
		case c, more := <-chunks:
			if !more {
				return nil, io.EOF
			}
			if c.Err != nil {
				return nil, c.Err
			}
			return c.Data, nil
		}
	}, nil)
}

// DoPut reads the first message to route the call, then hands the whole
// stream (that message replayed) to the side it names. A stream that
// fails before its first message goes to the native service, which
// refuses it as it always has.
func (m *Mux) DoPut(stream aflight.FlightService_DoPutServer) error {
	if m.sql == nil {
		return m.FlightServer.DoPut(stream)
	}
	first, err := stream.Recv()
	replay := &putStream{FlightService_DoPutServer: stream, first: first, err: err}
	if err == nil && m.sqlDescriptor(first.GetFlightDescriptor()) {
		return m.sql.DoPut(replay)
	}
	return m.FlightServer.DoPut(replay)
}

// putStream replayed the first message of a DoPut stream (or the error
// that came instead), which the mux read to route the call.
type putStream struct {
	aflight.FlightService_DoPutServer
	first    *aflight.FlightData
	err      error
	replayed bool
}

func (p *putStream) Recv() (*aflight.FlightData, error) {
	if !p.replayed {
		p.replayed = true
		return p.first, p.err
	}
	if p.err != nil {
		return nil, p.err
	}
	return p.FlightService_DoPutServer.Recv()
}

func (m *Mux) DoAction(a *aflight.Action, stream aflight.FlightService_DoActionServer) error {
	if m.sqlAction(a.GetType()) {
		return m.sql.DoAction(a, stream)
	}
	return m.FlightServer.DoAction(a, stream)
}

// ListActions lists the native actions, then Flight SQL's.
func (m *Mux) ListActions(e *aflight.Empty, stream aflight.FlightService_ListActionsServer) error {
	if err := m.FlightServer.ListActions(e, stream); err != nil {
		return err
	}
	if m.sql != nil {
		return m.sql.ListActions(&aflight.Empty{}, stream)
	}
	return nil
}

// actionLister collects what a ListActions sends.
type actionLister struct {
	aflight.FlightService_ListActionsServer
	ctx  context.Context
	send func(*aflight.ActionType)
}

func (l *actionLister) Send(t *aflight.ActionType) error { l.send(t); return nil }

func (l *actionLister) Context() context.Context { return l.ctx }
