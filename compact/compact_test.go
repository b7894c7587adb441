package compact

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/tileflight/tileflight/errkind"
	"github.com/tileflight/tileflight/format/names"
	"github.com/tileflight/tileflight/format/schema"
	"github.com/tileflight/tileflight/internal/s3test"
	"github.com/tileflight/tileflight/query"
	"github.com/tileflight/tileflight/reader"
	"github.com/tileflight/tileflight/storage"
	"github.com/tileflight/tileflight/writer"
)

// plainStore hides a store's conditional create: the leases' best-effort
// path.
type plainStore struct{ storage.Store }

func stores(t *testing.T) map[string]storage.Store {
	loc, err := storage.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { loc.Close() })
	out := map[string]storage.Store{"mem": storage.NewMem(), "local": loc, "no-create": plainStore{storage.NewMem()}}
	if !testing.Short() {
		// S3's conditional create (If-None-Match: *) against moto.
		out["s3"] = s3test.Open(t, "leases", nil)
	}
	return out
}

func TestLeaseExpiryAndTakeover(t *testing.T) {
	ctx := context.Background()
	for name, st := range stores(t) {
		t.Run(name, func(t *testing.T) {
			now := time.Unix(1000, 0)
			clock := func() time.Time { return now }
			a, b, c := NewLeases(st, "A", time.Minute), NewLeases(st, "B", time.Minute), NewLeases(st, "C", time.Minute)
			a.now, b.now, c.now = clock, clock, clock

			la, err := a.Acquire(ctx, "arr")
			if err != nil || la == nil {
				t.Fatalf("A: %v %v", la, err)
			}
			if lb, err := b.Acquire(ctx, "arr"); err != nil || lb != nil {
				t.Fatalf("B took a held lease: %v %v", lb, err)
			}
			// Renewal pushes the expiry: 50 s later, then 50 s more, still A's.
			now = now.Add(50 * time.Second)
			if err := la.Renew(ctx); err != nil {
				t.Fatal(err)
			}
			now = now.Add(50 * time.Second)
			if lb, _ := b.Acquire(ctx, "arr"); lb != nil {
				t.Fatal("B took a renewed lease")
			}
			// A stalls past the expiry: B takes over with generation 2.
			now = now.Add(61 * time.Second)
			lb, err := b.Acquire(ctx, "arr")
			if err != nil || lb == nil || lb.gen != 2 {
				t.Fatalf("B after expiry: %+v %v", lb, err)
			}
			if err := la.Renew(ctx); !errors.Is(err, ErrLeaseLost) {
				t.Fatalf("A renewing a lease taken over: %v", err)
			}
			// A's late release leaves B's lease alone.
			if err := la.Release(ctx); err != nil {
				t.Fatal(err)
			}
			if lc, _ := c.Acquire(ctx, "arr"); lc != nil {
				t.Fatal("C took B's lease after A's release")
			}
			// B releases: C takes it at once, generation 3; older ones go.
			if err := lb.Release(ctx); err != nil {
				t.Fatal(err)
			}
			lc, err := c.Acquire(ctx, "arr")
			if err != nil || lc == nil || lc.gen != 3 {
				t.Fatalf("C after release: %+v %v", lc, err)
			}
			gens, err := c.generations(ctx, "arr")
			if err != nil || fmt.Sprint(gens) != "[3]" {
				t.Fatalf("generations left: %v %v", gens, err)
			}
			// A damaged lease object counts as expired.
			if err := st.Put(ctx, c.key("arr", 4), []byte("{garbage")); err != nil {
				t.Fatal(err)
			}
			if la, _ := a.Acquire(ctx, "arr"); la == nil || la.gen != 5 {
				t.Fatalf("A over a damaged lease: %+v", la)
			}
		})
	}
}

// TestLeaseOneWinner races owners for one free lease: exactly one gets it
// (the stores with a conditional create; the best-effort path promises
// less and is not raced).
func TestLeaseOneWinner(t *testing.T) {
	ctx := context.Background()
	for name, st := range stores(t) {
		if name == "no-create" {
			continue
		}
		t.Run(name, func(t *testing.T) {
			for round := range 20 {
				arr := fmt.Sprint("arr", round)
				var wins atomic.Int32
				var wg sync.WaitGroup
				for i := range 8 {
					wg.Add(1)
					go func() {
						defer wg.Done()
						l, err := NewLeases(st, fmt.Sprint("owner", i), time.Minute).Acquire(ctx, arr)
						if err != nil {
							t.Error(err)
						}
						if l != nil {
							wins.Add(1)
						}
					}()
				}
				wg.Wait()
				if wins.Load() != 1 {
					t.Fatalf("round %d: %d owners hold the lease", round, wins.Load())
				}
			}
		})
	}
}

const sparseJSON = `{"type": "sparse", "capacity": 4,
 "dimensions": [{"name": "x", "type": "int64", "domain": [0, 999], "tile": 10}],
 "attributes": [{"name": "v", "type": "int64"}]}`

func i64s(v ...int64) []byte {
	b := make([]byte, 8*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint64(b[8*i:], uint64(x))
	}
	return b
}

func newArray(t *testing.T, st storage.Store, name string) *schema.ArraySchema {
	t.Helper()
	ctx := context.Background()
	s, err := schema.FromJSON([]byte(sparseJSON))
	if err != nil {
		t.Fatal(err)
	}
	if err := writer.CreateArray(ctx, st, name, s); err != nil {
		t.Fatal(err)
	}
	if s, err = writer.LoadSchema(ctx, st, name); err != nil {
		t.Fatal(err)
	}
	return s
}

// write writes cells x = k, 100+k at timestamp k (a rewrite of x = 100+k
// by later writes, none of x = k).
func write(t *testing.T, st storage.Store, name string, s *schema.ArraySchema, k int64) {
	t.Helper()
	cols := map[string]writer.Column{"x": {Data: i64s(k, 500)}, "v": {Data: i64s(10*k, k)}}
	if _, err := writer.WriteSparse(context.Background(), st, name, s, cols, writer.Options{Timestamp: uint64(k)}); err != nil {
		t.Fatal(err)
	}
}

// cells reads the whole array as "x=v" pairs.
func cells(t *testing.T, st storage.Store, name string) string {
	t.Helper()
	ctx := context.Background()
	r, err := reader.Open(ctx, st, &query.Query{Array: name, Limit: -1, Layout: query.LayoutRowMajor}, reader.Options{Workers: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var out []string
	for {
		rec, err := r.Next(ctx)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		xs, vs := rec.Column(0), rec.Column(1)
		for i := 0; i < int(rec.NumRows()); i++ {
			out = append(out, xs.ValueStr(i)+"="+vs.ValueStr(i))
		}
		rec.Release()
	}
	return strings.Join(out, " ")
}

func fragmentDirs(t *testing.T, st storage.Store, name string) int {
	es, err := st.List(context.Background(), storage.Join(name, names.FragmentsDir))
	if err != nil {
		t.Fatal(err)
	}
	return len(es)
}

type counts struct {
	mu                  sync.Mutex
	runs, merged, vacs  int
	failed, vacFailures int
}

func (c *counts) CompactionDone(merged int, _ time.Duration, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.runs++
	c.merged += merged
	if err != nil {
		c.failed++
	}
}

func (c *counts) VacuumDone(_ int, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.vacs++
	if err != nil {
		c.vacFailures++
	}
}

func (c *counts) get() (int, int, int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.runs, c.merged, c.vacs
}

func waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if ok() {
			return
		}
	}
	t.Fatalf("timed out waiting for %s", what)
}

// TestCompactAfterN: no compaction below the threshold; at it, the
// fragments are merged, the reads unchanged, and the vacuum comes after
// the grace.
func TestCompactAfterN(t *testing.T) {
	ctx := context.Background()
	st := storage.NewMem()
	s := newArray(t, st, "a")
	rec := &counts{}
	c := New(st, Options{After: 4, VacuumGrace: 200 * time.Millisecond, Owner: "me", Log: zerolog.Nop(), Metrics: rec})
	c.Start(ctx)
	defer c.Close()
	for k := int64(1); k <= 3; k++ {
		write(t, st, "a", s, k)
		c.Notify("a", 1)
	}
	time.Sleep(100 * time.Millisecond)
	if runs, _, _ := rec.get(); runs != 0 {
		t.Fatalf("compacted below the threshold: %d runs", runs)
	}
	write(t, st, "a", s, 4)
	want := cells(t, st, "a")
	c.Notify("a", 1)
	waitFor(t, "the compaction", func() bool { _, m, _ := rec.get(); return m == 4 })
	if n, err := Newer(ctx, st, "a", nil); err != nil || n != 0 {
		t.Fatalf("after the compaction, %d fragments newer than it (%v)", n, err)
	}
	if got := cells(t, st, "a"); got != want {
		t.Fatalf("reads changed:\n got %s\nwant %s", got, want)
	}
	st0, ok := c.Status("a")
	if !ok || st0.Merged != 4 || st0.VacuumAt.IsZero() {
		t.Fatalf("status: %+v %v", st0, ok)
	}
	// Before the grace, the old fragments are still there for the queries
	// that opened them.
	if d := fragmentDirs(t, st, "a"); d != 5 {
		t.Fatalf("%d fragment directories before the vacuum, want 5", d)
	}
	waitFor(t, "the vacuum", func() bool { _, _, v := rec.get(); return v == 1 })
	if d := fragmentDirs(t, st, "a"); d != 1 {
		t.Fatalf("%d fragment directories after the vacuum, want 1", d)
	}
	if got := cells(t, st, "a"); got != want {
		t.Fatalf("reads changed by the vacuum:\n got %s\nwant %s", got, want)
	}
	if _, _, f := rec.failed, 0, rec.vacFailures; f != 0 || rec.failed != 0 {
		t.Fatalf("failures: %+v", rec)
	}
}

// TestStartScan: writes made while no compactor ran are found at start.
func TestStartScan(t *testing.T) {
	st := storage.NewMem()
	s := newArray(t, st, "dir/b")
	for k := int64(1); k <= 5; k++ {
		write(t, st, "dir/b", s, k)
	}
	rec := &counts{}
	c := New(st, Options{After: 5, VacuumGrace: time.Hour, Owner: "me", Log: zerolog.Nop(), Metrics: rec,
		Arrays: func(context.Context) ([]string, error) { return []string{"dir/b"}, nil }})
	c.Start(context.Background())
	defer c.Close()
	waitFor(t, "the compaction", func() bool { _, m, _ := rec.get(); return m == 5 })
}

// TestWorkersBound: never more compactions at once than workers.
func TestWorkersBound(t *testing.T) {
	for _, workers := range []int{1, 2} {
		t.Run(fmt.Sprint(workers), func(t *testing.T) {
			st := storage.NewMem()
			var arrays []string
			for i := range 5 {
				name := fmt.Sprint("w", i)
				s := newArray(t, st, name)
				for k := int64(1); k <= 3; k++ {
					write(t, st, name, s, k)
				}
				arrays = append(arrays, name)
			}
			var running, peak atomic.Int32
			testHook = func(_ string, start bool) {
				if !start {
					running.Add(-1)
					return
				}
				n := running.Add(1)
				for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
				}
				time.Sleep(30 * time.Millisecond) // long enough to overlap if allowed
			}
			defer func() { testHook = nil }()
			rec := &counts{}
			c := New(st, Options{After: 3, Workers: workers, VacuumGrace: time.Hour, Owner: "me", Log: zerolog.Nop(), Metrics: rec})
			c.Start(context.Background())
			defer c.Close()
			for _, a := range arrays {
				c.Notify(a, 3)
			}
			waitFor(t, "every compaction", func() bool { r, _, _ := rec.get(); return r == len(arrays) })
			if p := peak.Load(); p > int32(workers) || (workers > 1 && p < 2) {
				t.Fatalf("peak %d compactions at once with %d workers", p, workers)
			}
		})
	}
}

// TestForeignLease: an array whose lease another node holds is left to
// it; once that lease expires, this node compacts.
func TestForeignLease(t *testing.T) {
	st := storage.NewMem()
	s := newArray(t, st, "a")
	for k := int64(1); k <= 3; k++ {
		write(t, st, "a", s, k)
	}
	other := NewLeases(st, "other", 400*time.Millisecond)
	if l, err := other.Acquire(context.Background(), "a"); l == nil || err != nil {
		t.Fatal(l, err)
	}
	rec := &counts{}
	c := New(st, Options{After: 3, VacuumGrace: time.Hour, Owner: "me", Log: zerolog.Nop(), Metrics: rec})
	c.Start(context.Background())
	defer c.Close()
	c.Notify("a", 3)
	time.Sleep(150 * time.Millisecond)
	if r, _, _ := rec.get(); r != 0 {
		t.Fatal("compacted under another node's lease")
	}
	time.Sleep(300 * time.Millisecond)
	write(t, st, "a", s, 4)
	c.Notify("a", 1)
	waitFor(t, "the compaction after the expiry", func() bool { _, m, _ := rec.get(); return m == 4 })
}

// TestCloseStopsSafely: Close during a compaction stops it; the array
// reads as before and holds no partial fragment.
func TestCloseStopsSafely(t *testing.T) {
	st := storage.NewMem()
	s := newArray(t, st, "a")
	for k := int64(1); k <= 4; k++ {
		write(t, st, "a", s, k)
	}
	want := cells(t, st, "a")
	started := make(chan struct{}, 1)
	testHook = func(_ string, start bool) {
		if start {
			started <- struct{}{}
			time.Sleep(50 * time.Millisecond)
		}
	}
	defer func() { testHook = nil }()
	c := New(st, Options{After: 4, VacuumGrace: time.Hour, Owner: "me", Log: zerolog.Nop()})
	c.Start(context.Background())
	c.Notify("a", 4)
	<-started
	c.Close()
	if got := cells(t, st, "a"); got != want {
		t.Fatalf("reads changed:\n got %s\nwant %s", got, want)
	}
	committed, err := writer.Committed(context.Background(), st, "a")
	if err != nil {
		t.Fatal(err)
	}
	es, _ := st.List(context.Background(), storage.Join("a", names.FragmentsDir))
	var stray []string
	for _, e := range es {
		if !committed(e.Name) {
			stray = append(stray, e.Name)
		}
	}
	sort.Strings(stray)
	if len(stray) > 0 {
		t.Fatalf("uncommitted fragments left by a stopped compaction: %v", stray)
	}
}

// FuzzLeaseObject: whatever bytes a lease object holds (a damaged or
// hostile one), Acquire neither panics nor fails: it is a lease of its
// owner until its expiry, or expired.
func FuzzLeaseObject(f *testing.F) {
	f.Add([]byte(`{"owner":"x","expires":99999999999999}`))
	f.Add([]byte(`{"owner":"me","expires":1}`))
	f.Add([]byte(`{garbage`))
	f.Add([]byte(`{"owner":7,"expires":"soon"}`))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		ctx := context.Background()
		st := storage.NewMem()
		l := NewLeases(st, "me", time.Minute)
		if err := st.Put(ctx, l.key("a", 1), b); err != nil {
			t.Fatal(err)
		}
		h, err := l.Acquire(ctx, "a")
		if err != nil {
			t.Fatal(err)
		}
		if h != nil && h.gen != 1 && h.gen != 2 {
			t.Fatalf("generation %d", h.gen)
		}
	})
}

// TestExclusive: the consolidate and vacuum actions run under Exclusive,
// which refuses (Unavailable) while this node compacts the array or
// another node holds its lease, and otherwise runs them under the lease.
func TestExclusive(t *testing.T) {
	ctx := context.Background()
	st := storage.NewMem()
	s := newArray(t, st, "a")
	for k := int64(1); k <= 3; k++ {
		write(t, st, "a", s, k)
	}
	release := make(chan struct{})
	var releaseOnce sync.Once
	free := func() { releaseOnce.Do(func() { close(release) }) }
	started := make(chan struct{}, 1)
	testHook = func(_ string, start bool) {
		if start {
			started <- struct{}{}
			<-release
		}
	}
	defer func() { testHook = nil }()
	c := New(st, Options{After: 3, VacuumGrace: time.Hour, Owner: "me", Log: zerolog.Nop()})
	c.Start(ctx)
	defer c.Close()
	defer free() // first: a failure must not leave the compaction (and Close) waiting
	ran := 0
	fn := func(context.Context) error { ran++; return nil }
	c.Notify("a", 3)
	<-started
	if err := c.Exclusive(ctx, "a", fn); !errors.Is(err, errkind.Unavailable) || !strings.Contains(err.Error(), "this node is compacting") {
		t.Fatalf("during a compaction: %v", err)
	}
	free()
	waitFor(t, "the compaction's end", func() bool { _, ok := c.Status("a"); return ok })
	waitFor(t, "the lease's release", func() bool { return c.Exclusive(ctx, "a", fn) == nil })
	if ran != 1 {
		t.Fatalf("fn ran %d times", ran)
	}
	other := NewLeases(st, "other", time.Minute)
	if l, err := other.Acquire(ctx, "a"); l == nil || err != nil {
		t.Fatal(l, err)
	}
	if err := c.Exclusive(ctx, "a", fn); !errors.Is(err, errkind.Unavailable) || !strings.Contains(err.Error(), "another node") {
		t.Fatalf("under another node's lease: %v", err)
	}
	var nilc *Compactor
	if err := nilc.Exclusive(ctx, "a", fn); err != nil || ran != 2 {
		t.Fatalf("compaction off: %v, ran %d", err, ran)
	}
}
