// Package cache owns the daemon's one in-memory cache implementation: a
// least-recently-used map bounded in entries and in bytes, safe for
// concurrent use, whose loads of a missing key are coalesced (one load
// per key at a time, through golang.org/x/sync/singleflight) and whose
// failed loads are never kept. It counts hits and misses for the
// daemon's metrics.
//
// The metadata cache (tdbarray), the decoded-tile cache (reader/tileio)
// and the S3 block cache (storage/s3) are thin wrappers over it: each
// decides what a key names and what a value weighs; the bounds, the
// eviction order, the expiry and the coalescing live here once.
package cache

import (
	"container/list"
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/singleflight"
)

// Config bounds a cache and says how its values are weighed and released.
type Config[V any] struct {
	// MaxEntries bounds the number of entries (0: unbounded).
	MaxEntries int
	// MaxBytes bounds the sum of the entries' weights (0: unbounded).
	MaxBytes int64
	// Weigh returns a value's weight in bytes (nil: every value weighs 0,
	// so only MaxEntries bounds the cache).
	Weigh func(V) int64
	// Reweigh weighs an entry again each time it is looked up or stored,
	// for values that grow after they are cached (a fragment's metadata
	// loading sections): the byte bound then holds up to what grew since
	// an entry was last touched.
	Reweigh bool
	// TTL bounds how long an entry is served (0: for ever). An expired
	// entry is dropped when it is next looked up, which counts as a miss.
	TTL time.Duration
	// Acquire, if set, is called with the cache's lock held on a value a
	// lookup returns, so that a reference taken there cannot race with an
	// eviction releasing the cache's own (reference-counted buffers).
	Acquire func(V)
	// Evicted, if set, is called with the cache's lock held on a value the
	// cache drops (evicted, expired, replaced or removed). It must not
	// call back into the cache.
	Evicted func(key string, v V)
}

type entry[V any] struct {
	key    string
	val    V
	weight int64
	at     time.Time // when stored, for the TTL
	el     *list.Element
}

// flight is one load in progress; stale once a Remove or Drop matched
// its key, so that what it returns is not kept.
type flight struct{ stale bool }

// Cache is a size-bounded LRU from string keys to values of type V. The
// zero value is not usable; a nil *Cache is a valid cache that keeps
// nothing.
type Cache[V any] struct {
	cfg Config[V]

	mu       sync.Mutex
	used     int64
	order    *list.List // of *entry[V]; front = most recently used
	entries  map[string]*entry[V]
	inflight map[string]*flight

	group        singleflight.Group
	hits, misses atomic.Uint64
}

// New returns an empty cache bounded as cfg says.
func New[V any](cfg Config[V]) *Cache[V] {
	return &Cache[V]{cfg: cfg, order: list.New(), entries: map[string]*entry[V]{}, inflight: map[string]*flight{}}
}

func (c *Cache[V]) weigh(v V) int64 {
	if c.cfg.Weigh == nil {
		return 0
	}
	return c.cfg.Weigh(v)
}

// over reports whether the cache is past a bound (c.mu held).
func (c *Cache[V]) over() bool {
	return c.cfg.MaxEntries > 0 && c.order.Len() > c.cfg.MaxEntries ||
		c.cfg.MaxBytes > 0 && c.used > c.cfg.MaxBytes
}

// evict drops least recently used entries until the cache is within its
// bounds, never keep (the entry just used: a value larger than the whole
// bound stays alone, since its caller holds it anyway) (c.mu held).
func (c *Cache[V]) evict(keep *entry[V]) {
	for c.over() {
		last := c.order.Back()
		if last == nil || last.Value.(*entry[V]) == keep {
			return
		}
		c.removeLocked(last.Value.(*entry[V]))
	}
}

func (c *Cache[V]) removeLocked(e *entry[V]) {
	c.order.Remove(e.el)
	delete(c.entries, e.key)
	c.used -= e.weight
	if c.cfg.Evicted != nil {
		c.cfg.Evicted(e.key, e.val)
	}
}

// touch makes e the most recently used entry, weighs it again if the
// cache reweighs, and evicts what no longer fits (c.mu held).
func (c *Cache[V]) touch(e *entry[V]) {
	c.order.MoveToFront(e.el)
	if c.cfg.Reweigh {
		w := c.weigh(e.val)
		c.used += w - e.weight
		e.weight = w
		c.evict(e)
	}
}

// Get returns the value cached under key and counts a hit, or counts a
// miss.
func (c *Cache[V]) Get(key string) (V, bool) {
	var zero V
	if c == nil {
		return zero, false
	}
	c.mu.Lock()
	v, ok := c.getLocked(key)
	c.mu.Unlock()
	if ok {
		c.hits.Add(1)
	} else {
		c.misses.Add(1)
	}
	return v, ok
}

func (c *Cache[V]) getLocked(key string) (V, bool) {
	var zero V
	e, ok := c.entries[key]
	if !ok {
		return zero, false
	}
	if c.cfg.TTL > 0 && time.Since(e.at) > c.cfg.TTL {
		c.removeLocked(e)
		return zero, false
	}
	c.touch(e)
	if c.cfg.Acquire != nil {
		c.cfg.Acquire(e.val)
	}
	return e.val, true
}

// Put stores v under key, replacing what was there, and evicts the least
// recently used entries beyond the bounds (never this one).
func (c *Cache[V]) Put(key string, v V) {
	if c == nil {
		return
	}
	c.mu.Lock()
	c.putLocked(key, v, true)
	c.mu.Unlock()
}

// Add stores v under key unless the key is already cached, and reports
// whether it stored it (false: the value cached first stays, as when two
// queries decoded the same immutable bytes).
func (c *Cache[V]) Add(key string, v V) bool {
	if c == nil {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.putLocked(key, v, false)
}

func (c *Cache[V]) putLocked(key string, v V, replace bool) bool {
	if e, ok := c.entries[key]; ok {
		if !replace {
			return false
		}
		if c.cfg.Evicted != nil {
			c.cfg.Evicted(key, e.val)
		}
		e.val = v
		e.at = time.Now()
		w := c.weigh(v)
		c.used += w - e.weight
		e.weight = w
		c.order.MoveToFront(e.el)
		c.evict(e)
		return true
	}
	e := &entry[V]{key: key, val: v, weight: c.weigh(v), at: time.Now()}
	e.el = c.order.PushFront(e)
	c.entries[key] = e
	c.used += e.weight
	c.evict(e)
	return true
}

// Load returns the value cached under key or, on a miss, the one load
// returns, which it then caches. Concurrent Loads of one key share one
// call of load; it runs detached from ctx's cancellation (it serves every
// waiter, so one caller leaving must not fail the others), while each
// caller stops waiting when its own ctx is done. A failed load is not
// cached: the next Load calls load again. A nil cache calls load each
// time.
func (c *Cache[V]) Load(ctx context.Context, key string, load func(context.Context) (V, error)) (V, error) {
	if c == nil {
		return load(ctx)
	}
	if v, ok := c.Get(key); ok {
		return v, nil
	}
	detached := context.WithoutCancel(ctx)
	ch := c.group.DoChan(key, func() (any, error) {
		f := &flight{}
		c.mu.Lock()
		c.inflight[key] = f
		c.mu.Unlock()
		v, err := load(detached)
		c.mu.Lock()
		if c.inflight[key] == f {
			delete(c.inflight, key)
		}
		if err == nil && !f.stale {
			c.putLocked(key, v, true)
		}
		c.mu.Unlock()
		return v, err
	})
	select {
	case r := <-ch:
		if r.Err != nil {
			var zero V
			return zero, r.Err
		}
		return r.Val.(V), nil
	case <-ctx.Done():
		var zero V
		return zero, ctx.Err()
	}
}

// Remove forgets key, and makes a load of it in progress return without
// caching what it read (the caller replaced or deleted what key names).
func (c *Cache[V]) Remove(key string) {
	c.Drop(func(k string) bool { return k == key })
}

// RemovePrefix forgets every key starting with prefix ("" = all), as
// Remove does.
func (c *Cache[V]) RemovePrefix(prefix string) {
	c.Drop(func(k string) bool { return strings.HasPrefix(k, prefix) })
}

// Drop forgets every key match accepts, as Remove does.
func (c *Cache[V]) Drop(match func(key string) bool) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, e := range c.entries {
		if match(k) {
			c.removeLocked(e)
		}
	}
	for k, f := range c.inflight {
		if match(k) {
			f.stale = true
			delete(c.inflight, k)
			// Later Loads of k start a new load instead of joining this one.
			c.group.Forget(k)
		}
	}
}

// Stats are a cache's counters.
type Stats struct {
	Hits, Misses uint64
	Entries      int
	Bytes        int64 // the entries' weights, as last weighed
}

// Stats returns the cache's counters (zero for a nil cache).
func (c *Cache[V]) Stats() Stats {
	if c == nil {
		return Stats{}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return Stats{Hits: c.hits.Load(), Misses: c.misses.Load(), Entries: c.order.Len(), Bytes: c.used}
}

// Len is the number of cached entries.
func (c *Cache[V]) Len() int {
	if c == nil {
		return 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.order.Len()
}

// Bytes is the sum of the entries' weights, as last weighed.
func (c *Cache[V]) Bytes() int64 {
	if c == nil {
		return 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.used
}
