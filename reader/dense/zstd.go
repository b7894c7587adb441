package dense

import (
	"fmt"
	"slices"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/tileflight/tileflight/errkind"
	"github.com/tileflight/tileflight/filters"
	"github.com/tileflight/tileflight/reader/base"
)

// Compressed pass-through of dense tiles (Options.ZstdPassThrough): a
// wrapped chunk (one whole space tile of one fragment) whose attributes
// came back from tileio.LoadZstd still compressed is emitted in batches
// that each hold whole TileDB filter chunks of every compressed column, so
// that each batch's compressed buffer is a run of the tile's own zstd
// frames. The batch ends are the cells where every compressed column has
// a chunk boundary (cuts); a batch size that no cut fits (batch_rows
// smaller than a chunk) falls back to decompressing the tile here.

// chunkEnds is the cell after each filter chunk of a compressed column of
// cs-byte cells, or nil when a chunk does not end on a cell boundary.
func chunkEnds(chunks []filters.ZstdChunk, cs int) []int {
	ends := make([]int, len(chunks))
	var bytes uint64
	for j, ch := range chunks {
		bytes += ch.Orig
		if bytes%uint64(cs) != 0 {
			return nil
		}
		ends[j] = int(bytes / uint64(cs))
	}
	return ends
}

// cutZstd computes the cuts of a wrapped chunk with compressed columns.
// A column whose chunks the batches cannot follow is decompressed here:
// one whose chunks are larger than a batch or do not end on cells, and
// then, while the columns' common boundaries leave a batch with no end in
// reach, the column whose removal helps most (its chunks are the odd ones
// out), so that one column with a small filter chunk size does not keep
// the others from passing through.
func (d *Reader) cutZstd(c *Chunk) error {
	want := d.p.BatchRows
	ends := map[int][]int{}
	for i, f := range d.fields[:d.nout] {
		z := c.cols[i].zstd
		if z == nil {
			continue
		}
		e := chunkEnds(z, f.CellSize())
		if len(e) == 0 || e[len(e)-1] != c.n || !batchable(e, want) {
			if err := d.decodeZstdCol(c, i); err != nil {
				return err
			}
			continue
		}
		ends[i] = e
		c.cols[i].zstdEnds = e
	}
	for len(ends) > 0 {
		if common := intersectAll(ends, -1); batchable(common, want) {
			c.cuts = common
			return nil
		}
		drop, best := -1, -1
		for i := range ends {
			rest := intersectAll(ends, i)
			score := len(rest)
			if batchable(rest, want) {
				score += 1 << 30
			}
			if score > best || (score == best && i < drop) {
				drop, best = i, score
			}
		}
		if err := d.decodeZstdCol(c, drop); err != nil {
			return err
		}
		delete(ends, drop)
	}
	c.cuts = nil
	return nil
}

// batchable reports whether batches of at most want cells can each end at
// one of ends (ascending, the last being the chunk's end).
func batchable(ends []int, want int) bool {
	pos := 0
	for k := 0; k < len(ends); {
		j := k
		for j < len(ends) && ends[j] <= pos+want {
			j++
		}
		if j == k {
			return false
		}
		pos, k = ends[j-1], j
	}
	return len(ends) > 0
}

// intersectAll is the boundaries every column of ends has, but column
// skip.
func intersectAll(ends map[int][]int, skip int) []int {
	var out []int
	first := true
	for i, e := range ends {
		if i == skip {
			continue
		}
		if first {
			out, first = e, false
			continue
		}
		var both []int
		for _, x := range out {
			if _, ok := slices.BinarySearch(e, x); ok {
				both = append(both, x)
			}
		}
		out = both
	}
	return out
}

// decodeZstd decompresses every compressed column of the chunk in place.
func (d *Reader) decodeZstd(c *Chunk) error {
	c.cuts = nil
	for i := range d.fields[:d.nout] {
		if c.cols[i].zstd != nil {
			if err := d.decodeZstdCol(c, i); err != nil {
				return err
			}
		}
	}
	return nil
}

// decodeZstdCol decompresses column i of the chunk in place.
func (d *Reader) decodeZstdCol(c *Chunk, i int) error {
	f := d.fields[i]
	var frames [][]byte
	var sizes []uint64
	for _, ch := range c.cols[i].zstd {
		frames = append(frames, ch.Frames...)
		sizes = append(sizes, ch.Sizes...)
	}
	data := make([]byte, c.n*f.CellSize())
	if err := filters.DecodeZstdFrames(frames, sizes, data); err != nil {
		return errkind.Wrap(errkind.DataLoss, fmt.Errorf("array %s: %s: attribute %q: %w", d.p.Array.Dir, c.from, f.Name, err))
	}
	c.cols[i] = colData{data: data}
	return nil
}

// zstdBatch emits the next batch of the current chunk, which has cuts, at
// most want rows ending at a cut; with no cut in reach it decodes the
// chunk instead and returns nil.
func (d *Reader) zstdBatch(want int) (arrow.RecordBatch, error) {
	c := d.cur
	k, _ := slices.BinarySearch(c.cuts, d.pos+want+1)
	if k == 0 || c.cuts[k-1] <= d.pos {
		return nil, d.decodeZstd(c)
	}
	end := c.cuts[k-1]
	n := end - d.pos
	plain := make([]arrow.Array, d.nout)
	zstd := make([]*base.ZstdColumn, d.nout)
	for i, f := range d.fields[:d.nout] {
		col := &c.cols[i]
		if col.zstd == nil {
			data, offs, valid := sliceCol(f, col, d.pos, end, c.n)
			d.builders[i].Append(data, offs, valid, n)
			a, err := d.builders[i].Finish()
			if err != nil {
				for _, p := range plain {
					if p != nil {
						p.Release()
					}
				}
				return nil, errkind.Wrap(errkind.DataLoss, fmt.Errorf("array %s: column %q: %w", d.p.Array.Dir, f.Name, err))
			}
			plain[i] = a
			continue
		}
		ends := col.zstdEnds
		j0 := 0
		if d.pos > 0 {
			j, _ := slices.BinarySearch(ends, d.pos)
			j0 = j + 1
		}
		j1, _ := slices.BinarySearch(ends, end)
		z := &base.ZstdColumn{Size: int64(n) * int64(f.CellSize())}
		for _, ch := range col.zstd[j0 : j1+1] {
			z.Frames = append(z.Frames, ch.Frames...)
			z.Sizes = append(z.Sizes, ch.Sizes...)
		}
		zstd[i] = z
	}
	d.pos = end
	d.emitted += int64(n)
	return base.NewZstdBatch(d.schema, d.fields[:d.nout], int64(n), plain, zstd), nil
}
