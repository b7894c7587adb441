package b2nd

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"

	"github.com/tileflight/tileflight/b2nd/chunk"
	"github.com/tileflight/tileflight/errkind"
)

// This file computes the chunk and block shapes python-blosc2 (4.x)
// chooses when an array is created without them (its
// compute_chunks_blocks), so that create_array makes the arrays a
// python-blosc2 user would get: a block of about a quarter of the L2 cache
// (x86-64), a chunk of a quarter of the L3 cache, at least 4 MiB, both
// partitions filled from the last dimension and snapped to divisors of the
// shape. The heuristic reads the machine's cache sizes as python-blosc2
// does on Linux (sysfs), so both agree on the same machine.

// CacheSizes are the cache sizes the heuristic uses.
type CacheSizes struct{ L1D, L2, L3 int64 }

// maxBufferSize is c-blosc2's BLOSC2_MAX_BUFFERSIZE.
const maxBufferSize = 1<<31 - 1 - 32

var (
	cacheOnce sync.Once
	cacheSize CacheSizes
)

// MachineCaches reads the L1 data, L2 and L3 sizes of CPU 0 from sysfs,
// with python-blosc2's defaults (32 KiB, 256 KiB, 1 MiB) where they are
// not known.
func MachineCaches() CacheSizes {
	cacheOnce.Do(func() {
		cacheSize = CacheSizes{L1D: 32 << 10, L2: 256 << 10, L3: 1 << 20}
		read := func(index int, dst *int64) {
			b, err := os.ReadFile(fmt.Sprintf("/sys/devices/system/cpu/cpu0/cache/index%d/size", index))
			if err != nil {
				return
			}
			s := strings.TrimSpace(string(b))
			mult := int64(0)
			switch {
			case strings.HasSuffix(s, "K"):
				mult = 1 << 10
			case strings.HasSuffix(s, "M"):
				mult = 1 << 20
			case strings.HasSuffix(s, "G"):
				mult = 1 << 30
			}
			if n, err := strconv.ParseInt(strings.TrimRight(s, "KMG"), 10, 64); err == nil && mult > 0 {
				*dst = n * mult
			}
		}
		// index0 is the L1 data cache (index1 its instruction cache).
		read(0, &cacheSize.L1D)
		read(2, &cacheSize.L2)
		read(3, &cacheSize.L3)
	})
	return cacheSize
}

// DefaultChunksBlocks fills in chunks and blocks (either may be nil) for
// an array of shape and itemsize as python-blosc2 does for the caches c.
// As there, given blocks only set the block's size: its shape is computed
// again (python-blosc2 4.x behaves so).
func DefaultChunksBlocks(shape, chunks, blocks []int64, itemsize int, c CacheSizes) ([]int64, []int64, error) {
	return defaultChunksBlocks(shape, chunks, blocks, itemsize, c, runtime.GOARCH == "amd64")
}

// defaultChunksBlocks is DefaultChunksBlocks for an x86-64 machine or not
// (python-blosc2's block size rule depends on it).
func defaultChunksBlocks(shape, chunks, blocks []int64, itemsize int, c CacheSizes, x86 bool) ([]int64, []int64, error) {
	zero := false
	for _, n := range shape {
		zero = zero || n == 0
	}
	if zero && chunks == nil && blocks == nil {
		return append([]int64(nil), shape...), append([]int64(nil), shape...), nil
	}
	for _, p := range [][]int64{chunks, blocks} {
		if p == nil {
			continue
		}
		if len(p) != len(shape) {
			return nil, nil, errkind.Errorf(errkind.InvalidArgument, "chunks and blocks need one size per dimension (%d)", len(shape))
		}
		for i, v := range p {
			if v <= 0 && shape[i] != 0 || v < 0 {
				return nil, nil, errkind.Errorf(errkind.InvalidArgument, "chunks and blocks cannot hold %d where the shape is %d", v, shape[i])
			}
		}
	}
	if chunks != nil && blocks != nil {
		for i := range blocks {
			if blocks[i] > chunks[i] {
				return nil, nil, errkind.Errorf(errkind.InvalidArgument, "blocks %v cannot be larger than chunks %v", blocks, chunks)
			}
		}
		return chunks, blocks, nil
	}
	if zero {
		return nil, nil, errkind.Errorf(errkind.InvalidArgument, "give both chunks and blocks for a shape with a zero size (%v)", shape)
	}
	is := int64(itemsize)
	var blocksize int64
	if blocks == nil {
		blocksize = 32 << 10
		minBS := blocksize
		if x86 {
			// python-blosc2: a quarter of L2, or 4 L1s when L2 is 2 MiB+.
			minBS = c.L2 / 4
			if c.L2 >= 1<<21 {
				minBS = c.L1D * 4
			}
		} else {
			minBS = c.L1D
		}
		blocksize = max(blocksize, minBS, is)
	} else {
		blocksize = is
		for _, b := range blocks {
			blocksize *= b
		}
	}
	if blocksize > chunk.MaxBlockSize {
		return nil, nil, errkind.Errorf(errkind.InvalidArgument, "a block of %d bytes is larger than Blosc2's %d", blocksize, chunk.MaxBlockSize)
	}
	maxshape := shape
	if chunks != nil {
		maxshape = chunks
	}
	blocks = partition(blocksize/is, maxshape, nil)
	if chunks == nil {
		blocksize = is
		for _, b := range blocks {
			blocksize *= b
		}
		cs := defaultChunkSize(blocksize, c)
		if cs%blocksize != 0 {
			cs = cs / blocksize * blocksize
		}
		chunks = partition(cs/is, shape, blocks)
		// Snapping to divisors of the shape may break "chunks are a
		// multiple of blocks": round up, within the shape.
		for i := range chunks {
			if chunks[i]%blocks[i] != 0 {
				chunks[i] = (chunks[i]/blocks[i] + 1) * blocks[i]
			}
			chunks[i] = min(chunks[i], shape[i])
		}
	}
	return chunks, blocks, nil
}

// defaultChunkSize is python-blosc2's get_chunksize (reduction factor 4).
func defaultChunkSize(blocksize int64, c CacheSizes) int64 {
	const l3min, l3max, reduc = 4 << 20, 1 << 26, 4
	cs := blocksize
	if blocksize*32 < l3max {
		cs = blocksize * 32
	}
	if c.L3 > 0 && c.L3 > c.L2 {
		cs = c.L3
	}
	cs /= reduc
	if c.L2 > cs {
		cs = max(c.L2/reduc, cs)
	}
	cs = max(cs, l3min)
	cs = min(cs, maxBufferSize)
	return max(cs, blocksize)
}

// partition fills nitems into a shape bounded by maxshape, from the last
// dimension, each size snapped to a divisor of the dimension where one is
// near (python-blosc2's compute_partition).
func partition(nitems int64, maxshape, minpart []int64) []int64 {
	left := nitems
	out := make([]int64, len(maxshape))
	for i := range out {
		out[i] = 1
	}
	for d := len(maxshape) - 1; d >= 0; d-- {
		if left <= 1 {
			break
		}
		size, minsize := maxshape[d], int64(1)
		if minpart != nil {
			minsize = minpart[d]
		}
		r := max(size, minsize)
		if r <= left {
			if size%r != 0 {
				r = nearestDivisor(size, r, false)
			}
		} else {
			r = max(left, minsize)
			nr := r
			if size%r != 0 {
				nr = nearestDivisor(size, r, true)
			}
			if r/2 < nr && nr < r*2 {
				r = nr
			}
		}
		out[d] = r
		left /= r
	}
	return out
}

// nearestDivisor is the divisor of a closest to b (python-blosc2's): for
// large a, or strict, the largest divisor not above b.
func nearestDivisor(a, b int64, strict bool) int64 {
	if a > 100_000 || strict {
		for i := b; i > 0; i-- {
			if a%i == 0 {
				return i
			}
		}
		return 1
	}
	closest, best := int64(1), a
	for i := int64(1); i*i <= a; i++ {
		if a%i != 0 {
			continue
		}
		if d := abs64(i - b); d < best {
			best, closest = d, i
		}
		if d := abs64(a/i - b); d < best {
			best, closest = d, a/i
		}
	}
	return closest
}

func abs64(v int64) int64 {
	if v < 0 {
		return -v
	}
	return v
}
