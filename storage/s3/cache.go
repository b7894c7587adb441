package s3

import (
	"context"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/tileflight/tileflight/internal/cache"
)

// blockTTL bounds how long a block is served from memory. Fragment files
// are written once under unique names, so a block cannot go stale while a
// query uses it; the TTL only bounds what another node's replacement of a
// same-named object (which tileflight never does) could cost.
const blockTTL = 30 * time.Second

// block is one aligned piece of an object: data is short (or empty) at
// the object's end; size is the whole object's size.
type block struct {
	data []byte
	size int64
	etag string
}

// blockCache holds recently fetched blocks (bounded in bytes, least
// recently used first out) and makes concurrent reads of one block share
// one GET (internal/cache coalesces the loads).
type blockCache struct {
	c *cache.Cache[*block]
}

func newBlockCache(max int64) *blockCache {
	return &blockCache{c: cache.New(cache.Config[*block]{
		MaxBytes: max,
		Weigh:    func(b *block) int64 { return int64(len(b.data)) },
		TTL:      blockTTL,
	})}
}

// blockKey names block i of key: the NUL cannot occur in an object key,
// so that every block of key shares the prefix key+"\x00".
func blockKey(key string, i int64) string { return key + "\x00" + strconv.FormatInt(i, 10) }

// get returns block i of key, cached or fetched once for every concurrent
// reader of it. The fetch serves every waiter, so one reader's
// cancellation must not fail the others: it runs detached from ctx,
// bounded by the store's attempt timeouts.
func (c *blockCache) get(ctx context.Context, key string, i int64, fetch func(context.Context) (*block, error)) (*block, error) {
	return c.c.Load(ctx, blockKey(key, i), fetch)
}

// dropKey forgets every block of key (after this store replaced or
// deleted it); a fetch of it in flight is not kept.
func (c *blockCache) dropKey(key string) { c.c.RemovePrefix(key + "\x00") }

// dropPrefix forgets every block of keys under dir ("" = all).
func (c *blockCache) dropPrefix(dir string) {
	if dir == "" {
		c.c.RemovePrefix("")
		return
	}
	c.c.RemovePrefix(dir + "/")
}

func jitter() float64 { return rand.Float64() }
