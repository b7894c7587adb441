// Package idletrim gives back memory the daemon keeps between queries,
// in stages, once no call has run for a while: first the bufpool free
// lists (DropPools), later, if the daemon stays idle, the free heap to
// the operating system (ReturnToOS).
//
// Why the free lists: pooled buffers are live heap. The next query's
// collections count them, and at GOGC=50 its heap may grow to 1.5 times
// what is live, so up to bufpool.MaxPooled of idle buffers lets any query
// (a dense scan, which does not use the pool) peak higher. Dropping them
// costs the next query that needs that memory: it allocates afresh and
// faults the pages back (measured: ~25 ms on a 10 M cell sparse scan,
// ~15 ms over twenty 1 % boxes), never a client's back-to-back queries.
//
// Why the OS only later: the runtime keeps freed heap resident (its
// scavenger returns only what exceeds the last collection's heap goal, and
// an idle daemon does not collect), so an idle daemon stays at the RSS of
// its last large query. debug.FreeOSMemory returns it, but the next query
// then faults every page back in, zeroed by the kernel: about 2.7 us a
// page here, 37 000 more faults and ~0.05-0.1 CPU-s on a 256 MiB dense
// DoGet (18 % of its CPU). That is worth paying only after an idle period
// that dwarfs it, never between a client's queries.
package idletrim

import (
	"cmp"
	"runtime/debug"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tileflight/tileflight/internal/bufpool"
)

// Defaults of the daemon's two stages (-idle-trim, -idle-release).
const (
	// DefaultDropPools is long enough that a user's queries seconds
	// apart keep their pools: the first pooled query after a trim pays
	// fresh allocations and a collection (a 10 M cell sparse scan ~25 ms,
	// 7 %), which a daemon busy with bursts should not pay every second;
	// after half a minute of idleness it is a small price.
	DefaultDropPools = 30 * time.Second
	// DefaultReturnToOS is long enough that refaulting a few hundred MiB
	// (~0.2 CPU-s) is well below 1 % of the idle time it follows.
	DefaultReturnToOS = time.Minute
)

// Stage is something to do once the work has been idle for After.
type Stage struct {
	After time.Duration
	Do    func()
}

// Trimmer runs its stages, in order, once per idle period of the work it
// is told about (Begin): a stage runs when the work has been idle for its
// After. A nil *Trimmer never trims.
type Trimmer struct {
	stages []Stage
	timer  *time.Timer
	runs   atomic.Int64

	mu        sync.Mutex
	active    int
	idleSince time.Time
	next      int // the next stage to run in this idle period; len(stages): none
}

// New returns a Trimmer over the stages with After > 0 (nil when there
// are none). They run in order of After, stages with the same After in
// the order given. A stage runs with new work held off until it returns,
// so that it never overlaps a query; it must not call Begin. No stage
// runs before the first work has ended.
func New(stages ...Stage) *Trimmer {
	t := &Trimmer{}
	for _, s := range stages {
		if s.After > 0 {
			t.stages = append(t.stages, s)
		}
	}
	if len(t.stages) == 0 {
		return nil
	}
	slices.SortStableFunc(t.stages, func(a, b Stage) int { return cmp.Compare(a.After, b.After) })
	t.next = len(t.stages)
	t.timer = time.AfterFunc(time.Hour, t.fire)
	t.timer.Stop()
	return t
}

// Begin marks work (a query, a write, an action) as running until the
// function it returns is called (once; later calls do nothing).
func (t *Trimmer) Begin() (end func()) {
	if t == nil {
		return func() {}
	}
	t.mu.Lock()
	t.active++
	t.next = len(t.stages) // the idle period is over
	t.mu.Unlock()
	var done atomic.Bool
	return func() {
		if !done.CompareAndSwap(false, true) {
			return
		}
		t.mu.Lock()
		defer t.mu.Unlock()
		if t.active--; t.active == 0 {
			t.idleSince, t.next = time.Now(), 0
			t.timer.Reset(t.stages[0].After)
		}
	}
}

// fire runs the stages whose time has come in the current idle period and
// arms the timer for the next one. A timer may fire late, after new work
// began (nothing to do then) or ended again (the idle time says).
func (t *Trimmer) fire() {
	t.mu.Lock()
	defer t.mu.Unlock()
	for t.next < len(t.stages) { // Begin ends the idle period: next = len
		s := t.stages[t.next]
		if wait := s.After - time.Since(t.idleSince); wait > 0 {
			t.timer.Reset(wait)
			return
		}
		s.Do()
		t.next++
		t.runs.Add(1)
	}
}

// Runs is how many stages have run (tests, metrics).
func (t *Trimmer) Runs() int64 {
	if t == nil {
		return 0
	}
	return t.runs.Load()
}

// DropPools is the daemon's first stage: it empties the bufpool free
// lists and returns the bytes they held.
func DropPools() int64 { return bufpool.Trim() }

// ReturnToOS is the daemon's second stage: a collection, then every free
// page of the heap returned to the operating system (debug.FreeOSMemory).
func ReturnToOS() { debug.FreeOSMemory() }
