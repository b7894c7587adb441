package tileio

import (
	"container/list"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/tileflight/tileflight/internal/bufpool"
	"github.com/tileflight/tileflight/tdbarray"
)

// Cache keeps decoded tiles across queries, bounded in bytes. A committed
// fragment never changes under its name, so a decoded tile keyed by store,
// array, fragment, field and tile index (and the encryption key it was
// decoded with) stays right for as long as it is kept; a new commit is a
// new fragment with new keys. Repeated small queries (a box over a few
// tiles) then skip the read and the decompression.
//
// Tiles larger than an eighth of the cache are never kept, so that one
// scan of big tiles neither evicts everything else nor pins its tiles'
// memory. Cached buffers are shared, read-only, by every query that gets
// them (readers never write into a tile's buffers). A tile whose Data is
// pooled (Tile.Owner) is kept with a reference of the cache's own, dropped
// when it is evicted; a query getting it takes another one. Safe for
// concurrent use.
type Cache struct {
	max     int64
	maxTile int64

	mu      sync.Mutex
	used    int64
	order   *list.List // front = most recently used; values are *cached
	entries map[string]*list.Element

	hits, misses atomic.Int64
}

type cached struct {
	key                     string
	data, offsets, validity []byte
	own                     *bufpool.Buf
	cells                   uint64
	size                    int64
}

// DefaultCacheBytes is the daemon's default decoded-tile cache size.
const DefaultCacheBytes = 32 << 20

// NewCache returns a cache of at most maxBytes decoded bytes; maxBytes <= 0
// returns nil, which caches nothing (a nil *Cache is valid and empty).
func NewCache(maxBytes int64) *Cache {
	if maxBytes <= 0 {
		return nil
	}
	return &Cache{max: maxBytes, maxTile: maxBytes / 8, order: list.New(), entries: map[string]*list.Element{}}
}

func cacheKey(a *tdbarray.Array, frag *tdbarray.Fragment, field string, t uint64, encKey []byte) string {
	return fmt.Sprintf("%p\x00%s\x00%s\x00%s\x00%d\x00%s", a.Store, a.Dir, frag.Name, field, t, encKey)
}

// get fills tile from the cache and reports whether it was there.
func (c *Cache) get(key string, tile *Tile) bool {
	if c == nil {
		return false
	}
	c.mu.Lock()
	el, ok := c.entries[key]
	if ok {
		c.order.MoveToFront(el)
		e := el.Value.(*cached)
		tile.Data, tile.Offsets, tile.Validity, tile.Cells = e.data, e.offsets, e.validity, e.cells
		if e.own != nil {
			// Under the lock, so that an eviction cannot recycle it first.
			e.own.Retain()
			tile.own = e.own
		}
	}
	c.mu.Unlock()
	if ok {
		c.hits.Add(1)
	} else {
		c.misses.Add(1)
	}
	return ok
}

// keeps reports whether the cache may keep a tile of n decoded bytes
// (false for a nil cache): larger ones are never put.
func (c *Cache) keeps(n int64) bool { return c != nil && n <= c.maxTile }

// put keeps a decoded tile, evicting the least recently used ones.
func (c *Cache) put(key string, tile *Tile) {
	if c == nil {
		return
	}
	size := int64(cap(tile.Data) + cap(tile.Offsets) + cap(tile.Validity) + len(key) + 128)
	if size > c.maxTile {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.entries[key]; ok {
		return // another query decoded it meanwhile: same bytes
	}
	if tile.own != nil {
		tile.own.Retain()
	}
	c.entries[key] = c.order.PushFront(&cached{key: key, data: tile.Data, offsets: tile.Offsets, validity: tile.Validity, own: tile.own, cells: tile.Cells, size: size})
	c.used += size
	for c.used > c.max {
		last := c.order.Back()
		e := last.Value.(*cached)
		c.order.Remove(last)
		delete(c.entries, e.key)
		c.used -= e.size
		if e.own != nil {
			e.own.Release()
		}
	}
}

// CacheStats are a cache's counters.
type CacheStats struct {
	Bytes, MaxBytes int64
	Tiles           int
	Hits, Misses    int64
}

// Stats returns the cache's size and hit counters.
func (c *Cache) Stats() CacheStats {
	if c == nil {
		return CacheStats{}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return CacheStats{Bytes: c.used, MaxBytes: c.max, Tiles: c.order.Len(), Hits: c.hits.Load(), Misses: c.misses.Load()}
}
