package ndarray

// The direct read path of .b2nd arrays: a row-major read of one box (one
// range per dimension) decodes each block straight into the record
// batches' buffers, every line of the block's part of the box (along the
// last dimension) going to its place in its batch (for shuffled blocks
// the unshuffle is that copy; a block spanning whole rows of the box is
// one stretch of the result, one run). No block is decoded into a buffer
// of its own and copied again, batches are not assembled cell by cell,
// and their buffers come from (and go back to, when the record is
// released) the free lists, not from fresh zeroed allocations. The box is
// read in groups of block-rows of the first dimension (each group one
// stretch of the result), decoded on every worker; a batch goes out as
// soon as the last block writing into it is decoded (not when its group
// ends), so that a read of one group (a small box) is sent while it is
// still decoding and the first batch of any read leaves early.

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/apache/arrow-go/v18/arrow"
	arrowarray "github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/tileflight/tileflight/arrowconv"
	b2chunk "github.com/tileflight/tileflight/b2nd/chunk"
	"github.com/tileflight/tileflight/query"
)

// b2ndDirectGroupBytes caps the result bytes of one group of the direct
// path (see directGroupBytes; a variable for the tests that make every
// block-row a group).
var b2ndDirectGroupBytes int64 = 4 << 20

// b2ndDirectReads counts the reads that took the direct path (tests).
var b2ndDirectReads atomic.Int64

// b2ndDirectBlock, when set (tests), runs before each block of the direct
// path is decoded.
var b2ndDirectBlock func(blockKey)

// direct tells whether the read can take the direct path: row-major
// order (any order of a 1-D array), one range per dimension, no filter,
// returned fields that are the whole item (a plain dtype), and a
// block-row of the first dimension that fits the budget.
func (s *Reader) direct() bool {
	if s.prog != nil || s.passCol || s.special != nil || s.nout == 0 || len(s.cols) != s.nout {
		return false
	}
	if s.p.Layout != query.LayoutRowMajor && !(s.p.Layout == query.LayoutColMajor && s.nd == 1) {
		return false
	}
	for d := range s.ranges {
		if len(s.ranges[d]) != 1 {
			return false
		}
	}
	fields := 0
	for _, c := range s.cols {
		if c.dim < 0 {
			fields++
			if c.field.Size != s.a.ItemSize || c.field.Offset != 0 || fields > 1 {
				return false
			}
		}
	}
	// A group holds at least one block-row of the first dimension (its
	// part of the result; the blocks themselves are decoded one per
	// worker at a time): one too large for the budget or the working set
	// is read by the block-row path, which holds a batch at a time (or
	// refuses the query).
	rowBytes := int64(s.a.ItemSize) * min(s.a.BlockShape[0], s.ranges[0][0].hi-s.ranges[0][0].lo+1)
	for d := 1; d < s.nd; d++ {
		rowBytes *= s.ranges[d][0].hi - s.ranges[d][0].lo + 1
	}
	if ws := s.opt.MaxWorkingSet; ws > 0 && rowBytes+int64(3*max(s.opt.Workers, 1)*s.a.BlockNBytes()) > ws {
		return false
	}
	return rowBytes <= s.opt.MemoryBudget/4
}

// directBatch is a batch of the direct path being filled: rows [row,
// row+n) of the result, its item bytes in buf; left is how many of the
// blocks listed so far that write into it are still to be decoded.
type directBatch struct {
	row  int64
	n    int64
	buf  []byte
	left int
}

// directEmit hands on the batches of the direct path in order as they
// complete: batch next goes out once its blocks are decoded and its rows
// end by end (the rows of the groups listed so far; a batch reaching into
// the next group waits for that group's blocks).
type directEmit struct {
	mu      sync.Mutex
	pending map[int64]*directBatch
	next    int64
	end     int64
	ready   chan arrow.RecordBatch
	record  func(*directBatch) (arrow.RecordBatch, error)
}

// done records that a block writing into batches bs is decoded and sends
// the batches that completes. It blocks while ready is full (the sender is
// behind, so decoding further ahead would only hold memory).
func (e *directEmit) done(ctx context.Context, bs []int64) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, b := range bs {
		e.pending[b].left--
	}
	return e.flush(ctx)
}

// flush sends the completed batches from next on (e.mu held).
func (e *directEmit) flush(ctx context.Context) error {
	for {
		db := e.pending[e.next]
		if db == nil || db.left > 0 || db.row+db.n > e.end {
			return nil
		}
		delete(e.pending, e.next)
		e.next++
		rec, err := e.record(db)
		if err != nil {
			putB2NDBuf(db.buf)
			return err
		}
		select {
		case e.ready <- rec:
		case <-ctx.Done():
			rec.Release()
			return ctx.Err()
		}
		// The goroutines that send the batch (the forwarder, the
		// caller's, gRPC's) are runnable now but every P may be decoding:
		// without a yield they would wait for the end of this worker's
		// piece (13 blocks, over a millisecond, in a 1 % box), and the
		// batch would go out no earlier than the group's last one.
		runtime.Gosched()
	}
}

// runDirect reads the subarray by the direct path (see direct).
func (s *Reader) runDirect(ctx context.Context) error {
	b2ndDirectReads.Add(1)
	nd := s.nd
	is := int64(s.a.ItemSize)
	lo, ext, stride := make([]int64, nd), make([]int64, nd), make([]int64, nd)
	total := int64(1)
	for d := nd - 1; d >= 0; d-- {
		r := s.ranges[d][0]
		lo[d], ext[d], stride[d] = r.lo, r.hi-r.lo+1, total
		total *= ext[d]
	}
	if s.left >= 0 {
		total = min(total, s.left)
	}
	br := int64(s.p.BatchRows)
	per := make([][][2]int64, nd)
	for d := range per {
		per[d] = s.touched(d, s.ranges[d])
	}
	target := s.directGroupBytes()
	rowBytes := is
	for d := 1; d < nd; d++ {
		rowBytes *= ext[d]
	}
	s.dropChunks()
	defer s.dropChunks()

	// Completed batches go to a goroutine that hands them on, so that
	// decoding goes on while they are sent; ready holds about a group's
	// batches (at most 256).
	nready := min(max(1, target/max(1, br*is)), 256)
	em := &directEmit{pending: map[int64]*directBatch{}, ready: make(chan arrow.RecordBatch, nready)}
	em.record = func(db *directBatch) (arrow.RecordBatch, error) { return s.directRecord(db, lo, ext) }
	fwd := make(chan struct{})
	go func() {
		defer close(fwd)
		gone := false
		for rec := range em.ready {
			if gone {
				rec.Release()
				continue
			}
			select {
			case s.out <- rec:
			case <-ctx.Done():
				gone = true
				rec.Release()
			}
		}
	}()
	defer func() {
		close(em.ready)
		<-fwd
		for _, b := range em.pending {
			putB2NDBuf(b.buf)
		}
	}()
	batch := func(b int64) *directBatch {
		if db := em.pending[b]; db != nil {
			return db
		}
		db := &directBatch{row: b * br, n: min(br, total-b*br)}
		db.buf = getB2NDBuf(int(db.n * is))
		em.pending[b] = db
		return db
	}

	// Groups are runs of block-rows of the first dimension (across chunks)
	// holding about target bytes of the result, at least one block-row.
	r0 := s.ranges[0][0]
	rowsOf := func(p [2]int64) (lo, hi int64) {
		lo = p[0]*s.a.ChunkShape[0] + p[1]*s.a.BlockShape[0]
		hi = min(lo+s.a.BlockShape[0], (p[0]+1)*s.a.ChunkShape[0], s.a.Shape[0]) - 1
		return max(lo, r0.lo), min(hi, r0.hi)
	}
	for i := 0; i < len(per[0]); {
		glo, ghi := rowsOf(per[0][i])
		e := i + 1
		for ; e < len(per[0]); e++ {
			_, hi := rowsOf(per[0][e])
			if (hi-glo+1)*rowBytes > target {
				break
			}
			ghi = hi
		}
		gstart := (glo - lo[0]) * stride[0]
		if gstart >= total {
			break
		}
		grp := append([][][2]int64(nil), per...)
		grp[0] = per[0][i:e]
		s.closeChunksBefore(per[0][i][0])
		// The workers of the previous group have returned: the batches
		// are the main goroutine's until the group's decoding starts.
		jobs := s.directJobs(grp, lo, ext, stride, total, br, batch)
		em.end = min((ghi-lo[0]+1)*stride[0], total)
		if err := s.decodeDirect(ctx, jobs, em); err != nil {
			return err
		}
		em.mu.Lock()
		err := em.flush(ctx)
		em.mu.Unlock()
		if err != nil {
			return err
		}
		i = e
	}
	if s.left >= 0 {
		s.left -= total
	}
	return nil
}

// directGroupBytes is how many bytes of the result a group of the direct
// path holds at most (unless one block-row of the first dimension is
// more): small enough that three groups (one decoding, one queued, one
// being sent) stay well inside the query's budget, large enough that
// every worker gets several blocks.
func (s *Reader) directGroupBytes() int64 {
	return max(1, min(s.opt.MemoryBudget/8, b2ndDirectGroupBytes))
}

// closeChunksBefore closes the open chunks whose coordinate along the
// first dimension is below ch (the groups have gone past them).
func (s *Reader) closeChunksBefore(ch int64) {
	inner := int64(1)
	for k := 1; k < s.nd; k++ {
		inner *= s.a.ChunksPer[k]
	}
	for n, oc := range s.chunks {
		if n/inner < ch {
			oc.c.Close()
			delete(s.chunks, n)
		}
	}
}

// directJob is one block to decode, where its runs go, and the batches
// they are in.
type directJob struct {
	key     blockKey
	runs    []b2chunk.Run
	batches []int64
}

// directJobs lists the blocks of grp (per dimension, the (chunk, block)
// pairs of the group) with their runs: for every line of the block's part
// of the subarray along the last dimension, its bytes in the block and
// their place in the batch holding them (split where batches end, joined
// where consecutive lines are consecutive in both).
func (s *Reader) directJobs(grp [][][2]int64, lo, ext, stride []int64, total, br int64, batch func(int64) *directBatch) []directJob {
	nd := s.nd
	is := int64(s.a.ItemSize)
	bstride := make([]int64, nd)
	st := int64(1)
	for d := nd - 1; d >= 0; d-- {
		bstride[d] = st
		st *= s.a.BlockShape[d]
	}
	var jobs []directJob
	idx := make([]int, nd)
	a, b, blo := make([]int64, nd), make([]int64, nd), make([]int64, nd)
	x := make([]int64, nd)
	for {
		var chunkN int64
		block := 0
		for d := 0; d < nd; d++ {
			p := grp[d][idx[d]]
			chunkN = chunkN*s.a.ChunksPer[d] + p[0]
			block = block*int(s.a.BlocksPer[d]) + int(p[1])
			cs, bs := s.a.ChunkShape[d], s.a.BlockShape[d]
			blo[d] = p[0]*cs + p[1]*bs
			bhi := min(blo[d]+bs, (p[0]+1)*cs, s.a.Shape[d]) - 1
			r := s.ranges[d][0]
			a[d], b[d] = max(r.lo, blo[d]), min(r.hi, bhi)
		}
		j := directJob{key: blockKey{chunkN, block}}
		copy(x, a)
		line := b[nd-1] - a[nd-1] + 1
		for {
			var off, row int64
			for d := 0; d < nd; d++ {
				off += (x[d] - blo[d]) * bstride[d]
				row += (x[d] - lo[d]) * stride[d]
			}
			n := min(line, total-row)
			for n > 0 {
				bi := row / br
				bt := batch(bi)
				if k := len(j.batches); k == 0 || j.batches[k-1] != bi {
					j.batches = append(j.batches, bi)
					bt.left++
				}
				m := min(n, bt.row+bt.n-row)
				dst := bt.buf[(row-bt.row)*is : (row-bt.row+m)*is]
				if k := len(j.runs) - 1; k >= 0 && j.runs[k].Off+len(j.runs[k].Dst) == int(off*is) && cap(j.runs[k].Dst) > len(j.runs[k].Dst) && &j.runs[k].Dst[:len(j.runs[k].Dst)+1][len(j.runs[k].Dst)] == &dst[0] {
					j.runs[k].Dst = j.runs[k].Dst[:len(j.runs[k].Dst)+len(dst)]
				} else {
					j.runs = append(j.runs, b2chunk.Run{Off: int(off * is), Dst: dst})
				}
				row, off, n = row+m, off+m, n-m
			}
			d := nd - 2
			for ; d >= 0; d-- {
				x[d]++
				if x[d] <= b[d] {
					break
				}
				x[d] = a[d]
			}
			if d < 0 {
				break
			}
		}
		if len(j.runs) > 0 {
			jobs = append(jobs, j)
		}
		d := nd - 1
		for ; d >= 0; d-- {
			idx[d]++
			if idx[d] < len(grp[d]) {
				break
			}
			idx[d] = 0
		}
		if d < 0 {
			break
		}
	}
	return jobs
}

// decodeDirect decodes the jobs' blocks into their runs (decodePieces),
// telling em as each block is done.
func (s *Reader) decodeDirect(ctx context.Context, jobs []directJob, em *directEmit) error {
	return decodePieces(ctx, s, jobs, func(j *directJob) blockKey { return j.key }, 4,
		func(n int64, oc *openChunk, piece []directJob, raw []byte, lo int) error {
			c := oc.c
			tmp := getB2NDBuf(3 * s.a.BlockNBytes())
			defer putB2NDBuf(tmp)
			for _, j := range piece {
				if b2ndDirectBlock != nil {
					b2ndDirectBlock(j.key)
				}
				if j.key.block == 0 && oc.block0 != nil {
					for _, r := range j.runs {
						copy(r.Dst, oc.block0[r.Off:])
					}
					if err := em.done(ctx, j.batches); err != nil {
						return err
					}
					continue
				}
				var err error
				if c.Head() {
					var src []byte
					if off, end := c.BlockRange(j.key.block); end > off {
						src = raw[off-lo : end-lo]
					}
					err = c.DecodeBlockTo(j.key.block, src, oc.block0, tmp, j.runs)
				} else {
					err = c.DecodeBlockTo(j.key.block, c.BlockBytes(j.key.block), oc.block0, tmp, j.runs)
				}
				if err != nil {
					return s.a.ChunkErr(n, err)
				}
				if err := em.done(ctx, j.batches); err != nil {
					return err
				}
			}
			return nil
		})
}

// directRecord makes the record of a completed batch: its item bytes are
// the field's column (the buffer goes back to the free lists when the
// record is released, for the numeric dtypes whose column is a view of
// it), the coordinates are computed. The batch's buffer is the record's
// from then on.
func (s *Reader) directRecord(db *directBatch, lo, ext []int64) (arrow.RecordBatch, error) {
	arrs := make([]arrow.Array, len(s.cols))
	defer func() {
		for _, a := range arrs {
			if a != nil {
				a.Release()
			}
		}
	}()
	var coords [][]int64
	pooled := false
	for i, c := range s.cols {
		if c.dim >= 0 {
			if coords == nil {
				coords = directCoords(db.row, db.n, lo, ext)
			}
			arrs[i] = arrowconv.Int64Column(coords[c.dim])
			continue
		}
		f := c.field
		if !pooled && f.Count == 0 && !f.Big && (f.Kind == 'i' || f.Kind == 'u' || f.Kind == 'f') {
			t, _, err := arrowconv.B2NDType(f)
			if err != nil {
				return nil, err
			}
			buf := memory.NewBufferWithAllocator(db.buf, b2ndBufAllocator{})
			data := arrowarray.NewData(t, int(db.n), []*memory.Buffer{nil, buf}, nil, 0, 0)
			arrs[i] = arrowarray.MakeFromData(data)
			data.Release()
			buf.Release()
			pooled = true
			continue
		}
		// Other dtypes' columns may be views of the buffer too (or
		// convert it in place): it is left to the collector.
		a, err := arrowconv.B2NDColumn(f, db.buf, int(db.n))
		if err != nil {
			return nil, fmt.Errorf("array %s: field %q: %w", s.a.Name, f.Name, err)
		}
		arrs[i] = a
	}
	db.buf = nil
	return arrowarray.NewRecordBatch(s.schema, arrs, db.n), nil
}

// directCoords lists the coordinates of rows [row, row+n) of the
// row-major result over the box at lo of extents ext, per dimension.
func directCoords(row, n int64, lo, ext []int64) [][]int64 {
	nd := len(lo)
	out := make([][]int64, nd)
	x := make([]int64, nd)
	r := row
	for d := nd - 1; d >= 0; d-- {
		x[d] = r % ext[d]
		r /= ext[d]
		out[d] = make([]int64, n)
	}
	for k := int64(0); k < n; k++ {
		for d := range x {
			out[d][k] = lo[d] + x[d]
		}
		for d := nd - 1; d >= 0; d-- {
			x[d]++
			if x[d] < ext[d] {
				break
			}
			x[d] = 0
		}
	}
	return out
}

// b2ndBufAllocator hands a record's buffer back to the free lists when
// the record is released (only Free is used: the buffers are made by
// getB2NDBuf).
type b2ndBufAllocator struct{}

func (b2ndBufAllocator) Allocate(n int) []byte { return getB2NDBuf(n) }

func (b2ndBufAllocator) Reallocate(n int, b []byte) []byte {
	if n <= cap(b) {
		return b[:n]
	}
	nb := getB2NDBuf(n)
	copy(nb, b)
	putB2NDBuf(b)
	return nb
}

func (b2ndBufAllocator) Free(b []byte) {
	b2ndDirectFrees.Add(1)
	putB2NDBuf(b)
}

// b2ndDirectFrees counts the batch buffers released records handed back
// (tests).
var b2ndDirectFrees atomic.Int64
