//go:build !amd64

package chunk

// unshuffleWide has no vector kernel off amd64: the portable loops of
// unshufflePlanes do all the work.
func unshuffleWide(planes [][]byte, e0, e1 int, out []byte) int { return 0 }
