package b2nd

import (
	"context"
	"fmt"
)

// ItemOffset is the item offset, inside its chunk's decoded bytes, of the
// item at chunk-local coordinates l: blocks are laid out in C order over
// the chunk (padded to whole blocks), items in C order inside a block.
func (g *Geometry) ItemOffset(l []int64) int64 {
	var blk, in int64
	for d, x := range l {
		bs := g.BlockShape[d]
		blk = blk*g.BlocksPer[d] + x/bs
		in = in*bs + x%bs
	}
	return blk*g.BlockItems + in
}

// BlockOf is the number of the block (in its chunk) holding chunk-local
// coordinates l.
func (g *Geometry) BlockOf(l []int64) int {
	var blk int64
	for d, x := range l {
		blk = blk*g.BlocksPer[d] + x/g.BlockShape[d]
	}
	return int(blk)
}

// ReadAll decodes the whole array in C order (the dtype's own byte order).
// It is for tests and small arrays; queries go through package reader.
func (a *Array) ReadAll(ctx context.Context) ([]byte, error) {
	n := int64(a.ItemSize)
	for _, s := range a.Shape {
		n *= s
	}
	if n > 1<<31 {
		return nil, fmt.Errorf("array %s: %d bytes is too much for ReadAll", a.Name, n)
	}
	out := make([]byte, n)
	buf := make([]byte, a.ChunkNBytes())
	nd := len(a.Shape)
	cc := make([]int64, nd)
	for ci := int64(0); ci < a.NChunks; ci++ {
		rem := ci
		for d := nd - 1; d >= 0; d-- {
			cc[d] = rem % a.ChunksPer[d]
			rem /= a.ChunksPer[d]
		}
		c, err := a.ReadChunk(ctx, ci)
		if err != nil {
			return nil, err
		}
		err = c.Decode(buf)
		c.Close()
		if err != nil {
			return nil, a.ChunkErr(ci, err)
		}
		a.ScatterChunk(cc, buf, out)
	}
	return out, nil
}

// chunkBox returns the array-coordinate start and the in-array extent of
// chunk cc.
func (g *Geometry) chunkBox(cc []int64) (start, ext []int64) {
	start = make([]int64, len(cc))
	ext = make([]int64, len(cc))
	for d := range cc {
		start[d] = cc[d] * g.ChunkShape[d]
		ext[d] = min(g.ChunkShape[d], g.Shape[d]-start[d])
	}
	return start, ext
}

// ScatterChunk copies the decoded chunk cc into out (the whole array in C
// order).
func (g *Geometry) ScatterChunk(cc []int64, chunkBuf, out []byte) {
	g.walkChunk(cc, func(arrayItem, chunkItem int64) {
		is := int64(g.ItemSize)
		copy(out[arrayItem*is:(arrayItem+1)*is], chunkBuf[chunkItem*is:(chunkItem+1)*is])
	})
}

// GatherChunk copies the items of chunk cc from in (the whole array in C
// order) into chunkBuf (padding left as it is).
func (g *Geometry) GatherChunk(cc []int64, in, chunkBuf []byte) {
	g.walkChunk(cc, func(arrayItem, chunkItem int64) {
		is := int64(g.ItemSize)
		copy(chunkBuf[chunkItem*is:(chunkItem+1)*is], in[arrayItem*is:(arrayItem+1)*is])
	})
}

func (g *Geometry) walkChunk(cc []int64, f func(arrayItem, chunkItem int64)) {
	start, ext := g.chunkBox(cc)
	nd := len(cc)
	for _, e := range ext {
		if e <= 0 {
			return
		}
	}
	l := make([]int64, nd)
	for {
		var ai int64
		for d := 0; d < nd; d++ {
			ai = ai*g.Shape[d] + start[d] + l[d]
		}
		f(ai, g.ItemOffset(l))
		d := nd - 1
		for ; d >= 0; d-- {
			l[d]++
			if l[d] < ext[d] {
				break
			}
			l[d] = 0
		}
		if d < 0 {
			return
		}
	}
}
