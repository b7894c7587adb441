package tdbarray

import (
	"fmt"

	"github.com/tileflight/tileflight/format/schema"
	"github.com/tileflight/tileflight/internal/cache"
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
	c *cache.Cache[any]
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
	return &Cache{c: cache.New(cache.Config[any]{MaxEntries: maxEntries, MaxBytes: maxBytes, Weigh: weightOf, Reweigh: true})}
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
	return c.c.Get(key)
}

func (c *Cache) put(key string, val any) {
	if c == nil {
		return
	}
	c.c.Put(key, val)
}

// Bytes is the decoded metadata the cache holds, as last weighed.
func (c *Cache) Bytes() int64 {
	if c == nil {
		return 0
	}
	return c.c.Bytes()
}

// Stats returns how many lookups the cache answered and how many it did
// not (the caller then read and decoded the file).
func (c *Cache) Stats() (hits, misses uint64) {
	if c == nil {
		return 0, 0
	}
	s := c.c.Stats()
	return s.Hits, s.Misses
}

// Len is the number of cached entries.
func (c *Cache) Len() int {
	if c == nil {
		return 0
	}
	return c.c.Len()
}

// cachedSchema is a decoded schema file with its encryption flag.
type cachedSchema struct {
	s         *schema.ArraySchema
	encrypted bool
}
