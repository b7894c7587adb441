package mux

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	arr "github.com/apache/arrow-go/v18/arrow/array"
	aflight "github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// side is a fake Flight service that records which of its RPCs ran and
// with what (the descriptor, ticket or action it got).
type side struct {
	aflight.BaseFlightServer
	name    string
	actions []string
	mu      sync.Mutex
	calls   []string
}

func (s *side) note(rpc, arg string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls = append(s.calls, s.name+" "+rpc+" "+arg)
	return nil
}

func descArg(fd *aflight.FlightDescriptor) string {
	if fd == nil {
		return "<nil>"
	}
	if fd.Type == aflight.DescriptorPATH {
		return "path:" + strings.Join(fd.Path, "/")
	}
	return "cmd:" + string(fd.Cmd)
}

func (s *side) GetSchema(_ context.Context, fd *aflight.FlightDescriptor) (*aflight.SchemaResult, error) {
	return &aflight.SchemaResult{}, s.note("GetSchema", descArg(fd))
}

func (s *side) GetFlightInfo(_ context.Context, fd *aflight.FlightDescriptor) (*aflight.FlightInfo, error) {
	return &aflight.FlightInfo{}, s.note("GetFlightInfo", descArg(fd))
}

func (s *side) PollFlightInfo(_ context.Context, fd *aflight.FlightDescriptor) (*aflight.PollInfo, error) {
	return &aflight.PollInfo{}, s.note("PollFlightInfo", descArg(fd))
}

func (s *side) DoGet(t *aflight.Ticket, _ aflight.FlightService_DoGetServer) error {
	return s.note("DoGet", string(t.GetTicket()))
}

// DoPut records the descriptor of the first message it reads, which the
// mux read first and must replay, and how many messages followed.
func (s *side) DoPut(stream aflight.FlightService_DoPutServer) error {
	first, err := stream.Recv()
	if err != nil {
		return s.note("DoPut", "error")
	}
	n := 0
	for {
		if _, err := stream.Recv(); err != nil {
			break
		}
		n++
	}
	return s.note("DoPut", descArg(first.GetFlightDescriptor())+" +"+string(rune('0'+n)))
}

func (s *side) DoAction(a *aflight.Action, _ aflight.FlightService_DoActionServer) error {
	return s.note("DoAction", a.GetType())
}

func (s *side) ListActions(_ *aflight.Empty, stream aflight.FlightService_ListActionsServer) error {
	for _, a := range s.actions {
		if err := stream.Send(&aflight.ActionType{Type: a}); err != nil {
			return err
		}
	}
	return nil
}

func (s *side) ListFlights(*aflight.Criteria, aflight.FlightService_ListFlightsServer) error {
	return s.note("ListFlights", "")
}

func (s *side) Handshake(aflight.FlightService_HandshakeServer) error {
	return s.note("Handshake", "")
}

func (s *side) DoExchange(aflight.FlightService_DoExchangeServer) error {
	return s.note("DoExchange", "")
}

// streamingSide is a Flight SQL fake that streams the tickets starting
// with "stream" itself (one record of three rows) and leaves the others
// to its DoGet.
type streamingSide struct{ *side }

func (s streamingSide) StreamTicket(_ context.Context, ticket []byte) (*arrow.Schema, <-chan aflight.StreamChunk, bool, error) {
	if !strings.HasPrefix(string(ticket), "stream") {
		return nil, nil, false, nil
	}
	s.note("StreamTicket", string(ticket))
	sc := arrow.NewSchema([]arrow.Field{{Name: "v", Type: arrow.PrimitiveTypes.Int64}}, nil)
	b := arr.NewInt64Builder(memory.DefaultAllocator)
	defer b.Release()
	b.AppendValues([]int64{1, 2, 3}, nil)
	col := b.NewArray()
	defer col.Release()
	ch := make(chan aflight.StreamChunk, 1)
	ch <- aflight.StreamChunk{Data: arr.NewRecordBatch(sc, []arrow.Array{col}, 3)}
	close(ch)
	return sc, ch, true, nil
}

// serve starts a gRPC server with the mux over the two fakes and returns
// a client of it.
func serve(t *testing.T, native, sql aflight.FlightServer) aflight.Client {
	t.Helper()
	srv := grpc.NewServer()
	aflight.RegisterFlightServiceServer(srv, New(native, sql))
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(lis)
	t.Cleanup(srv.Stop)
	c, err := aflight.NewClientWithMiddleware(lis.Addr().String(), nil, nil, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// sqlCmd stands for a Flight SQL command: a serialized protobuf Any
// starts with 0x0a (the tag of its type_url).
const sqlCmd = "\x0a\x05sql.q"

func TestRouting(t *testing.T) {
	path := &aflight.FlightDescriptor{Type: aflight.DescriptorPATH, Path: []string{"a"}}
	jsonCmd := &aflight.FlightDescriptor{Type: aflight.DescriptorCMD, Cmd: []byte(` {"array":"a"}`)}
	cmd := &aflight.FlightDescriptor{Type: aflight.DescriptorCMD, Cmd: []byte(sqlCmd)}
	emptyCmd := &aflight.FlightDescriptor{Type: aflight.DescriptorCMD}
	put := func(fds ...*aflight.FlightDescriptor) func(context.Context, aflight.Client) error {
		return func(ctx context.Context, c aflight.Client) error {
			s, err := c.DoPut(ctx)
			if err != nil {
				return err
			}
			for _, fd := range fds {
				if err := s.Send(&aflight.FlightData{FlightDescriptor: fd, DataBody: []byte("x")}); err != nil {
					return err
				}
			}
			if err := s.CloseSend(); err != nil {
				return err
			}
			_, err = s.Recv()
			if errors.Is(err, io.EOF) {
				err = nil
			}
			return err
		}
	}
	drain := func(recv func() error) error {
		for {
			if err := recv(); err != nil {
				if errors.Is(err, io.EOF) {
					return nil
				}
				return err
			}
		}
	}
	get := func(ticket string) func(context.Context, aflight.Client) error {
		return func(ctx context.Context, c aflight.Client) error {
			s, err := c.DoGet(ctx, &aflight.Ticket{Ticket: []byte(ticket)})
			if err != nil {
				return err
			}
			return drain(func() error { _, err := s.Recv(); return err })
		}
	}
	action := func(typ string) func(context.Context, aflight.Client) error {
		return func(ctx context.Context, c aflight.Client) error {
			s, err := c.DoAction(ctx, &aflight.Action{Type: typ})
			if err != nil {
				return err
			}
			return drain(func() error { _, err := s.Recv(); return err })
		}
	}
	for _, tc := range []struct {
		name string
		call func(context.Context, aflight.Client) error
		want string
	}{
		{"GetSchema path", func(ctx context.Context, c aflight.Client) error { _, err := c.GetSchema(ctx, path); return err }, "native GetSchema path:a"},
		{"GetSchema JSON cmd", func(ctx context.Context, c aflight.Client) error { _, err := c.GetSchema(ctx, jsonCmd); return err }, `native GetSchema cmd: {"array":"a"}`},
		{"GetSchema SQL cmd", func(ctx context.Context, c aflight.Client) error { _, err := c.GetSchema(ctx, cmd); return err }, "sql GetSchema cmd:" + sqlCmd},
		{"GetSchema empty cmd", func(ctx context.Context, c aflight.Client) error { _, err := c.GetSchema(ctx, emptyCmd); return err }, "native GetSchema cmd:"},
		{"GetFlightInfo path", func(ctx context.Context, c aflight.Client) error { _, err := c.GetFlightInfo(ctx, path); return err }, "native GetFlightInfo path:a"},
		{"GetFlightInfo JSON cmd", func(ctx context.Context, c aflight.Client) error { _, err := c.GetFlightInfo(ctx, jsonCmd); return err }, `native GetFlightInfo cmd: {"array":"a"}`},
		{"GetFlightInfo SQL cmd", func(ctx context.Context, c aflight.Client) error { _, err := c.GetFlightInfo(ctx, cmd); return err }, "sql GetFlightInfo cmd:" + sqlCmd},
		{"PollFlightInfo path", func(ctx context.Context, c aflight.Client) error { _, err := c.PollFlightInfo(ctx, path); return err }, "native PollFlightInfo path:a"},
		{"PollFlightInfo SQL cmd", func(ctx context.Context, c aflight.Client) error { _, err := c.PollFlightInfo(ctx, cmd); return err }, "sql PollFlightInfo cmd:" + sqlCmd},
		{"DoGet JSON ticket", get(`{"array":"a"}`), `native DoGet {"array":"a"}`},
		{"DoGet empty ticket", get(""), "native DoGet "},
		{"DoGet SQL ticket", get(sqlCmd), "sql DoGet " + sqlCmd},
		{"DoGet SQL statement ticket", get("stream1"), "sql StreamTicket stream1"},
		{"DoPut path", put(path, nil), "native DoPut path:a +1"},
		{"DoPut JSON cmd", put(jsonCmd), `native DoPut cmd: {"array":"a"} +0`},
		{"DoPut SQL cmd", put(cmd, nil, nil), "sql DoPut cmd:" + sqlCmd + " +2"},
		{"DoPut no message", put(), "native DoPut error"},
		{"DoAction snake_case", action("list_arrays"), "native DoAction list_arrays"},
		{"DoAction CamelCase", action("CreatePreparedStatement"), "sql DoAction CreatePreparedStatement"},
		{"DoAction native one word", action("ping"), "native DoAction ping"},
		{"ListFlights", func(ctx context.Context, c aflight.Client) error {
			s, err := c.ListFlights(ctx, &aflight.Criteria{})
			if err != nil {
				return err
			}
			return drain(func() error { _, err := s.Recv(); return err })
		}, "native ListFlights "},
		{"Handshake", func(ctx context.Context, c aflight.Client) error {
			s, err := c.Handshake(ctx)
			if err != nil {
				return err
			}
			s.CloseSend()
			return drain(func() error { _, err := s.Recv(); return err })
		}, "native Handshake "},
		{"DoExchange", func(ctx context.Context, c aflight.Client) error {
			s, err := c.DoExchange(ctx)
			if err != nil {
				return err
			}
			s.CloseSend()
			return drain(func() error { _, err := s.Recv(); return err })
		}, "native DoExchange "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			native := &side{name: "native", actions: []string{"list_arrays", "ping"}}
			sql := &side{name: "sql", actions: []string{"CreatePreparedStatement"}}
			c := serve(t, native, streamingSide{sql})
			if err := tc.call(context.Background(), c); err != nil {
				t.Fatal(err)
			}
			calls := append(append([]string{}, native.calls...), sql.calls...)
			if len(calls) != 1 || calls[0] != tc.want {
				t.Fatalf("calls %q, want [%q]", calls, tc.want)
			}
		})
	}
}

// TestStreamedStatement: a statement ticket the SQL side streams itself
// reaches the client whole through the native send path.
func TestStreamedStatement(t *testing.T) {
	c := serve(t, &side{name: "native"}, streamingSide{&side{name: "sql"}})
	s, err := c.DoGet(context.Background(), &aflight.Ticket{Ticket: []byte("stream2")})
	if err != nil {
		t.Fatal(err)
	}
	r, err := aflight.NewRecordReader(s)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Release()
	var got []int64
	for r.Next() {
		got = append(got, r.RecordBatch().Column(0).(*arr.Int64).Int64Values()...)
	}
	if err := r.Err(); err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 || got[0] != 1 || got[2] != 3 {
		t.Fatalf("rows %v, want [1 2 3]", got)
	}
}

// TestListActions lists the native actions, then Flight SQL's.
func TestListActions(t *testing.T) {
	for _, tc := range []struct {
		name string
		sql  aflight.FlightServer
		want string
	}{
		{"both", &side{name: "sql", actions: []string{"CreatePreparedStatement", "ClosePreparedStatement"}}, "list_arrays drop_array CreatePreparedStatement ClosePreparedStatement"},
		{"native alone", nil, "list_arrays drop_array"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := serve(t, &side{name: "native", actions: []string{"list_arrays", "drop_array"}}, tc.sql)
			s, err := c.ListActions(context.Background(), &aflight.Empty{})
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for {
				a, err := s.Recv()
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, a.Type)
			}
			if strings.Join(got, " ") != tc.want {
				t.Fatalf("actions %q, want %q", got, tc.want)
			}
		})
	}
}

// TestNativeAlone: without a Flight SQL server every call is the native
// service's, Flight SQL's commands included (it refuses them).
func TestNativeAlone(t *testing.T) {
	native := &side{name: "native"}
	c := serve(t, native, nil)
	ctx := context.Background()
	if _, err := c.GetFlightInfo(ctx, &aflight.FlightDescriptor{Type: aflight.DescriptorCMD, Cmd: []byte(sqlCmd)}); err != nil {
		t.Fatal(err)
	}
	s, err := c.DoAction(ctx, &aflight.Action{Type: "CreatePreparedStatement"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Recv(); !errors.Is(err, io.EOF) {
		t.Fatal(err)
	}
	want := []string{"native GetFlightInfo cmd:" + sqlCmd, "native DoAction CreatePreparedStatement"}
	if strings.Join(native.calls, "|") != strings.Join(want, "|") {
		t.Fatalf("calls %q, want %q", native.calls, want)
	}
}
