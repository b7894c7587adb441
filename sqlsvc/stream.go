package sqlsvc

import (
	"context"

	"github.com/apache/arrow-go/v18/arrow"
	aflight "github.com/apache/arrow-go/v18/arrow/flight"
	pb "github.com/apache/arrow-go/v18/arrow/flight/gen/flight"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/tileflight/tileflight/calls"
)

// streamingServer is arrow-go's Flight SQL server over ours, which also
// hands the service statement streams to send itself (StreamTicket).
type streamingServer struct {
	aflight.FlightServer
	srv *Server
}

func (w streamingServer) StreamTicket(ctx context.Context, ticket []byte) (*arrow.Schema, <-chan aflight.StreamChunk, bool, error) {
	return w.srv.StreamTicket(ctx, ticket)
}

// StreamTicket resolves a statement or prepared-statement ticket into its
// result stream (mux.Streamer), so that the mux sends it as the service
// sends native results; other tickets (catalog commands) are left to
// arrow-go's Flight SQL DoGet (ok false). A ticket that is not a Flight
// SQL command at all is left there too, to be refused as before.
func (s *Server) StreamTicket(ctx context.Context, ticket []byte) (*arrow.Schema, <-chan aflight.StreamChunk, bool, error) {
	var anycmd anypb.Any
	if err := proto.Unmarshal(ticket, &anycmd); err != nil {
		return nil, nil, false, nil
	}
	cmd, err := anycmd.UnmarshalNew()
	if err != nil {
		return nil, nil, false, nil
	}
	switch cmd.(type) {
	case *pb.TicketStatementQuery, *pb.CommandPreparedStatementQuery:
		// CancelFlightInfo finds the call by its ticket.
		calls.From(ctx).SetTicket(ticket)
	}
	switch cmd := cmd.(type) {
	case *pb.TicketStatementQuery:
		sc, ch, err := s.DoGetStatement(ctx, cmd)
		return sc, ch, true, err
	case *pb.CommandPreparedStatementQuery:
		sc, ch, err := s.DoGetPreparedStatement(ctx, cmd)
		return sc, ch, true, err
	}
	return nil, nil, false, nil
}
