package calls

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/tileflight/tileflight/access"
)

func as(name string, level access.Level) context.Context {
	return access.WithPrincipal(context.Background(), &access.Principal{Name: name, Level: level})
}

func TestListAndCancelVisibility(t *testing.T) {
	r := NewRegistry(0)
	ctxA, a, doneA := r.Start(WithInfo(as("alice", access.ReadOnly), &Info{}), "/arrow.flight.protocol.FlightService/DoGet")
	defer doneA()
	a.Info.SetArray("lab/x")
	_, b, doneB := r.Start(WithInfo(as("bob", access.ReadOnly), &Info{}), "/arrow.flight.protocol.FlightService/DoPut")
	defer doneB()
	b.Info.SetSQL("SELECT 1")

	cases := []struct {
		who  context.Context
		want []string
	}{
		{as("alice", access.ReadOnly), []string{a.ID}},
		{as("bob", access.ReadOnly), []string{b.ID}},
		{as("root", access.ReadWrite), []string{a.ID, b.ID}},
		{context.Background(), []string{a.ID, b.ID}}, // authentication off
	}
	for _, c := range cases {
		var got []string
		for _, s := range r.List(c.who) {
			got = append(got, s.ID)
		}
		if len(got) != len(c.want) || len(got) > 0 && got[0] != c.want[0] {
			t.Errorf("%v: %v, want %v", access.FromContext(c.who), got, c.want)
		}
	}
	l := r.List(context.Background())
	if l[0].Kind != "doget" || l[0].Array != "lab/x" || l[1].Kind != "sql" || l[1].SQL != "SELECT 1" || l[0].User != "alice" {
		t.Errorf("snapshots: %+v", l)
	}
	if err := r.Cancel(as("bob", access.ReadOnly), a.ID); !errors.Is(err, ErrNotYours) {
		t.Errorf("bob cancels alice's: %v", err)
	}
	if err := r.Cancel(as("root", access.ReadWrite), "nope"); !errors.Is(err, ErrUnknownCall) {
		t.Errorf("unknown id: %v", err)
	}
	if err := r.Cancel(as("alice", access.ReadOnly), a.ID); err != nil {
		t.Fatal(err)
	}
	if !errors.Is(context.Cause(ctxA), ErrCancelled) || !errors.Is(ctxA.Err(), context.Canceled) {
		t.Errorf("cancelled call's context: %v / %v", ctxA.Err(), context.Cause(ctxA))
	}
	doneA()
	if r.Count() != 1 {
		t.Errorf("%d calls after one ended", r.Count())
	}
}

func TestStallWatchdog(t *testing.T) {
	r := NewRegistry(50 * time.Millisecond)
	ctx, c, done := r.Start(WithInfo(context.Background(), &Info{}), "/arrow.flight.protocol.FlightService/DoGet")
	defer done()
	busy, cBusy, doneBusy := r.Start(WithInfo(context.Background(), &Info{}), "/arrow.flight.protocol.FlightService/DoGet")
	defer doneBusy()
	_ = cBusy
	wait := c.Info.Waiting() // blocked on its client from now on
	defer wait()
	wctx, stop := context.WithCancel(context.Background())
	defer stop()
	go r.Watch(wctx)
	select {
	case <-ctx.Done():
		if !errors.Is(context.Cause(ctx), ErrStalled) {
			t.Errorf("cause %v", context.Cause(ctx))
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a call waiting on its client was not stopped")
	}
	if busy.Err() != nil {
		t.Error("a call that is not waiting was stopped")
	}
}

func TestSQLTextIsCut(t *testing.T) {
	var i Info
	long := make([]byte, 3000)
	for k := range long {
		long[k] = 'x'
	}
	i.SetSQL(string(long))
	if len(i.SQL()) != MaxSQLText || i.Kind() != "sql" {
		t.Errorf("%d %q", len(i.SQL()), i.Kind())
	}
	i.AddArrays("a", "b")
	i.AddArrays("b", "c")
	if got := i.Arrays(); len(got) != 3 {
		t.Errorf("arrays %v", got)
	}
}

func TestCancelWhereByTicket(t *testing.T) {
	r := NewRegistry(0)
	const get = "/arrow.flight.protocol.FlightService/DoGet"
	ctxA, a, doneA := r.Start(WithInfo(as("alice", access.ReadOnly), &Info{}), get)
	defer doneA()
	ticket := []byte("ticket-1")
	a.Info.SetTicket(ticket)
	ticket[0] = 'X' // the Info keeps its own copy
	ctxB, b, doneB := r.Start(WithInfo(as("bob", access.ReadOnly), &Info{}), get)
	defer doneB()
	b.Info.SetTicket([]byte("ticket-1"))
	ctxC, _, doneC := r.Start(WithInfo(as("alice", access.ReadOnly), &Info{}), get) // no ticket
	defer doneC()
	match := func(c *Call) bool { return string(c.Info.Ticket()) == "ticket-1" }

	// A read-only caller stops only its own call with that ticket.
	if n := r.CancelWhere(as("alice", access.ReadOnly), ErrCancelledFlightInfo, match); n != 1 {
		t.Fatalf("alice's cancel stopped %d calls, want 1", n)
	}
	if !errors.Is(context.Cause(ctxA), ErrCancelledFlightInfo) || !errors.Is(ctxA.Err(), context.Canceled) {
		t.Errorf("alice's call: %v / %v", ctxA.Err(), context.Cause(ctxA))
	}
	if ctxB.Err() != nil || ctxC.Err() != nil {
		t.Errorf("other calls stopped: bob %v, ticketless %v", ctxB.Err(), ctxC.Err())
	}
	// A writer stops anyone's.
	if n := r.CancelWhere(as("root", access.ReadWrite), ErrCancelledFlightInfo, match); n != 2 {
		// alice's (already cancelled, still registered) and bob's
		t.Fatalf("root's cancel stopped %d calls, want 2", n)
	}
	if !errors.Is(context.Cause(ctxB), ErrCancelledFlightInfo) || ctxC.Err() != nil {
		t.Errorf("bob's call %v, ticketless %v", context.Cause(ctxB), ctxC.Err())
	}
	if (&Info{}).Ticket() != nil {
		t.Error("a new Info has a ticket")
	}
}
