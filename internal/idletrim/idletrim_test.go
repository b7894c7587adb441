package idletrim

import (
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tileflight/tileflight/internal/bufpool"
)

// waitFor polls until n reaches want, failing after a deadline generous
// enough for a loaded machine.
func waitFor(t *testing.T, what string, n *atomic.Int64, want int64) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for n.Load() < want {
		if time.Now().After(deadline) {
			t.Fatalf("%s ran %d times in 5 s, want %d", what, n.Load(), want)
		}
		time.Sleep(time.Millisecond)
	}
}

// expect checks that a stage has run exactly want times so far.
func expect(t *testing.T, what string, n *atomic.Int64, want int64) {
	t.Helper()
	if got := n.Load(); got != want {
		t.Fatalf("%s ran %d times, want %d", what, got, want)
	}
}

// TestTrimmer: each stage runs once per idle period, in order, after its
// own idle time; none runs while work runs, between back-to-back work, or
// before any work; an end counts once.
func TestTrimmer(t *testing.T) {
	const first, second = 40 * time.Millisecond, 200 * time.Millisecond
	for _, c := range []struct {
		name string
		run  func(t *testing.T, tr *Trimmer, a, b *atomic.Int64)
	}{
		{"stages run once each, in order", func(t *testing.T, tr *Trimmer, a, b *atomic.Int64) {
			start := time.Now()
			tr.Begin()()
			waitFor(t, "stage 1", a, 1)
			expect(t, "stage 2", b, 0)
			waitFor(t, "stage 2", b, 1)
			if d := time.Since(start); d < second {
				t.Fatalf("stage 2 ran after %v of idleness, want >= %v", d, second)
			}
			time.Sleep(2 * second) // the idle period goes on: nothing more
			expect(t, "stage 1", a, 1)
			expect(t, "stage 2", b, 1)
			tr.Begin()() // a new idle period
			waitFor(t, "stage 1", a, 2)
			waitFor(t, "stage 2", b, 2)
		}},
		{"work between the stages starts over", func(t *testing.T, tr *Trimmer, a, b *atomic.Int64) {
			tr.Begin()()
			waitFor(t, "stage 1", a, 1)
			end := tr.Begin()
			time.Sleep(2 * second)
			expect(t, "stage 2", b, 0) // work ran when its time came
			end()
			waitFor(t, "stage 1", a, 2)
			waitFor(t, "stage 2", b, 1)
		}},
		{"nothing before any work", func(t *testing.T, tr *Trimmer, a, b *atomic.Int64) {
			time.Sleep(2 * second)
			expect(t, "stage 1", a, 0)
			expect(t, "stage 2", b, 0)
		}},
		{"nothing while work runs", func(t *testing.T, tr *Trimmer, a, b *atomic.Int64) {
			end := tr.Begin()
			time.Sleep(2 * second)
			expect(t, "stage 1", a, 0)
			end()
			waitFor(t, "stage 1", a, 1)
		}},
		{"overlapping work: idle only when all ended", func(t *testing.T, tr *Trimmer, a, b *atomic.Int64) {
			endA, endB := tr.Begin(), tr.Begin()
			endA()
			time.Sleep(10 * first)
			expect(t, "stage 1", a, 0)
			endB()
			waitFor(t, "stage 1", a, 1)
		}},
		{"an end called twice counts once", func(t *testing.T, tr *Trimmer, a, b *atomic.Int64) {
			endA, endB := tr.Begin(), tr.Begin()
			endA()
			endA() // must not end B's work too
			time.Sleep(10 * first)
			expect(t, "stage 1", a, 0)
			endB()
			waitFor(t, "stage 1", a, 1)
		}},
		{"back-to-back work keeps its memory", func(t *testing.T, tr *Trimmer, a, b *atomic.Int64) {
			// Queries a client sends one after another (gaps far below
			// the interval) never see a stage run, however long they go on.
			for start := time.Now(); time.Since(start) < 10*first; {
				end := tr.Begin()
				time.Sleep(first / 40)
				end()
				time.Sleep(first / 40)
			}
			expect(t, "stage 1", a, 0)
			waitFor(t, "stage 1", a, 1)
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel() // each waits on timers, not on the CPU
			var a, b atomic.Int64
			tr := New(Stage{first, func() { a.Add(1) }}, Stage{second, func() { b.Add(1) }})
			c.run(t, tr, &a, &b)
			if tr.Runs() != a.Load()+b.Load() {
				t.Fatalf("Runs %d, stages ran %d + %d", tr.Runs(), a.Load(), b.Load())
			}
		})
	}
}

// TestStageHoldsOffWork: work that begins while a stage runs waits for
// it, so that a trim never overlaps a query.
func TestStageHoldsOffWork(t *testing.T) {
	var inStage atomic.Bool
	started := make(chan struct{}, 1)
	tr := New(Stage{time.Millisecond, func() {
		inStage.Store(true)
		select {
		case started <- struct{}{}:
		default:
		}
		time.Sleep(50 * time.Millisecond)
		inStage.Store(false)
	}})
	tr.Begin()()
	<-started
	end := tr.Begin()
	if inStage.Load() {
		t.Fatal("work began while a stage ran")
	}
	end()
}

// TestOff: stages with no idle time are left out; with none left there
// is no Trimmer, and a nil one still takes Begin and end.
func TestOff(t *testing.T) {
	tr := New(Stage{0, func() { t.Error("a stage with After 0 ran") }})
	if tr != nil {
		t.Fatal("New with no stage after 0 is not nil")
	}
	tr.Begin()()
	if tr.Runs() != 0 {
		t.Fatal("a nil Trimmer counted a run")
	}
	var ran atomic.Int64
	tr = New(Stage{0, func() { t.Error("a stage with After 0 ran") }}, Stage{time.Millisecond, func() { ran.Add(1) }})
	tr.Begin()()
	waitFor(t, "the stage left", &ran, 1)
}

// TestDropPools: the daemon's first stage empties the free lists and says
// how much they held.
func TestDropPools(t *testing.T) {
	bufpool.Trim()
	b := bufpool.Get(1 << 20)
	bufpool.Put(b)
	if bufpool.Pooled() != int64(cap(b)) {
		t.Fatalf("Pooled %d, want %d", bufpool.Pooled(), cap(b))
	}
	if n := DropPools(); n != int64(cap(b)) || bufpool.Pooled() != 0 {
		t.Fatalf("DropPools dropped %d (want %d), %d left pooled", n, cap(b), bufpool.Pooled())
	}
}

// TestStagesRunInOrderOfAfter: stages given out of order run in order of
// After, each when its own time comes (a later stage listed first does
// not hold back an earlier one); equal Afters keep the order given.
func TestStagesRunInOrderOfAfter(t *testing.T) {
	var mu sync.Mutex
	var order []string
	var ran atomic.Int64
	stage := func(name string) func() {
		return func() {
			mu.Lock()
			order = append(order, name)
			mu.Unlock()
			ran.Add(1)
		}
	}
	tr := New(Stage{time.Hour, stage("late")}, Stage{20 * time.Millisecond, stage("first")},
		Stage{20 * time.Millisecond, stage("second")})
	tr.Begin()()
	waitFor(t, "the two early stages", &ran, 2) // 5 s, not the hour
	time.Sleep(100 * time.Millisecond)
	mu.Lock()
	defer mu.Unlock()
	if got := strings.Join(order, ","); got != "first,second" {
		t.Fatalf("stages ran as %q, want \"first,second\" (the hour-long one not yet)", got)
	}
}
