package tileio

import (
	"fmt"

	"github.com/tileflight/tileflight/internal/bufpool"
	"github.com/tileflight/tileflight/internal/cache"
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
	max, maxTile int64
	c            *cache.Cache[*cached]
}

type cached struct {
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
	return &Cache{max: maxBytes, maxTile: maxBytes / 8, c: cache.New(cache.Config[*cached]{
		MaxBytes: maxBytes,
		Weigh:    func(e *cached) int64 { return e.size },
		// A query getting a pooled tile takes a reference under the
		// cache's lock, so that an eviction cannot recycle it first; the
		// cache's own reference goes when the tile is evicted.
		Acquire: func(e *cached) {
			if e.own != nil {
				e.own.Retain()
			}
		},
		Evicted: func(_ string, e *cached) {
			if e.own != nil {
				e.own.Release()
			}
		},
	})}
}

func cacheKey(a *tdbarray.Array, frag *tdbarray.Fragment, field string, t uint64, encKey []byte) string {
	return fmt.Sprintf("%p\x00%s\x00%s\x00%s\x00%d\x00%s", a.Store, a.Dir, frag.Name, field, t, encKey)
}

// get fills tile from the cache and reports whether it was there.
func (c *Cache) get(key string, tile *Tile) bool {
	if c == nil {
		return false
	}
	e, ok := c.c.Get(key)
	if ok {
		tile.Data, tile.Offsets, tile.Validity, tile.Cells = e.data, e.offsets, e.validity, e.cells
		tile.own = e.own // the reference Acquire took
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
	// The cache's own reference is taken before the tile is visible to
	// others, so that an eviction right after cannot drop the query's.
	if tile.own != nil {
		tile.own.Retain()
	}
	e := &cached{data: tile.Data, offsets: tile.Offsets, validity: tile.Validity, own: tile.own, cells: tile.Cells, size: size}
	if !c.c.Add(key, e) && tile.own != nil {
		tile.own.Release() // another query decoded it meanwhile: same bytes
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
	s := c.c.Stats()
	return CacheStats{Bytes: s.Bytes, MaxBytes: c.max, Tiles: s.Entries, Hits: int64(s.Hits), Misses: int64(s.Misses)}
}
