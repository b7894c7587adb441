package flightsvc

// This file is the cluster: several stateless daemons serving one bucket.
// A node knows its own advertised URL and its peers'; it checks each peer
// with the gRPC health service and spreads GetFlightInfo's endpoints over
// itself and the peers that answered. Every ticket is a self-contained
// query, so any node can serve any endpoint, and each endpoint lists every
// live node (its preferred one first) for a client to fail over to.

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	aflight "github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/rs/zerolog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
)

// ParseNodeURL checks a node URL: grpc://HOST:PORT or grpc+tls://HOST:PORT.
func ParseNodeURL(s string) (string, error) {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "grpc" && u.Scheme != "grpc+tls" && u.Scheme != "grpc+tcp") {
		return "", fmt.Errorf("node URL %q: want grpc://HOST:PORT or grpc+tls://HOST:PORT", s)
	}
	if _, port, err := net.SplitHostPort(u.Host); err != nil || port == "" || u.Path != "" && u.Path != "/" {
		return "", fmt.Errorf("node URL %q: want grpc://HOST:PORT or grpc+tls://HOST:PORT", s)
	}
	return u.Scheme + "://" + u.Host, nil
}

// Cluster tracks which peers are live.
type Cluster struct {
	self     string
	peers    []string
	interval time.Duration
	log      zerolog.Logger

	mu    sync.RWMutex
	live  map[string]bool
	slow  map[string]int // consecutive checks that timed out, per peer
	conns map[string]*grpc.ClientConn
	// next rotates the preferred node between calls, so that results of
	// one endpoint also spread over the nodes.
	next atomic.Uint64
}

// NewCluster returns the cluster of self (this node's advertised URL) and
// peers (the others; self among them is ignored, so every node may be
// given the same list). Peers count as down until their first check
// passes; call Start to begin checking.
func NewCluster(self string, peers []string, interval time.Duration, log zerolog.Logger) (*Cluster, error) {
	s, err := ParseNodeURL(self)
	if err != nil {
		return nil, fmt.Errorf("-advertise: %w", err)
	}
	c := &Cluster{self: s, interval: interval, log: log, live: map[string]bool{}, slow: map[string]int{}, conns: map[string]*grpc.ClientConn{}}
	if c.interval <= 0 {
		c.interval = 2 * time.Second
	}
	seen := map[string]bool{s: true}
	for _, p := range peers {
		p = strings.TrimSpace(p)
		if p == "" {
			continue
		}
		u, err := ParseNodeURL(p)
		if err != nil {
			return nil, fmt.Errorf("-peers: %w", err)
		}
		if seen[u] {
			continue
		}
		seen[u] = true
		c.peers = append(c.peers, u)
	}
	for _, p := range c.peers {
		u, _ := url.Parse(p)
		var creds credentials.TransportCredentials = insecure.NewCredentials()
		if u.Scheme == "grpc+tls" {
			// Peers' certificates are checked against the system roots.
			creds = credentials.NewClientTLSFromCert(nil, "")
		}
		conn, err := grpc.NewClient(u.Host, grpc.WithTransportCredentials(creds))
		if err != nil {
			return nil, fmt.Errorf("-peers %s: %w", p, err)
		}
		c.conns[p] = conn
	}
	return c, nil
}

// Self is this node's advertised URL.
func (c *Cluster) Self() string { return c.self }

// Start checks every peer now (waiting at most one interval) and then
// every interval until ctx ends.
func (c *Cluster) Start(ctx context.Context) {
	c.checkAll(ctx)
	go func() {
		t := time.NewTicker(c.interval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				for _, conn := range c.conns {
					conn.Close()
				}
				return
			case <-t.C:
				c.checkAll(ctx)
			}
		}
	}()
}

func (c *Cluster) checkAll(ctx context.Context) {
	var wg sync.WaitGroup
	for _, p := range c.peers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ok, timedOut := c.check(ctx, p)
			c.mu.Lock()
			was, known := c.live[p]
			// A peer that refuses or fails the check is down at once (a
			// killed node must leave the endpoints quickly); one that
			// only answers late is busy, not gone: it stays in until it
			// has timed out slowChecks times in a row.
			if timedOut && was {
				c.slow[p]++
				ok = c.slow[p] < slowChecks
			} else {
				c.slow[p] = 0
			}
			c.live[p] = ok
			c.mu.Unlock()
			if !known || was != ok {
				ev := c.log.Info()
				if !ok {
					ev = c.log.Warn()
				}
				ev.Str("peer", p).Bool("live", ok).Msg("cluster: peer health changed")
			}
		}()
	}
	wg.Wait()
}

// slowChecks is how many health checks in a row a live peer may time out
// before it is left out of the endpoints.
const slowChecks = 3

// check asks the peer's health service whether it serves Flight; timedOut
// says the only fault was that no answer came in time.
func (c *Cluster) check(ctx context.Context, peer string) (ok, timedOut bool) {
	cctx, cancel := context.WithTimeout(ctx, min(c.interval, time.Second))
	defer cancel()
	resp, err := healthpb.NewHealthClient(c.conns[peer]).Check(cctx,
		&healthpb.HealthCheckRequest{Service: "arrow.flight.protocol.FlightService"})
	if err != nil {
		return false, status.Code(err) == codes.DeadlineExceeded && ctx.Err() == nil
	}
	return resp.GetStatus() == healthpb.HealthCheckResponse_SERVING, false
}

// Nodes returns this node and the live peers, in the configured order.
func (c *Cluster) Nodes() []string {
	c.mu.RLock()
	defer c.mu.RUnlock()
	out := []string{c.self}
	for _, p := range c.peers {
		if c.live[p] {
			out = append(out, p)
		}
	}
	return out
}

// assign gives each of n endpoints its locations: a preferred node,
// taken round-robin (starting where the last call left off), then every
// other live node in turn, for fail-over.
func (c *Cluster) assign(eps []*aflight.FlightEndpoint) {
	nodes := c.Nodes()
	start := int(c.next.Add(uint64(len(eps))) - uint64(len(eps)))
	for i, ep := range eps {
		first := (start + i) % len(nodes)
		locs := make([]*aflight.Location, 0, len(nodes))
		for j := range nodes {
			locs = append(locs, &aflight.Location{Uri: nodes[(first+j)%len(nodes)]})
		}
		ep.Location = locs
	}
}
