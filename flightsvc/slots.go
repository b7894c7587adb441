package flightsvc

import (
	"context"
	"sync"
	"time"

	"google.golang.org/grpc/peer"

	"github.com/tileflight/tileflight/access"
	"github.com/tileflight/tileflight/errkind"
)

// peerSlots counts the stream slots each peer holds, and the calls
// waiting for one.
type peerSlots struct {
	mu      sync.Mutex
	held    map[string]int
	waiting int
}

// peerKey names the client a call counts against: the credential's name
// when the call carries one (several machines of one team share its
// share), else the client's connection (its address and port: behind a
// proxy, or on one machine, many users share an IP address, and a
// client's calls share its connection).
func peerKey(ctx context.Context) string {
	if p := access.FromContext(ctx); p != nil && p.Name != "" {
		return "cred:" + p.Name
	}
	if p, ok := peer.FromContext(ctx); ok && p.Addr != nil {
		return "conn:" + p.Addr.String()
	}
	return ""
}

// acquireStream takes one of the concurrent stream slots, or says why not.
// A peer holds at most its share of the slots (-max-queries-per-peer), so
// that clients that open streams and never read them cannot take every
// slot (the stall watchdog ends those); a call that finds every slot
// taken waits for one (-queue-wait, at most until its deadline) in a
// bounded queue, and is refused with RESOURCE_EXHAUSTED after that.
func (s *Service) acquireStream(ctx context.Context) (release func(), err error) {
	key := peerKey(ctx)
	s.slots.mu.Lock()
	if s.slots.held == nil {
		s.slots.held = map[string]int{}
	}
	if s.slots.held[key] >= s.cfg.MaxQueriesPerPeer {
		n := s.slots.held[key]
		s.slots.mu.Unlock()
		return nil, errkind.Errorf(errkind.ResourceExhausted,
			"this client already runs %d streams (the -max-queries-per-peer limit); retry when one ends", n)
	}
	s.slots.held[key]++
	s.slots.mu.Unlock()
	giveBack := func() {
		s.slots.mu.Lock()
		if s.slots.held[key]--; s.slots.held[key] <= 0 {
			delete(s.slots.held, key)
		}
		s.slots.mu.Unlock()
	}
	got := func() (func(), error) {
		end := s.idle.Begin()
		return func() { <-s.streams; giveBack(); end() }, nil
	}
	select {
	case s.streams <- struct{}{}:
		return got()
	default:
	}
	full := func() error {
		giveBack()
		return errkind.Errorf(errkind.ResourceExhausted,
			"%d streams are already running (the -max-queries limit) and none ended within -queue-wait; retry later", cap(s.streams))
	}
	if s.cfg.QueueWait <= 0 {
		return nil, full()
	}
	s.slots.mu.Lock()
	if s.slots.waiting >= 4*cap(s.streams) {
		s.slots.mu.Unlock()
		return nil, full()
	}
	s.slots.waiting++
	s.slots.mu.Unlock()
	defer func() {
		s.slots.mu.Lock()
		s.slots.waiting--
		s.slots.mu.Unlock()
	}()
	t := time.NewTimer(s.cfg.QueueWait)
	defer t.Stop()
	select {
	case s.streams <- struct{}{}:
		return got()
	case <-t.C:
		return nil, full()
	case <-ctx.Done():
		giveBack()
		return nil, context.Cause(ctx)
	}
}
