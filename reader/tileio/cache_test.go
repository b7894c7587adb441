package tileio

import (
	"bytes"
	"context"
	"fmt"
	"testing"

	"github.com/tileflight/tileflight/internal/bufpool"
	"github.com/tileflight/tileflight/internal/fixtures"
)

// A tile served from the cache holds exactly the bytes a fresh load
// decodes, for every tile of every fixture TileDB wrote; the second query
// (loader) over the same cache is served from it.
func TestCacheServesWhatALoadDecodes(t *testing.T) {
	for _, c := range fixtures.Cases(t) {
		t.Run(c.Name, func(t *testing.T) {
			a, key := openFixture(t, c)
			cache := NewCache(1 << 30)
			plain := NewLoader(a, Options{EncryptionKey: key})
			loads := 0
			for round := 0; round < 2; round++ {
				l := NewLoader(a, Options{EncryptionKey: key, Cache: cache})
				for _, f := range a.Fragments {
					n, err := f.Meta.TileNum()
					if err != nil {
						t.Fatal(err)
					}
					for _, at := range f.Schema.Attributes {
						for ti := uint64(0); ti < n; ti++ {
							want, err := plain.Load(context.Background(), f, at.Name, ti)
							if err != nil {
								t.Fatal(err)
							}
							got, err := l.Load(context.Background(), f, at.Name, ti)
							if err != nil {
								t.Fatal(err)
							}
							if !bytes.Equal(got.Data, want.Data) || !bytes.Equal(got.Offsets, want.Offsets) ||
								!bytes.Equal(got.Validity, want.Validity) || got.Cells != want.Cells {
								t.Fatalf("round %d: fragment %s: %s: tile %d differs from a fresh load", round, f.Name, at.Name, ti)
							}
							got.Release()
							want.Release()
							loads++
						}
					}
				}
			}
			if s := cache.Stats(); s.Hits != int64(loads/2) || s.Misses != int64(loads/2) {
				t.Errorf("%d loads in two rounds: %+v, want half hits", loads, s)
			}
		})
	}
}

// The cache holds at most its bytes, evicting the least recently used
// tiles, and never keeps a tile above an eighth of its size.
func TestCacheBoundedInBytes(t *testing.T) {
	c := NewCache(64 << 10) // tiles up to 8 KiB are kept
	tile := func(n int) *Tile { return &Tile{Data: make([]byte, n), Cells: uint64(n)} }
	for i := 0; i < 100; i++ {
		c.put(fmt.Sprint(i), tile(4<<10))
		if s := c.Stats(); s.Bytes > 64<<10 {
			t.Fatalf("after %d puts the cache holds %d bytes, more than its 64 KiB", i+1, s.Bytes)
		}
	}
	var got Tile
	if c.get("0", &got) {
		t.Error("the oldest tile was not evicted")
	}
	if !c.get("99", &got) || got.Cells != 4<<10 {
		t.Error("the newest tile is not served")
	}
	c.put("big", tile(9<<10))
	if c.get("big", &got) {
		t.Error("a tile above an eighth of the cache was kept")
	}
	if NewCache(0) != nil {
		t.Error("a zero-byte cache is not nil")
	}
	var nilCache *Cache
	nilCache.put("x", tile(1))
	if nilCache.get("x", &got) {
		t.Error("a nil cache served a tile")
	}
}

// LoadPooled decodes exactly what Load does, for every tile of every
// field of every fixture, with and without a cache; a recycled buffer is
// poisoned, so a tile recycled while the cache still serves it shows. A
// loader without a cache leaves no pooled buffer behind once its tiles are
// recycled; with a cache, only the tiles it keeps stay pooled.
func TestPooledLoads(t *testing.T) {
	restore := bufpool.SetPoison(bufpool.Poison)
	defer restore()
	for _, cached := range []bool{false, true} {
		for _, c := range fixtures.Cases(t) {
			t.Run(fmt.Sprintf("%s/cache=%v", c.Name, cached), func(t *testing.T) {
				a, key := openFixture(t, c)
				var cache *Cache
				if cached {
					cache = NewCache(1 << 30)
				}
				live := bufpool.Live()
				plain := NewLoader(a, Options{EncryptionKey: key})
				for round := 0; round < 2; round++ {
					l := NewLoader(a, Options{EncryptionKey: key, Cache: cache})
					for _, f := range a.Fragments {
						n, err := f.Meta.TileNum()
						if err != nil {
							t.Fatal(err)
						}
						for _, name := range tileFields(f) {
							for ti := uint64(0); ti < n; ti++ {
								want, err := plain.Load(context.Background(), f, name, ti)
								if err != nil {
									t.Fatal(err)
								}
								got, err := l.LoadPooled(context.Background(), f, name, ti, Now)
								if err != nil {
									t.Fatal(err)
								}
								if !bytes.Equal(got.Data, want.Data) || !bytes.Equal(got.Offsets, want.Offsets) ||
									!bytes.Equal(got.Validity, want.Validity) || got.Cells != want.Cells {
									t.Fatalf("round %d: fragment %s: %s: tile %d differs from Load", round, f.Name, name, ti)
								}
								got.Release()
								got.Recycle()
								got.Recycle() // idempotent
								want.Release()
							}
						}
					}
				}
				if held := bufpool.Live() - live; !cached && held != 0 || cached && held > int64(cache.Stats().Tiles) {
					t.Fatalf("%d pooled buffers still live (cache holds %d tiles)", held, cache.Stats().Tiles)
				}
			})
		}
	}
}
