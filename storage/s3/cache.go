package s3

import (
	"container/list"
	"context"
	"math/rand/v2"
	"strings"
	"sync"
	"time"
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

type blockID struct {
	key string
	i   int64
}

type cacheEntry struct {
	id    blockID
	b     *block
	at    time.Time
	el    *list.Element
	ready chan struct{} // closed once b or err is set
	err   error
}

// blockCache holds recently fetched blocks (bounded in bytes, least
// recently used first out) and makes concurrent reads of one block share
// one GET.
type blockCache struct {
	max int64

	mu      sync.Mutex
	used    int64
	order   *list.List // of *cacheEntry, most recent first; only completed ones
	entries map[blockID]*cacheEntry
}

func newBlockCache(max int64) *blockCache {
	return &blockCache{max: max, order: list.New(), entries: map[blockID]*cacheEntry{}}
}

func (c *blockCache) get(ctx context.Context, key string, i int64, fetch func(context.Context) (*block, error)) (*block, error) {
	id := blockID{key, i}
	c.mu.Lock()
	e, ok := c.entries[id]
	if ok && e.el != nil && time.Since(e.at) > blockTTL {
		c.removeLocked(e)
		ok = false
	}
	if ok {
		if e.el != nil {
			c.order.MoveToFront(e.el)
			c.mu.Unlock()
			return e.b, nil
		}
		c.mu.Unlock()
		select {
		case <-e.ready:
			if e.err != nil {
				return nil, e.err
			}
			return e.b, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	e = &cacheEntry{id: id, ready: make(chan struct{})}
	c.entries[id] = e
	c.mu.Unlock()

	// The fetch serves every waiter, so one reader's cancellation must
	// not fail the others: it runs detached from ctx, bounded by the
	// store's attempt timeouts.
	b, err := fetch(context.WithoutCancel(ctx))
	c.mu.Lock()
	e.b, e.err = b, err
	close(e.ready)
	if c.entries[id] == e {
		if err != nil {
			delete(c.entries, id)
		} else {
			e.at = time.Now()
			e.el = c.order.PushFront(e)
			c.used += int64(len(b.data))
			for c.used > c.max && c.order.Len() > 1 {
				c.removeLocked(c.order.Back().Value.(*cacheEntry))
			}
		}
	}
	c.mu.Unlock()
	return b, err
}

func (c *blockCache) removeLocked(e *cacheEntry) {
	if c.entries[e.id] == e {
		delete(c.entries, e.id)
	}
	if e.el != nil {
		c.order.Remove(e.el)
		c.used -= int64(len(e.b.data))
		e.el = nil
	}
}

// dropKey forgets every block of key (after this store replaced or
// deleted it).
func (c *blockCache) dropKey(key string) {
	c.drop(func(k string) bool { return k == key })
}

// dropPrefix forgets every block of keys under dir ("" = all).
func (c *blockCache) dropPrefix(dir string) {
	c.drop(func(k string) bool { return dir == "" || strings.HasPrefix(k, dir+"/") })
}

func (c *blockCache) drop(match func(string) bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for id, e := range c.entries {
		if match(id.key) {
			if e.el != nil {
				c.removeLocked(e)
			} else {
				delete(c.entries, id) // in flight: its result will not be kept
			}
		}
	}
}

func jitter() float64 { return rand.Float64() }
