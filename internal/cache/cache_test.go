package cache

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

type sized struct{ n int64 }

func weigh(v *sized) int64 { return v.n }

// Eviction keeps the cache within its bounds, least recently used first,
// never the entry just used.
func TestEviction(t *testing.T) {
	type op struct {
		put  string // key to put (with weight w), or
		get  string // key to look up
		w    int64
		grow int64 // with get: the value's new weight before the lookup
	}
	cases := []struct {
		name        string
		cfg         Config[*sized]
		ops         []op
		keys, gone  []string
		bytes       int64
		evictedKeys []string
	}{
		{
			name:  "by bytes, oldest first",
			cfg:   Config[*sized]{MaxBytes: 100, Weigh: weigh},
			ops:   []op{{put: "a", w: 40}, {put: "b", w: 40}, {put: "c", w: 40}},
			keys:  []string{"b", "c"},
			gone:  []string{"a"},
			bytes: 80, evictedKeys: []string{"a"},
		},
		{
			name:  "by bytes, a lookup makes an entry recent",
			cfg:   Config[*sized]{MaxBytes: 100, Weigh: weigh},
			ops:   []op{{put: "a", w: 40}, {put: "b", w: 40}, {get: "a"}, {put: "c", w: 40}},
			keys:  []string{"a", "c"},
			gone:  []string{"b"},
			bytes: 80, evictedKeys: []string{"b"},
		},
		{
			name:  "by entries",
			cfg:   Config[*sized]{MaxEntries: 2},
			ops:   []op{{put: "a"}, {put: "b"}, {get: "a"}, {put: "c"}},
			keys:  []string{"a", "c"},
			gone:  []string{"b"},
			bytes: 0, evictedKeys: []string{"b"},
		},
		{
			name:  "a value larger than the bound stays alone",
			cfg:   Config[*sized]{MaxBytes: 100, Weigh: weigh},
			ops:   []op{{put: "a", w: 40}, {put: "b", w: 40}, {put: "huge", w: 500}},
			keys:  []string{"huge"},
			gone:  []string{"a", "b"},
			bytes: 500, evictedKeys: []string{"a", "b"},
		},
		{
			name:  "a value that grew is weighed again when touched",
			cfg:   Config[*sized]{MaxBytes: 100, Weigh: weigh, Reweigh: true},
			ops:   []op{{put: "a", w: 30}, {put: "b", w: 30}, {put: "c", w: 30}, {get: "c", grow: 60}},
			keys:  []string{"b", "c"},
			gone:  []string{"a"},
			bytes: 90, evictedKeys: []string{"a"},
		},
		{
			name:  "a replaced value is released and weighed anew",
			cfg:   Config[*sized]{MaxBytes: 100, Weigh: weigh},
			ops:   []op{{put: "a", w: 30}, {put: "a", w: 50}},
			keys:  []string{"a"},
			bytes: 50, evictedKeys: []string{"a"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var evicted []string
			cfg := tc.cfg
			cfg.Evicted = func(k string, _ *sized) { evicted = append(evicted, k) }
			c := New(cfg)
			vals := map[string]*sized{}
			for _, o := range tc.ops {
				if o.put != "" {
					vals[o.put] = &sized{o.w}
					c.Put(o.put, vals[o.put])
					continue
				}
				if o.grow != 0 {
					vals[o.get].n = o.grow
				}
				if _, ok := c.Get(o.get); !ok {
					t.Fatalf("%s not cached", o.get)
				}
			}
			for _, k := range tc.keys {
				if v, ok := c.Get(k); !ok || v != vals[k] {
					t.Errorf("%s: cached %v", k, ok)
				}
			}
			for _, k := range tc.gone {
				if _, ok := c.Get(k); ok {
					t.Errorf("%s kept past the bound", k)
				}
			}
			if c.Bytes() != tc.bytes || c.Len() != len(tc.keys) {
				t.Errorf("%d bytes in %d entries, want %d in %d", c.Bytes(), c.Len(), tc.bytes, len(tc.keys))
			}
			if fmt.Sprint(evicted) != fmt.Sprint(tc.evictedKeys) {
				t.Errorf("evicted %v, want %v", evicted, tc.evictedKeys)
			}
		})
	}
}

func TestAddKeepsTheFirstValue(t *testing.T) {
	c := New(Config[int]{})
	if !c.Add("k", 1) || c.Add("k", 2) {
		t.Fatal("Add stored over an existing value, or not at all")
	}
	if v, _ := c.Get("k"); v != 1 {
		t.Fatalf("got %d, want the first value", v)
	}
}

func TestCountersAndAcquire(t *testing.T) {
	var acquired int
	c := New(Config[int]{Acquire: func(int) { acquired++ }})
	c.Put("a", 1)
	c.Get("a")
	c.Get("a")
	c.Get("b")
	if s := c.Stats(); s.Hits != 2 || s.Misses != 1 || s.Entries != 1 || acquired != 2 {
		t.Fatalf("stats %+v, acquired %d: want 2 hits, 1 miss, 1 entry, 2 acquired", s, acquired)
	}
}

func TestTTL(t *testing.T) {
	c := New(Config[int]{TTL: 20 * time.Millisecond})
	c.Put("a", 1)
	if _, ok := c.Get("a"); !ok {
		t.Fatal("fresh entry not served")
	}
	time.Sleep(40 * time.Millisecond)
	if _, ok := c.Get("a"); ok || c.Len() != 0 {
		t.Fatal("expired entry served or kept")
	}
}

func TestNilCacheKeepsNothing(t *testing.T) {
	var c *Cache[int]
	c.Put("a", 1)
	c.Add("a", 1)
	c.Remove("a")
	if _, ok := c.Get("a"); ok || c.Len() != 0 || c.Bytes() != 0 || c.Stats() != (Stats{}) {
		t.Fatal("a nil cache holds something")
	}
	calls := 0
	for range 2 {
		v, err := c.Load(context.Background(), "a", func(context.Context) (int, error) { calls++; return 7, nil })
		if v != 7 || err != nil {
			t.Fatal(v, err)
		}
	}
	if calls != 2 {
		t.Fatalf("%d loads, want 2", calls)
	}
}

// Concurrent Loads of one key share one load; its result is cached; a
// failed load is not, and the next Load tries again.
func TestLoad(t *testing.T) {
	boom := errors.New("boom")
	cases := []struct {
		name      string
		err       error
		wantCalls int32 // after a second round of Loads
	}{
		{"success is shared and cached", nil, 1},
		{"an error is shared but not cached", boom, 2},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := New(Config[int]{})
			var calls atomic.Int32
			release := make(chan struct{})
			load := func(context.Context) (int, error) {
				calls.Add(1)
				<-release
				return 42, tc.err
			}
			const n = 32
			var wg sync.WaitGroup
			errs := make(chan error, n)
			for range n {
				wg.Go(func() {
					v, err := c.Load(context.Background(), "k", load)
					if err == nil && v != 42 {
						err = fmt.Errorf("got %d", v)
					}
					if !errors.Is(err, tc.err) {
						err = fmt.Errorf("got %v, want %v", err, tc.err)
					} else {
						err = nil
					}
					errs <- err
				})
			}
			// Let every caller join the one load before it returns.
			for waiting(c) < 1 {
				time.Sleep(time.Millisecond)
			}
			time.Sleep(20 * time.Millisecond)
			close(release)
			wg.Wait()
			close(errs)
			for err := range errs {
				if err != nil {
					t.Fatal(err)
				}
			}
			if got := calls.Load(); got != 1 {
				t.Fatalf("%d concurrent loads ran %d times, want once", n, got)
			}
			release = make(chan struct{})
			close(release)
			c.Load(context.Background(), "k", load)
			if got := calls.Load(); got != tc.wantCalls {
				t.Fatalf("after a second Load: %d calls, want %d", got, tc.wantCalls)
			}
			if _, cached := c.Get("k"); cached != (tc.err == nil) {
				t.Fatalf("cached %v after err %v", cached, tc.err)
			}
		})
	}
}

func waiting(c *Cache[int]) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.inflight)
}

// A caller whose context ends stops waiting; the load goes on for the
// others, undisturbed by that cancellation.
func TestLoadCallerCancelled(t *testing.T) {
	c := New(Config[int]{})
	release := make(chan struct{})
	started := make(chan struct{})
	var loadCtxErr atomic.Value
	go c.Load(context.Background(), "k", func(ctx context.Context) (int, error) {
		close(started)
		<-release
		loadCtxErr.Store(fmt.Sprint(ctx.Err()))
		return 1, nil
	})
	<-started
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() {
		_, err := c.Load(ctx, "k", func(context.Context) (int, error) { return 2, nil })
		done <- err
	}()
	time.Sleep(10 * time.Millisecond)
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled waiter: %v", err)
	}
	close(release)
	for c.Len() == 0 {
		time.Sleep(time.Millisecond)
	}
	if v, _ := c.Get("k"); v != 1 || loadCtxErr.Load() != "<nil>" {
		t.Fatalf("got %d, load's ctx %v", v, loadCtxErr.Load())
	}
}

// A key removed while its load is in flight: the load's result is not
// kept, and a Load after the removal starts a new load.
func TestRemoveDuringLoad(t *testing.T) {
	c := New(Config[int]{})
	release := make(chan struct{})
	started := make(chan struct{})
	first := make(chan int)
	go func() {
		v, _ := c.Load(context.Background(), "a\x001", func(context.Context) (int, error) {
			close(started)
			<-release
			return 1, nil
		})
		first <- v
	}()
	<-started
	c.RemovePrefix("a\x00")
	v, err := c.Load(context.Background(), "a\x001", func(context.Context) (int, error) { return 2, nil })
	if v != 2 || err != nil {
		t.Fatalf("a Load after the removal joined the stale load: %d %v", v, err)
	}
	close(release)
	if v := <-first; v != 1 {
		t.Fatalf("the first caller got %d", v)
	}
	if v, _ := c.Get("a\x001"); v != 2 {
		t.Fatalf("cached %d, want the value loaded after the removal", v)
	}
}

// Many goroutines putting, getting, loading and dropping keys: the
// bounds hold and -race finds nothing.
func TestConcurrentUse(t *testing.T) {
	c := New(Config[*sized]{MaxBytes: 1000, MaxEntries: 50, Weigh: weigh, Reweigh: true})
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 2000 {
				k := fmt.Sprint((g*7 + i) % 97)
				switch i % 4 {
				case 0:
					c.Put(k, &sized{int64(i % 40)})
				case 1:
					c.Get(k)
				case 2:
					c.Load(context.Background(), k, func(context.Context) (*sized, error) { return &sized{10}, nil })
				case 3:
					if i%40 == 3 {
						c.RemovePrefix(k[:1])
					}
				}
			}
		})
	}
	wg.Wait()
	if s := c.Stats(); s.Bytes > 1000 || s.Entries > 50 {
		t.Fatalf("bounds broken: %+v", s)
	}
}
