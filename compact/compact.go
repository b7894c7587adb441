// Package compact owns automatic compaction: when an array has gathered
// enough fragments since its last consolidation, the daemon consolidates
// them in the background (a fragments consolidation by TileDB's rules,
// package lifecycle) with a bounded number of workers, and vacuums what
// that made obsolete once the vacuum grace has passed, so that queries
// opened before still read their snapshot. In a cluster one node at a
// time compacts an array: a lease object inside the array (Leases), with
// an expiry, renewed while the work runs.
//
// Triggers: Notify after every committed write (cheap: a counter), and a
// scan of every array when the compactor starts (writes made while no
// daemon ran, vacuums a killed daemon left pending). The array is only
// opened once its counter reaches the threshold; the count that decides
// is the array's own (visible fragments that are not consolidations), so
// writes through other nodes count too.
package compact

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/tileflight/tileflight/errkind"
	"github.com/tileflight/tileflight/format/names"
	"github.com/tileflight/tileflight/lifecycle"
	"github.com/tileflight/tileflight/storage"
	"github.com/tileflight/tileflight/tdbarray"
)

// Recorder receives what compactions did (package metrics implements it).
type Recorder interface {
	// CompactionDone records one compaction: the fragments it merged (0
	// when TileDB's rules left nothing to do), how long it took, and its
	// error.
	CompactionDone(merged int, took time.Duration, err error)
	// VacuumDone records one vacuum after a compaction.
	VacuumDone(removed int, err error)
}

// Options configure a Compactor.
type Options struct {
	// After is the number of fragments newer than the last consolidation
	// at which an array is compacted; <= 0 turns compaction off.
	After int
	// Workers is how many arrays are compacted at once (default 1); each
	// compaction also reads with this many tile workers.
	Workers int
	// VacuumGrace is how long after a compaction its superseded fragments
	// are vacuumed (queries that opened the array before keep reading
	// them until then); it is also the age at which that vacuum removes
	// uncommitted fragments, as the vacuum action does.
	VacuumGrace time.Duration
	// LeaseTTL is how long a compaction lease lasts unless renewed
	// (default 1m); a node that dies holding one blocks the array's
	// compaction that long.
	LeaseTTL time.Duration
	// Owner names this process in leases (unique per process).
	Owner string
	// EncryptionKey is the daemon's key, for encrypted arrays (arrays
	// it cannot open are skipped).
	EncryptionKey []byte
	// MaxFragmentBytes is passed to the consolidation's writer.
	MaxFragmentBytes int64
	// Arrays lists every array, for the scan at start (nil: no scan).
	Arrays func(ctx context.Context) ([]string, error)
	// Log receives a line per compaction and vacuum, and every failure.
	Log zerolog.Logger
	// Metrics, when set, records compactions and vacuums.
	Metrics Recorder
}

// Status is what the compactor last did to one array in this process.
type Status struct {
	// At is when the last compaction finished.
	At time.Time
	// Merged is the fragments it merged.
	Merged int
	// Written lists the files it wrote.
	Written []string
	// VacuumAt is when its vacuum is due (zero: none pending).
	VacuumAt time.Time
}

type jobKind int

const (
	jobCompact jobKind = iota
	jobVacuum
)

type job struct {
	array string
	kind  jobKind
}

// arrayState is the compactor's bookkeeping for one array.
type arrayState struct {
	pending  int  // fragments written since the last count
	queued   bool // a compact job is queued
	running  bool
	again    bool // the threshold was reached again while running
	busy     bool // a compaction, vacuum or Exclusive call holds the array here
	vacTimer *time.Timer
	status   Status
}

// Compactor runs compactions in the background. Its methods are safe for
// concurrent use; a nil *Compactor does nothing.
type Compactor struct {
	st     storage.Store
	opt    Options
	leases *Leases
	jobs   chan job

	mu     sync.Mutex
	arrays map[string]*arrayState
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	closed bool
}

// localBusyRetry is how soon a compaction or vacuum that found the array
// busy on this node (another of them, or an action) tries again.
const localBusyRetry = time.Second

// testHook, when set (tests), hears each consolidation start and end.
var testHook func(array string, start bool)

// queueLen bounds the queued jobs; Notify drops what does not fit (the
// next write or the next start's scan triggers it again).
const queueLen = 4096

// New returns a compactor over st; Start sets it to work. It returns nil
// when opt.After <= 0 (compaction off).
func New(st storage.Store, opt Options) *Compactor {
	if opt.After <= 0 {
		return nil
	}
	if opt.Workers <= 0 {
		opt.Workers = 1
	}
	if opt.LeaseTTL <= 0 {
		opt.LeaseTTL = time.Minute
	}
	if opt.Owner == "" {
		opt.Owner = "tileflight"
	}
	return &Compactor{st: st, opt: opt, leases: NewLeases(st, opt.Owner, opt.LeaseTTL),
		jobs: make(chan job, queueLen), arrays: map[string]*arrayState{}}
}

// Start starts the workers and the scan of every array; they stop when
// ctx ends or Close is called.
func (c *Compactor) Start(ctx context.Context) {
	if c == nil {
		return
	}
	c.mu.Lock()
	c.ctx, c.cancel = context.WithCancel(ctx)
	c.mu.Unlock()
	for range c.opt.Workers {
		c.wg.Add(1)
		go c.work()
	}
	if c.opt.Arrays != nil {
		c.wg.Add(1)
		go c.scan()
	}
}

// Close stops the compactor and waits for running compactions to stop at
// a safe point: a compaction cancelled before its commit leaves nothing
// visible (its staged fragment is deleted), one cancelled after it has
// committed completes on the next start.
func (c *Compactor) Close() {
	if c == nil {
		return
	}
	c.mu.Lock()
	c.closed = true
	if c.cancel != nil {
		c.cancel()
	}
	for _, s := range c.arrays {
		if s.vacTimer != nil {
			s.vacTimer.Stop()
		}
	}
	c.mu.Unlock()
	c.wg.Wait()
}

// Notify says that a write committed fragments to array. It never blocks.
func (c *Compactor) Notify(array string, fragments int) {
	if c == nil || fragments <= 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.stateLocked(array)
	s.pending += fragments
	if s.pending >= c.opt.After {
		c.queueLocked(array, s)
	}
}

// Status returns what this process last did to array.
func (c *Compactor) Status(array string) (Status, bool) {
	if c == nil {
		return Status{}, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	s, ok := c.arrays[array]
	if !ok || s.status.At.IsZero() {
		return Status{}, false
	}
	return s.status, true
}

func (c *Compactor) stateLocked(array string) *arrayState {
	s, ok := c.arrays[array]
	if !ok {
		s = &arrayState{}
		c.arrays[array] = s
	}
	return s
}

func (c *Compactor) queueLocked(array string, s *arrayState) {
	switch {
	case c.closed || s.queued:
	case s.running:
		s.again = true
	default:
		select {
		case c.jobs <- job{array: array, kind: jobCompact}:
			s.queued = true
		default: // full: a later write queues it
		}
	}
}

// scan checks every array once: a compaction when it has enough
// fragments, a vacuum when a compaction's .vac file is waiting.
func (c *Compactor) scan() {
	defer c.wg.Done()
	ctx := c.ctx
	arrays, err := c.opt.Arrays(ctx)
	if err != nil {
		if ctx.Err() == nil {
			c.opt.Log.Warn().Err(err).Msg("compaction: listing the arrays to scan")
		}
		return
	}
	for _, a := range arrays {
		if strings.HasSuffix(a, ".b2nd") {
			continue
		}
		if due, ok := c.pendingVacuum(ctx, a); ok {
			c.scheduleVacuum(a, due)
		}
		c.mu.Lock()
		s := c.stateLocked(a)
		s.pending = max(s.pending, c.opt.After)
		if !s.queued && !s.running && !c.closed {
			s.queued = true
			c.mu.Unlock()
			select {
			case c.jobs <- job{array: a, kind: jobCompact}:
			case <-ctx.Done():
				return
			}
			continue
		}
		c.mu.Unlock()
	}
}

// pendingVacuum reports when the newest fragment .vac file of array
// (what a compaction left for its vacuum) becomes due.
func (c *Compactor) pendingVacuum(ctx context.Context, array string) (time.Time, bool) {
	es, err := c.st.List(ctx, storage.Join(array, names.CommitsDir))
	if err != nil {
		return time.Time{}, false
	}
	var newest time.Time
	found := false
	for _, e := range es {
		// A .vac file, or the intent file of a compaction killed before
		// it wrote its .vac file (the vacuum rolls it forward).
		if e.IsDir || !strings.Contains(e.Name, names.ExtVacuum) {
			continue
		}
		found = true
		if e.ModTime.After(newest) {
			newest = e.ModTime
		}
	}
	return newest.Add(c.opt.VacuumGrace), found
}

func (c *Compactor) scheduleVacuum(array string, at time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return
	}
	s := c.stateLocked(array)
	if s.vacTimer != nil {
		s.vacTimer.Stop()
	}
	s.status.VacuumAt = at
	s.vacTimer = time.AfterFunc(time.Until(at), func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.closed {
			return
		}
		select {
		case c.jobs <- job{array: array, kind: jobVacuum}:
		default:
			// Full: the next compaction or start schedules it again.
		}
	})
}

// take marks array busy here; false when it already is.
func (c *Compactor) take(array string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.stateLocked(array)
	if s.busy {
		return false
	}
	s.busy = true
	return true
}

func (c *Compactor) give(array string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.stateLocked(array).busy = false
}

// Exclusive runs fn while no compaction or vacuum of array runs, on this
// node or (through the array's lease) on another: the consolidate and
// vacuum actions run under it, so that two consolidations of one array
// never overlap (their results would both stay visible; an array with
// duplicates would read some cells twice). When one runs, it fails at
// once with Unavailable: retry later. On a nil Compactor (compaction
// off) it just runs fn.
func (c *Compactor) Exclusive(ctx context.Context, array string, fn func(context.Context) error) error {
	if c == nil {
		return fn(ctx)
	}
	if !c.take(array) {
		return errkind.Errorf(errkind.Unavailable, "array %q: this node is compacting it now (-compact-after); retry when it is done", array)
	}
	defer c.give(array)
	lctx, stop, err := c.hold(ctx, array)
	if err != nil {
		return err
	}
	if lctx == nil {
		return errkind.Errorf(errkind.Unavailable, "array %q: another node is compacting it now (it holds the array's compaction lease, at most -compact-lease more); retry when it is done", array)
	}
	defer stop()
	return fn(lctx)
}

// retryAfter queues a compaction check of array after d.
func (c *Compactor) retryAfter(array string, d time.Duration) {
	time.AfterFunc(d, func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		if s, ok := c.arrays[array]; ok && s.pending >= c.opt.After {
			c.queueLocked(array, s)
		}
	})
}

func (c *Compactor) work() {
	defer c.wg.Done()
	for {
		select {
		case <-c.ctx.Done():
			return
		case j := <-c.jobs:
			switch j.kind {
			case jobCompact:
				c.runCompact(j.array)
			case jobVacuum:
				c.runVacuum(j.array)
			}
		}
	}
}

func (c *Compactor) runCompact(array string) {
	c.mu.Lock()
	s := c.stateLocked(array)
	s.queued, s.running, s.again = false, true, false
	c.mu.Unlock()
	pending, st, _ := c.compact(c.ctx, array)
	c.mu.Lock()
	s.running = false
	s.pending = pending
	if st != nil {
		s.status = *st
	}
	if s.again {
		// More writes came meanwhile: look again.
		s.again = false
		c.queueLocked(array, s)
	}
	c.mu.Unlock()
	if st != nil {
		c.scheduleVacuum(array, st.VacuumAt)
	}
}

// keyOf returns the key to open array with: the daemon's when the array
// is encrypted.
func (c *Compactor) keyOf(ctx context.Context, array string) ([]byte, error) {
	file, enc := tdbarray.SchemaEncrypted(ctx, c.st, array)
	if !enc {
		return nil, nil
	}
	if len(c.opt.EncryptionKey) == 0 {
		return nil, fmt.Errorf("schema %s: %w", file, tdbarray.ErrKeyRequired)
	}
	return c.opt.EncryptionKey, nil
}

// Newer counts the visible fragments of array that are not the result of
// a consolidation (a consolidated fragment spans a time range; a write's
// is one instant).
func Newer(ctx context.Context, st storage.Store, array string, key []byte) (int, error) {
	a, err := tdbarray.Open(ctx, st, array, tdbarray.Options{End: math.MaxUint64, EncryptionKey: key})
	if err != nil {
		return 0, err
	}
	n := 0
	for _, f := range a.Fragments {
		if f.Start == f.End {
			n++
		}
	}
	return n, nil
}

// hold takes array's lease and renews it until the returned stop is
// called; the context ends when the lease is lost. nil ctx: another node
// holds it.
func (c *Compactor) hold(ctx context.Context, array string) (context.Context, func(), error) {
	l, err := c.leases.Acquire(ctx, array)
	if err != nil || l == nil {
		return nil, nil, err
	}
	lctx, cancel := context.WithCancelCause(ctx)
	done := make(chan struct{})
	go func() {
		t := time.NewTicker(c.opt.LeaseTTL / 3)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				if err := l.Renew(lctx); err != nil {
					cancel(err)
					return
				}
			}
		}
	}()
	return lctx, func() {
		close(done)
		cancel(nil)
		rctx, rc := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer rc()
		if err := l.Release(rctx); err != nil {
			c.opt.Log.Warn().Err(err).Str("array", array).Msg("compaction: releasing the lease (it expires by itself)")
		}
	}, nil
}

// compact runs one compaction of array if it still has enough fragments.
// It returns the fragments counted since (the new pending count) and,
// when it wrote something, the new status.
func (c *Compactor) compact(ctx context.Context, array string) (int, *Status, error) {
	log := c.opt.Log.With().Str("array", array).Logger()
	key, err := c.keyOf(ctx, array)
	if err != nil {
		log.Warn().Err(err).Msg("compaction: skipped")
		return 0, nil, err
	}
	n, err := Newer(ctx, c.st, array, key)
	if err != nil {
		if ctx.Err() == nil && !errors.Is(err, storage.ErrNotFound) {
			log.Warn().Err(err).Msg("compaction: counting fragments")
		}
		return 0, nil, err
	}
	if n < c.opt.After {
		return n, nil, nil
	}
	if !c.take(array) {
		// A vacuum, or a consolidate or vacuum action, runs on it here:
		// those are short, so look again soon (not after a lease's life).
		c.retryAfter(array, localBusyRetry)
		return n, nil, nil
	}
	defer c.give(array)
	lctx, stop, err := c.hold(ctx, array)
	if err != nil {
		if c.opt.Metrics != nil {
			c.opt.Metrics.CompactionDone(0, 0, err)
		}
		log.Error().Err(err).Int("fragments", n).
			Msg("compaction failed taking its lease; nothing was written, reads go on; it is retried after more writes")
		return 0, nil, err
	}
	if lctx == nil {
		// Another node compacts it (or died holding the lease): the next
		// write looks again, and so does a retry once the lease could
		// have expired.
		log.Debug().Msg("compaction: another node holds the lease")
		c.retryAfter(array, c.opt.LeaseTTL)
		return n, nil, nil
	}
	defer stop()
	start := time.Now()
	log.Info().Int("fragments", n).Int64("at_ms", start.UnixMilli()).Msg("compaction started")
	if testHook != nil {
		testHook(array, true)
		defer testHook(array, false)
	}
	res, err := lifecycle.Consolidate(lctx, c.st, array, lifecycle.Fragments, lifecycle.Options{
		EncryptionKey: key, MaxFragmentBytes: c.opt.MaxFragmentBytes, Workers: c.opt.Workers})
	took := time.Since(start)
	if err != nil {
		if cause := context.Cause(lctx); cause != nil && ctx.Err() == nil {
			err = fmt.Errorf("%w (%v)", err, cause)
		}
	}
	merged := 0
	if res != nil && len(res.Written) > 0 {
		merged = len(res.Consolidated)
	}
	if c.opt.Metrics != nil {
		c.opt.Metrics.CompactionDone(merged, took, err)
	}
	if err != nil {
		if ctx.Err() != nil {
			log.Info().Msg("compaction: stopped by shutdown; nothing partial is visible")
		} else {
			// Counted again from 0: retried after the next After writes.
			log.Error().Err(err).Int("fragments", n).Dur("took", took).
				Msg("compaction failed; nothing partial is visible, reads go on; it is retried after more writes")
		}
		return 0, nil, err
	}
	if merged == 0 {
		log.Info().Int("fragments", n).Msg("compaction: nothing to consolidate by TileDB's rules (amplification); retried after more writes")
		return 0, nil, nil
	}
	now := time.Now()
	st := &Status{At: now, Merged: merged, Written: res.Written, VacuumAt: now.Add(c.opt.VacuumGrace)}
	log.Info().Int("merged", merged).Strs("written", res.Written).Dur("took", took).Int64("at_ms", now.UnixMilli()).
		Time("vacuum_at", st.VacuumAt).Msg("compaction done")
	return 0, st, nil
}

func (c *Compactor) runVacuum(array string) {
	ctx := c.ctx
	log := c.opt.Log.With().Str("array", array).Logger()
	key, err := c.keyOf(ctx, array)
	if err != nil {
		return
	}
	if !c.take(array) {
		c.scheduleVacuum(array, time.Now().Add(localBusyRetry))
		return
	}
	defer c.give(array)
	lctx, stop, err := c.hold(ctx, array)
	if err != nil || lctx == nil {
		if err == nil {
			// Another node works on the array: try again a lease later.
			c.scheduleVacuum(array, time.Now().Add(c.opt.LeaseTTL))
		}
		return
	}
	defer stop()
	res, err := lifecycle.Vacuum(lctx, c.st, array, lifecycle.Fragments, lifecycle.VacuumOptions{
		EncryptionKey: key, Grace: c.opt.VacuumGrace})
	removed := 0
	if res != nil {
		removed = len(res.Removed)
	}
	if c.opt.Metrics != nil {
		c.opt.Metrics.VacuumDone(removed, err)
	}
	if err != nil {
		if ctx.Err() == nil && !errors.Is(err, storage.ErrNotFound) {
			log.Error().Err(err).Msg("vacuum after compaction failed; retried on the next start or compaction")
		}
		return
	}
	c.mu.Lock()
	if s, ok := c.arrays[array]; ok {
		s.status.VacuumAt = time.Time{}
	}
	c.mu.Unlock()
	log.Info().Int("removed", removed).Msg("vacuum after compaction done")
}
