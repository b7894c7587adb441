package bufpool

import (
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"
)

// TestClass: 8 classes per power of two above 4 KiB, each at least n and
// wasting at most an eighth of its capacity.
func TestClass(t *testing.T) {
	for _, c := range []struct{ n, want int }{
		{0, 4096}, {1, 4096}, {4096, 4096},
		{4097, 4608}, {8192, 8192}, {8193, 9216},
		{800_032, 851_968}, // a 100 000 cell float64 tile and its decode slack
		{1 << 20, 1 << 20}, {1<<20 + 1, 1<<20 + 1<<17},
	} {
		got := class(c.n)
		if got != c.want {
			t.Errorf("class(%d) = %d, want %d", c.n, got, c.want)
		}
		if got < c.n || c.n > minClass && got-c.n > got/8 {
			t.Errorf("class(%d) = %d: too small or too wasteful", c.n, got)
		}
		if class(got) != got {
			t.Errorf("class(%d) = %d is not its own class", got, class(got))
		}
	}
}

// TestGetPutReuse: a buffer handed back is handed out again for any
// length of its class; foreign buffers are ignored.
func TestGetPutReuse(t *testing.T) {
	drain(300_000)
	b := Get(300_000)
	if len(b) != 300_000 || cap(b) != class(300_000) {
		t.Fatalf("Get: len %d cap %d", len(b), cap(b))
	}
	before := Pooled()
	Put(b)
	if Pooled() != before+int64(cap(b)) {
		t.Fatalf("Pooled %d after Put, want %d", Pooled(), before+int64(cap(b)))
	}
	c := Get(299_000) // same class (327 680)
	if &c[:1][0] != &b[:1][0] {
		t.Fatal("Get did not reuse the buffer handed back")
	}
	Put(make([]byte, 300_000)) // not a class capacity
	if Pooled() != before {
		t.Fatalf("Pooled %d after a foreign Put, want %d", Pooled(), before)
	}
}

// TestBufRefs: the bytes return to the free lists at the last release,
// whether it comes from Release or from an Arrow buffer's Free, and only
// then; a release too many panics.
func TestBufRefs(t *testing.T) {
	restore := SetPoison(Poison)
	defer restore()
	drain(100_000)
	b := New(100_000, 100_032)
	data := b.Bytes()
	data[0] = 1
	b.Retain()
	ab := memory.NewBufferWithAllocator(data, b) // holds the reference just taken
	b.Release()
	if data[0] != 1 {
		t.Fatal("recycled while an Arrow buffer held it")
	}
	ab.Retain()
	ab.Release()
	if data[0] != 1 {
		t.Fatal("recycled while an Arrow buffer held it")
	}
	ab.Release()
	if data[0] != 0xA5 {
		t.Fatal("not recycled after the last release")
	}
	defer func() {
		if recover() == nil {
			t.Fatal("a release too many did not panic")
		}
	}()
	b.Release()
}

// TestMaxPooled: the free lists never hold more than MaxPooled bytes.
func TestMaxPooled(t *testing.T) {
	var bufs [][]byte
	for i := 0; i < 2*MaxPooled/(1<<20); i++ {
		bufs = append(bufs, Get(1<<20))
	}
	for _, b := range bufs {
		Put(b)
	}
	if Pooled() > MaxPooled {
		t.Fatalf("Pooled %d > %d", Pooled(), MaxPooled)
	}
}

// drain empties n's class, so that the test sees its own buffers.
func drain(n int) {
	for {
		select {
		case <-list(class(n)):
			pooled.Add(-int64(class(n)))
		default:
			return
		}
	}
}

// TestTrim: Trim empties every class and reports what they held; a
// buffer in use when it ran still comes back to the lists afterwards.
func TestTrim(t *testing.T) {
	Trim()
	a, b, inUse := Get(100_000), Get(3<<20), Get(5000)
	Put(a)
	Put(b)
	want := int64(cap(a) + cap(b))
	if n := Trim(); n != want || Pooled() != 0 {
		t.Fatalf("Trim dropped %d, want %d; %d still pooled", n, want, Pooled())
	}
	if c := Get(100_000); &c[:1][0] == &a[:1][0] {
		t.Fatal("a trimmed buffer was handed out again")
	}
	Put(inUse)
	if Pooled() != int64(cap(inUse)) {
		t.Fatalf("Pooled %d after putting back the buffer in use, want %d", Pooled(), cap(inUse))
	}
}
