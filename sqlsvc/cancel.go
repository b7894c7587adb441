package sqlsvc

import (
	"context"

	aflight "github.com/apache/arrow-go/v18/arrow/flight"

	"github.com/tileflight/tileflight/calls"
	"github.com/tileflight/tileflight/errkind"
)

// SetCalls gives the server the daemon's registry of running calls, which
// CancelFlightInfo stops statements through.
func (s *Server) SetCalls(r *calls.Registry) { s.calls = r }

// CancelFlightInfo stops the running DoGet calls that redeem a ticket of
// the FlightInfo: their clients get CANCELLED and the statements' memory
// is freed at once. The answer is CANCELLED when at least one was
// stopped. A ticket carries its whole statement and no call is kept
// between calls, so a FlightInfo none of whose tickets is being redeemed
// on this daemon (not started yet, finished, or on another node) is
// NOT_FOUND, as the Flight spec asks of a query it does not know. A
// read-only token stops only its own calls.
func (s *Server) CancelFlightInfo(ctx context.Context, req *aflight.CancelFlightInfoRequest) (aflight.CancelFlightInfoResult, error) {
	fail := func(err error) (aflight.CancelFlightInfoResult, error) {
		return aflight.CancelFlightInfoResult{Status: aflight.CancelStatusUnspecified}, s.eng.Status(err)
	}
	info := req.GetInfo()
	tickets := map[string]bool{}
	for _, ep := range info.GetEndpoint() {
		if t := ep.GetTicket().GetTicket(); len(t) > 0 {
			tickets[string(t)] = true
		}
	}
	if len(tickets) == 0 {
		return fail(errkind.Errorf(errkind.InvalidArgument, "CancelFlightInfo: the FlightInfo has no endpoint with a ticket (send the FlightInfo that GetFlightInfo returned)"))
	}
	if s.calls == nil {
		return aflight.CancelFlightInfoResult{Status: aflight.CancelStatusNotCancellable}, nil
	}
	n := s.calls.CancelWhere(ctx, calls.ErrCancelledFlightInfo, func(c *calls.Call) bool {
		t := c.Info.Ticket()
		return t != nil && tickets[string(t)]
	})
	if n == 0 {
		return fail(errkind.Errorf(errkind.NotFound, "CancelFlightInfo: no running call redeems a ticket of this FlightInfo on this server (it has finished, has not started, or runs on another node; a read-only token sees only its own)"))
	}
	return aflight.CancelFlightInfoResult{Status: aflight.CancelStatusCancelled}, nil
}
