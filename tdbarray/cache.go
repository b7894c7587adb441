package tdbarray

import (
	"container/list"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/tileflight/tileflight/format/schema"
	"github.com/tileflight/tileflight/storage"
)

// Cache keeps what opening an array decodes from immutable files: schemas
// (a schema file never changes under its timestamped name) and fragments'
// metadata (a committed fragment never changes), so that the next query
// on the same array reads only the directory listings and the commit
// files. Listings are never cached: a new commit is seen by the next Open.
// It is bounded in entries and in bytes (least recently used entries go
// first) and safe for concurrent use; one Cache may serve several stores.
//
// A fragment's entry grows after it is cached, as queries load the
// sections of its metadata (R-tree, tile offsets, ...): its weight is
// taken again each time it is looked up or stored, so the byte bound
// holds up to the sections loaded since an entry was last touched.
type Cache struct {
	mu       sync.Mutex
	max      int
	maxBytes int64
	used     int64
	order    *list.List // front = most recently used; values are *cacheEntry
	entries  map[string]*list.Element

	// hits and misses count lookups, for the daemon's metrics.
	hits, misses atomic.Uint64
}

type cacheEntry struct {
	key    string
	val    any
	weight int64
}

// sizer is implemented by cached values whose size in memory changes.
type sizer interface{ memoryBytes() int64 }

// schemaWeight is what a cached schema is counted as: schemas are small
// next to fragment metadata, and not worth measuring.
const schemaWeight = 4 << 10

func weightOf(v any) int64 {
	if s, ok := v.(sizer); ok {
		return s.memoryBytes()
	}
	return schemaWeight
}

// reweigh updates an entry's weight and the total (c.mu held).
func (c *Cache) reweigh(e *cacheEntry) {
	w := weightOf(e.val)
	c.used += w - e.weight
	e.weight = w
}

// evict drops least recently used entries beyond the bounds, never keep
// (the entry just used) (c.mu held).
func (c *Cache) evict(keep *list.Element) {
	for c.order.Len() > c.max || c.used > c.maxBytes {
		last := c.order.Back()
		if last == keep {
			return
		}
		e := last.Value.(*cacheEntry)
		c.order.Remove(last)
		delete(c.entries, e.key)
		c.used -= e.weight
	}
}

// DefaultCacheEntries is a sensible bound for a daemon: each fragment's
// entry holds its footer and the sections queries have loaded.
const DefaultCacheEntries = 4096

// DefaultCacheBytes bounds the decoded metadata a daemon keeps.
const DefaultCacheBytes = 256 << 20

// NewCache returns a cache of at most maxEntries schemas and fragments
// and DefaultCacheBytes of decoded metadata.
func NewCache(maxEntries int) *Cache {
	return NewCacheBytes(maxEntries, 0)
}

// NewCacheBytes returns a cache of at most maxEntries schemas and
// fragments (0: DefaultCacheEntries) holding at most maxBytes of decoded
// metadata (0: DefaultCacheBytes).
func NewCacheBytes(maxEntries int, maxBytes int64) *Cache {
	if maxEntries <= 0 {
		maxEntries = DefaultCacheEntries
	}
	if maxBytes <= 0 {
		maxBytes = DefaultCacheBytes
	}
	return &Cache{max: maxEntries, maxBytes: maxBytes, order: list.New(), entries: map[string]*list.Element{}}
}

// cacheKey names a file of an array in a store, read with a key. The
// encryption key is part of it so that an entry decoded with one key is
// never served to an Open with another (or none).
func cacheKey(st storage.Store, kind, dir, file string, size int64, encKey []byte) string {
	return fmt.Sprintf("%p\x00%s\x00%s\x00%s\x00%d\x00%s", st, kind, dir, file, size, encKey)
}

func (c *Cache) get(key string) (any, bool) {
	if c == nil {
		return nil, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.entries[key]
	if !ok {
		c.misses.Add(1)
		return nil, false
	}
	c.hits.Add(1)
	c.order.MoveToFront(el)
	e := el.Value.(*cacheEntry)
	c.reweigh(e)
	c.evict(el)
	return e.val, true
}

func (c *Cache) put(key string, val any) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.entries[key]
	if ok {
		el.Value.(*cacheEntry).val = val
		c.order.MoveToFront(el)
	} else {
		el = c.order.PushFront(&cacheEntry{key: key, val: val})
		c.entries[key] = el
	}
	c.reweigh(el.Value.(*cacheEntry))
	c.evict(el)
}

// Bytes is the decoded metadata the cache holds, as last weighed.
func (c *Cache) Bytes() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.used
}

// Stats returns how many lookups the cache answered and how many it did
// not (the caller then read and decoded the file).
func (c *Cache) Stats() (hits, misses uint64) {
	return c.hits.Load(), c.misses.Load()
}

// Len is the number of cached entries.
func (c *Cache) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.order.Len()
}

// cachedSchema is a decoded schema file with its encryption flag.
type cachedSchema struct {
	s         *schema.ArraySchema
	encrypted bool
}
