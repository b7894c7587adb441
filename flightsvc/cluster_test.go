package flightsvc

import (
	"context"
	"net"
	"sync/atomic"
	"testing"
	"time"

	aflight "github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/rs/zerolog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

func TestParseNodeURL(t *testing.T) {
	for _, c := range []struct {
		in, want string
		ok       bool
	}{
		{"grpc://127.0.0.1:8815", "grpc://127.0.0.1:8815", true},
		{"grpc+tls://node-a.example:443", "grpc+tls://node-a.example:443", true},
		{"grpc://h:1/", "grpc://h:1", true},
		{"grpc://h", "", false},
		{"http://h:1", "", false},
		{"h:1", "", false},
		{"grpc://h:1/path", "", false},
	} {
		got, err := ParseNodeURL(c.in)
		if (err == nil) != c.ok || got != c.want {
			t.Errorf("ParseNodeURL(%q) = %q, %v", c.in, got, err)
		}
	}
}

func TestClusterAssign(t *testing.T) {
	self := "grpc://127.0.0.1:1"
	peers := []string{"grpc://127.0.0.1:2", self, "grpc://127.0.0.1:3", "grpc://127.0.0.1:2"}
	c, err := NewCluster(self, peers, time.Second, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	if len(c.peers) != 2 {
		t.Fatalf("peers %v: self and duplicates should go", c.peers)
	}
	eps := func(n int) []*aflight.FlightEndpoint {
		out := make([]*aflight.FlightEndpoint, n)
		for i := range out {
			out[i] = &aflight.FlightEndpoint{}
		}
		return out
	}
	// No peer checked yet: only this node.
	e := eps(3)
	c.assign(e)
	for _, ep := range e {
		if len(ep.Location) != 1 || ep.Location[0].Uri != self {
			t.Fatalf("locations %v", ep.Location)
		}
	}
	c.live["grpc://127.0.0.1:2"] = true
	c.live["grpc://127.0.0.1:3"] = true
	e = eps(6)
	c.assign(e)
	count := map[string]int{}
	for _, ep := range e {
		if len(ep.Location) != 3 {
			t.Fatalf("want every live node listed, got %v", ep.Location)
		}
		seen := map[string]bool{}
		for _, l := range ep.Location {
			seen[l.Uri] = true
		}
		if len(seen) != 3 {
			t.Fatalf("duplicate locations %v", ep.Location)
		}
		count[ep.Location[0].Uri]++
	}
	for _, n := range []string{self, "grpc://127.0.0.1:2", "grpc://127.0.0.1:3"} {
		if count[n] != 2 {
			t.Fatalf("preferred counts %v: want 2 each", count)
		}
	}
	// A peer that fails its check is left out.
	c.live["grpc://127.0.0.1:3"] = false
	e = eps(4)
	c.assign(e)
	for _, ep := range e {
		for _, l := range ep.Location {
			if l.Uri == "grpc://127.0.0.1:3" {
				t.Fatal("a down peer is still offered")
			}
		}
	}
	if _, err := NewCluster("127.0.0.1:1", nil, 0, zerolog.Nop()); err == nil {
		t.Fatal("-advertise without a scheme accepted")
	}
}

// TestClusterSlowPeerStays checks the health rule: a live peer whose
// checks only time out (a busy node) stays in for slowChecks-1 checks, and
// a peer that refuses connections (a killed node) is left out at once.
func TestClusterSlowPeerStays(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var delay atomic.Int64
	srv := grpc.NewServer(grpc.UnaryInterceptor(func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		time.Sleep(time.Duration(delay.Load()))
		return h(ctx, req)
	}))
	hs := health.NewServer()
	hs.SetServingStatus("arrow.flight.protocol.FlightService", healthpb.HealthCheckResponse_SERVING)
	healthpb.RegisterHealthServer(srv, hs)
	go srv.Serve(lis)
	defer srv.Stop()

	peer := "grpc://" + lis.Addr().String()
	c, err := NewCluster("grpc://127.0.0.1:1", []string{peer}, 100*time.Millisecond, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	live := func() bool { return len(c.Nodes()) == 2 }
	if c.checkAll(ctx); !live() {
		t.Fatal("a serving peer is not live")
	}
	delay.Store(int64(300 * time.Millisecond))
	for i := 1; i < slowChecks; i++ {
		if c.checkAll(ctx); !live() {
			t.Fatalf("left out after %d slow checks; want %d", i, slowChecks)
		}
	}
	if c.checkAll(ctx); live() {
		t.Fatalf("still live after %d slow checks", slowChecks)
	}
	delay.Store(0)
	if c.checkAll(ctx); !live() {
		t.Fatal("a peer answering again is not live")
	}
	srv.Stop()
	if c.checkAll(ctx); live() {
		t.Fatal("a stopped peer is still live")
	}
}
