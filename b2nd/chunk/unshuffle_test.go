package chunk

import (
	"bytes"
	"testing"
)

func TestUnshuffle8(t *testing.T) {
	for _, n := range []int{8, 16, 24, 100, 1027} {
		src := make([]byte, n)
		for i := range src {
			src[i] = byte(i*31 + i/7)
		}
		a, b, c := make([]byte, n), make([]byte, n), make([]byte, n)
		Shuffle(8, src, a)
		Unshuffle(8, a, b)
		if !bytes.Equal(b, src) {
			t.Fatalf("n %d", n)
		}
		// reference: generic path
		m := n / 8
		for j := 0; j < 8; j++ {
			for i := 0; i < m; i++ {
				c[i*8+j] = a[j*m+i]
			}
		}
		copy(c[m*8:], a[m*8:])
		if !bytes.Equal(c, src) {
			t.Fatal("ref")
		}
	}
}

// TestUnshuffleSpan checks that unshuffling a byte range writes exactly
// what Unshuffle writes there, and nothing outside the range's elements.
func TestUnshuffleSpan(t *testing.T) {
	for _, ts := range []int{1, 2, 3, 4, 8, 16} {
		for _, n := range []int{1, 7, 64, 101, 1027} {
			src := make([]byte, n)
			for i := range src {
				src[i] = byte(i*31 + i/7 + 1)
			}
			sh, want := make([]byte, n), make([]byte, n)
			Shuffle(ts, src, sh)
			Unshuffle(ts, sh, want)
			if !bytes.Equal(want, src) {
				t.Fatalf("ts %d n %d: Unshuffle", ts, n)
			}
			for _, r := range [][2]int{{0, n}, {0, 1}, {ts, 3 * ts}, {n / 3, n / 2}, {n - 1, n}, {5 * ts, 5*ts + 17*ts}, {n / 2, n + 40}} {
				a, b := r[0], min(r[1], n)
				if a >= b {
					continue
				}
				got := bytes.Repeat([]byte{0xEE}, n)
				UnshuffleSpan(ts, sh, got, a, b)
				if !bytes.Equal(got[a:b], want[a:b]) {
					t.Fatalf("ts %d n %d span [%d, %d): wrong bytes", ts, n, a, b)
				}
				lo, hi := a, b
				if ts > 1 && n/ts > 0 {
					lo = min(a/ts*ts, a)
					hi = max(b, min((b+ts-1)/ts, n/ts)*ts)
				}
				for k := range got {
					if (k < lo || k >= hi) && got[k] != 0xEE {
						t.Fatalf("ts %d n %d span [%d, %d): byte %d written", ts, n, a, b, k)
					}
				}
			}
		}
	}
}

// TestUnshufflePlanesSpan: the plane-wise span unshuffle writes what
// Unshuffle writes there.
func TestUnshufflePlanesSpan(t *testing.T) {
	for _, ts := range []int{2, 4, 8} {
		for _, n := range []int{1, 9, 64, 1000} {
			src := make([]byte, n*ts)
			for i := range src {
				src[i] = byte(i*29 + i/5 + 3)
			}
			sh, want := make([]byte, len(src)), make([]byte, len(src))
			Shuffle(ts, src, sh)
			Unshuffle(ts, sh, want)
			planes := make([][]byte, ts)
			for j := range planes {
				planes[j] = bytes.Clone(sh[j*n : (j+1)*n])
			}
			for _, r := range [][2]int{{0, n * ts}, {ts, 3 * ts}, {n / 2 * ts, n * ts}, {1, 2}, {(n - 1) * ts, n * ts}} {
				a, b := r[0], min(r[1], n*ts)
				if a >= b {
					continue
				}
				got := bytes.Repeat([]byte{0xEE}, n*ts)
				UnshufflePlanesSpan(planes, got, a, b)
				lo, hi := a/ts*ts, (b+ts-1)/ts*ts
				if !bytes.Equal(got[lo:hi], want[lo:hi]) {
					t.Fatalf("ts %d n %d [%d, %d): wrong bytes", ts, n, a, b)
				}
				for k := range got {
					if (k < lo || k >= hi) && got[k] != 0xEE {
						t.Fatalf("ts %d n %d [%d, %d): byte %d written", ts, n, a, b, k)
					}
				}
			}
		}
	}
}

// refUnshuffle is the definition of unshuffle, byte by byte: element i's
// byte j is plane j's byte i.
func refUnshuffle(ts int, src []byte) []byte {
	out := bytes.Clone(src)
	n := len(src) / ts
	for j := 0; j < ts; j++ {
		for i := 0; i < n; i++ {
			out[i*ts+j] = src[j*n+i]
		}
	}
	return out
}

// TestUnshuffleKernels checks the vector kernels and the portable loops
// (every element count around the kernels' 16-element steps, every
// element size with and without a kernel) against the definition, and
// UnshufflePlanesTo over ranges that start and end inside elements.
func TestUnshuffleKernels(t *testing.T) {
	for _, ts := range []int{1, 2, 3, 4, 5, 8, 16} {
		for _, n := range []int{0, 1, 15, 16, 17, 31, 32, 33, 100, 1029} {
			src := make([]byte, n*ts+ts/2)
			for i := range src {
				src[i] = byte(i*37 + i/11 + 5)
			}
			want := refUnshuffle(ts, src)
			got := bytes.Repeat([]byte{0xEE}, len(src))
			Unshuffle(ts, src, got)
			if !bytes.Equal(got, want) {
				t.Fatalf("ts %d n %d: Unshuffle differs", ts, n)
			}
			if n == 0 {
				continue
			}
			planes := make([][]byte, ts)
			for j := range planes {
				planes[j] = bytes.Clone(src[j*n : (j+1)*n])
			}
			for _, r := range [][2]int{{0, n * ts}, {1, n * ts}, {0, n*ts - 1}, {ts - 1, ts + 1}, {3, 3 + 17*ts}, {n * ts / 3, n*ts/2 + 1}, {n*ts - 1, n * ts}, {2, 2}} {
				a, b := min(r[0], n*ts), min(r[1], n*ts)
				out := bytes.Repeat([]byte{0xEE}, b-a+8)
				UnshufflePlanesTo(planes, a, b, out)
				if !bytes.Equal(out[:b-a], want[a:b]) {
					t.Fatalf("ts %d n %d: UnshufflePlanesTo [%d, %d) differs", ts, n, a, b)
				}
				if !bytes.Equal(out[b-a:], bytes.Repeat([]byte{0xEE}, 8)) {
					t.Fatalf("ts %d n %d: UnshufflePlanesTo [%d, %d) wrote past its range", ts, n, a, b)
				}
			}
		}
	}
}

// TestUnshuffleLarge: blocks large enough for the non-temporal kernel,
// written to aligned and unaligned places (where the ordinary kernel
// runs), equal the definition.
func TestUnshuffleLarge(t *testing.T) {
	for _, n := range []int{8192, 8192 + 16, 20000 + 5} {
		src := make([]byte, 8*n+3)
		for i := range src {
			src[i] = byte(i*131 + i/257)
		}
		want := refUnshuffle(8, src)
		for _, off := range []int{0, 1, 8} {
			buf := make([]byte, len(src)+off+16)
			out := buf[off : off+len(src)]
			Unshuffle(8, src, out)
			if !bytes.Equal(out, want) {
				t.Fatalf("n %d at offset %d: differs", n, off)
			}
		}
	}
}

func BenchmarkUnshuffle8(b *testing.B) {
	src := make([]byte, 256<<10)
	for i := range src {
		src[i] = byte(i * 7)
	}
	dst := make([]byte, len(src))
	b.SetBytes(int64(len(src)))
	for b.Loop() {
		Unshuffle(8, src, dst)
	}
}
