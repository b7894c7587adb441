package array

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
// It is bounded (least recently used entries go first) and safe for
// concurrent use; one Cache may serve several stores.
type Cache struct {
	mu      sync.Mutex
	max     int
	order   *list.List // front = most recently used; values are *cacheEntry
	entries map[string]*list.Element

	// hits and misses count lookups, for the daemon's metrics.
	hits, misses atomic.Uint64
}

type cacheEntry struct {
	key string
	val any
}

// DefaultCacheEntries is a sensible bound for a daemon: each fragment's
// entry holds its footer and the sections queries have loaded.
const DefaultCacheEntries = 4096

// NewCache returns a cache of at most maxEntries schemas and fragments.
func NewCache(maxEntries int) *Cache {
	if maxEntries <= 0 {
		maxEntries = DefaultCacheEntries
	}
	return &Cache{max: maxEntries, order: list.New(), entries: map[string]*list.Element{}}
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
	return el.Value.(*cacheEntry).val, true
}

func (c *Cache) put(key string, val any) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.entries[key]; ok {
		el.Value.(*cacheEntry).val = val
		c.order.MoveToFront(el)
		return
	}
	c.entries[key] = c.order.PushFront(&cacheEntry{key: key, val: val})
	for c.order.Len() > c.max {
		last := c.order.Back()
		c.order.Remove(last)
		delete(c.entries, last.Value.(*cacheEntry).key)
	}
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
