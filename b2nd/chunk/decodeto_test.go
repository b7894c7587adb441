package chunk

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"
)

// TestDecodeBlockTo decodes random runs of every block of chunks of every
// codec, filter set and split mode (with a last block shorter than the
// others, and data that leaves some planes raw and some a run) straight
// into an output buffer, and checks each run against the block decoded
// whole, and that nothing outside the runs is written.
func TestDecodeBlockTo(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, ts := range []int{2, 4, 8} {
		n := 3000 * ts / 2 // blocks of 512 bytes: 5 whole ones and a short one
		data := make([]byte, n)
		for i := range data {
			switch i % ts {
			case 0:
				data[i] = byte(rng.Uint32()) // incompressible: stored raw
			case ts - 1:
				data[i] = 0x40 // constant: a run
			default:
				data[i] = byte(i / 97)
			}
		}
		for _, codec := range []int{CodecBloscLZ, CodecLZ4, CodecZlib, CodecZstd} {
			for fi, fl := range [][6]uint8{{}, {5: FilterShuffle}, {5: FilterBitshuffle}, {4: FilterDelta, 5: FilterShuffle}, {4: FilterShuffle, 5: FilterBytedelta}} {
				for _, split := range []int{AlwaysSplit, NeverSplit} {
					name := fmt.Sprintf("ts%d/codec%d/filters%d/split%d", ts, codec, fi, split)
					t.Run(name, func(t *testing.T) {
						b, err := Encode(Params{Typesize: ts, BlockSize: 512, Codec: codec, CLevel: 5, Filters: fl, SplitMode: split}, data)
						if err != nil {
							t.Fatal(err)
						}
						checkDecodeBlockTo(t, rng, b, data)
					})
				}
			}
		}
	}
	t.Run("special", func(t *testing.T) {
		checkDecodeBlockTo(t, rng, Repeat(Params{Typesize: 4, BlockSize: 64}, []byte{1, 2, 3, 4}, 256), bytes.Repeat([]byte{1, 2, 3, 4}, 64))
		checkDecodeBlockTo(t, rng, Special(Params{Typesize: 8, BlockSize: 64}, SpecialZero, 200), make([]byte, 200))
	})
}

func checkDecodeBlockTo(t *testing.T, rng *rand.Rand, b, data []byte) {
	t.Helper()
	c, err := Parse(b, len(data))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ref := make([]byte, c.BlockLen(0))
	if err := c.DecodeBlock(0, ref, nil, nil); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < c.NBlocks(); i++ {
		bl := c.BlockLen(i)
		want := data[i*c.BlockSize : i*c.BlockSize+bl]
		off, end := c.BlockRange(i)
		src := c.data[off:end]
		for try := 0; try < 8; try++ {
			// Runs as {block offset, length, output offset}.
			var rs [][3]int
			switch try {
			case 0: // the whole block in one run, somewhere in the output
				rs = [][3]int{{0, bl, 3}}
			case 1: // the whole block in two runs, swapped
				rs = [][3]int{{bl / 2, bl - bl/2, 0}, {0, bl / 2, bl - bl/2}}
			default:
				dst := 0
				for k := rng.IntN(5); k >= 0; k-- {
					o := rng.IntN(bl)
					l := rng.IntN(bl - o + 1)
					rs = append(rs, [3]int{o, l, dst})
					dst += l + rng.IntN(3)
				}
			}
			size := bl + 3
			for _, r := range rs {
				size = max(size, r[2]+r[1])
			}
			out := bytes.Repeat([]byte{0xEE}, size+8)
			runs := make([]Run, len(rs))
			for k, r := range rs {
				runs[k] = Run{Off: r[0], Dst: out[r[2] : r[2]+r[1]]}
			}
			var tmp []byte
			if try%2 == 0 {
				tmp = make([]byte, 3*c.BlockSize)
			}
			if err := c.DecodeBlockTo(i, src, ref, tmp, runs); err != nil {
				t.Fatalf("block %d runs %v: %v", i, rs, err)
			}
			written := make([]bool, len(out))
			for _, r := range rs {
				if !bytes.Equal(out[r[2]:r[2]+r[1]], want[r[0]:r[0]+r[1]]) {
					t.Fatalf("block %d run %v: wrong bytes", i, r)
				}
				for k := r[2]; k < r[2]+r[1]; k++ {
					written[k] = true
				}
			}
			for k, w := range written {
				if !w && out[k] != 0xEE {
					t.Fatalf("block %d runs %v: byte %d written", i, rs, k)
				}
			}
		}
	}
	// A run outside the block is refused, not a panic.
	if err := c.DecodeBlockTo(0, nil, ref, nil, []Run{{0, make([]byte, c.BlockLen(0)+1)}}); err == nil {
		t.Fatal("a run past the block: no error")
	}
	if err := c.DecodeBlockTo(0, nil, ref, nil, []Run{{-1, make([]byte, 1)}}); err == nil {
		t.Fatal("a run before the block: no error")
	}
}
