package sparse

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"

	"github.com/apache/arrow-go/v18/arrow"
	arrowarray "github.com/apache/arrow-go/v18/arrow/array"

	"github.com/tileflight/tileflight/arrowconv"
	"github.com/tileflight/tileflight/errkind"
)

// zeroCopyMin is the run length from which a run of consecutive cells of
// one tile goes out in a record batch of its own, wrapping the tile's
// buffers instead of copying them.
const zeroCopyMin = 4096

// batcher collects the cells of the next record batch as runs over the
// tiles that hold them.
type batcher struct {
	r     *Reader
	tiles []*ltile
	idx   map[*ltile]uint32
	runs  []arrowconv.Run
	n     int
	// flush asks Next to build the batch now (a long run follows).
	flush bool
}

func newBatcher(r *Reader) *batcher { return &batcher{r: r, idx: map[*ltile]uint32{}} }

// add appends cells [pos, pos+n) of t. A tile whose data is pooled
// (ltile.owners) is retained until the batch is built: its source may
// release it (and its own references) before that.
func (b *batcher) add(t *ltile, pos, n int) {
	ti, ok := b.idx[t]
	if !ok {
		ti = uint32(len(b.tiles))
		b.tiles = append(b.tiles, t)
		b.idx[t] = ti
		for _, o := range t.owners {
			if o != nil {
				o.Retain()
			}
		}
	}
	if k := len(b.runs) - 1; k >= 0 && b.runs[k].Tile == ti && int(b.runs[k].Start+b.runs[k].Len) == pos {
		b.runs[k].Len += uint32(n)
	} else {
		b.runs = append(b.runs, arrowconv.Run{Tile: ti, Start: uint32(pos), Len: uint32(n)})
	}
	b.n += n
}

// reset forgets the batch. The batcher holds no budget: a tile's budget
// is returned once its source has moved past it, and the buffers of tiles
// a batch still references stay valid (they are garbage collected), so a
// batch never keeps the loader from loading the next tile.
func (b *batcher) reset() {
	for _, t := range b.tiles {
		for _, o := range t.owners {
			if o != nil {
				o.Release()
			}
		}
	}
	clear(b.tiles)
	b.tiles = b.tiles[:0]
	clear(b.idx)
	b.runs = b.runs[:0]
	b.n = 0
}

// build turns the collected cells into a record and resets the batcher.
func (b *batcher) build() (arrow.RecordBatch, error) {
	defer b.reset()
	cols := make([]arrow.Array, len(b.r.fields))
	defer func() {
		for _, c := range cols {
			if c != nil {
				c.Release()
			}
		}
	}()
	ts := make([]arrowconv.Tile, len(b.tiles))
	for c, f := range b.r.fields {
		var (
			col arrow.Array
			err error
		)
		if len(b.runs) == 1 {
			run := b.runs[0]
			t := b.tiles[run.Tile]
			var own arrowconv.Owner
			if t.owners != nil && t.owners[c] != nil {
				own = t.owners[c]
			}
			col, err = slice(f, t.cols[c], int(run.Start), int(run.Len), own)
		} else {
			for i, t := range b.tiles {
				ts[i] = t.cols[c]
			}
			col, err = arrowconv.Gather(f, ts, b.runs)
		}
		if err != nil {
			return nil, errkind.Wrap(errkind.DataLoss, fmt.Errorf("array %s: column %q: %w", b.r.arr.Dir, f.Name, err))
		}
		cols[c] = col
	}
	return arrowarray.NewRecordBatch(b.r.schema, cols, int64(b.n)), nil
}

// slice wraps cells [s, s+n) of a tile without copying their values; own
// (nil: none) keeps the tile's data alive for as long as the column lives.
func slice(f arrowconv.Field, t arrowconv.Tile, s, n int, own arrowconv.Owner) (arrow.Array, error) {
	var valid []byte
	if t.Validity != nil {
		valid = t.Validity[s : s+n]
	}
	if f.IsVar() {
		end := uint64(len(t.Data))
		if s+n < t.N {
			end = binary.LittleEndian.Uint64(t.Offsets[8*(s+n):])
		}
		if end > uint64(len(t.Data)) {
			return nil, fmt.Errorf("offset %d past %d data bytes: %w", end, len(t.Data), arrowconv.ErrCorrupt)
		}
		return arrowconv.NewColumn(f, t.Data[:end], t.Offsets[8*s:8*(s+n)], valid, n)
	}
	cs := f.CellSize()
	return arrowconv.NewColumnOwned(f, t.Data[s*cs:(s+n)*cs], nil, valid, n, own)
}

// concatSource emits fragments one after the other, each tile's selected
// cells in stored order.
type concatSource struct {
	p   *prefetcher
	cur *ltile
	k   int
}

func (s *concatSource) fill(ctx context.Context, b *batcher, max int) error {
	for max > 0 {
		if s.cur == nil {
			t, err := s.p.get(ctx)
			if err != nil {
				return err
			}
			if t == nil {
				return io.EOF
			}
			s.cur, s.k = t, 0
		}
		t := s.cur
		// The longest run of consecutive cells from selected cell k.
		start := t.pos(s.k)
		l := 1
		if t.all {
			l = t.n - s.k
		} else {
			for s.k+l < len(t.sel) && int(t.sel[s.k+l]) == start+l {
				l++
			}
		}
		if l >= zeroCopyMin && b.n > 0 {
			b.flush = true
			return nil
		}
		l = min(l, max)
		b.add(t, start, l)
		s.k += l
		max -= l
		if s.k == t.count() {
			t.release()
			s.cur = nil
		}
	}
	return nil
}

func (s *concatSource) close() {
	if s.cur != nil {
		s.cur.release()
		s.cur = nil
	}
	s.p.close()
}
