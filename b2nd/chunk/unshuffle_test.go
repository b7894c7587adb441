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
