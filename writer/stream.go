package writer

import (
	"context"
	"encoding/binary"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/tileflight/tileflight/format/fragmeta"
	"github.com/tileflight/tileflight/format/schema"
	"github.com/tileflight/tileflight/storage"
)

// Streaming writes take the cells of one logical write in batches (a
// DoPut stream) and keep memory near Options.MaxFragmentBytes: once the
// buffered input reaches it, the buffer becomes a fragment in the store,
// uncommitted and so invisible. Commit writes the single object that
// makes every fragment visible at once (the .wrt of a lone fragment, or
// one .con listing them all); Abort, or any failure, deletes the
// fragments written so far. Anything a crash leaves behind is never named
// by a commit, so readers ignore it.
//
// Memory: the buffered input (up to MaxFragmentBytes, plus the batch that
// crossed it), and while a fragment is written about as much again for
// the cells in global order, 12 bytes per cell of sort keys, and the
// filtered tiles of that fragment.

// buffer holds validated input batches until they make a fragment.
type buffer struct {
	s     *schema.ArraySchema
	dims  bool
	parts []map[string]Column
	recs  []arrow.RecordBatch // retained: the columns may alias them
	rows  int
	bytes int64
}

func (b *buffer) add(cols map[string]Column, rows int, rec arrow.RecordBatch) {
	if rows == 0 {
		return
	}
	if rec != nil {
		rec.Retain()
		b.recs = append(b.recs, rec)
	}
	b.parts = append(b.parts, cols)
	b.rows += rows
	for _, c := range cols {
		b.bytes += int64(len(c.Data) + len(c.Offsets) + len(c.Validity))
	}
}

func (b *buffer) release() {
	for _, r := range b.recs {
		r.Release()
	}
	b.recs, b.parts, b.rows, b.bytes = nil, nil, 0, 0
}

// take returns the first n buffered rows as one set of columns (copied
// into fresh memory) and keeps the rest, copied too, so that every
// earlier batch can be let go.
func (b *buffer) take(n int) map[string]Column {
	head := map[string]Column{}
	tail := map[string]Column{}
	for _, name := range b.names() {
		f, _ := b.s.FieldByName(name)
		h, t := splitConcat(b.parts, name, f.CellValNum == schema.VarNum, int(f.CellSize()), n)
		head[name] = h
		if b.rows > n {
			tail[name] = t
		}
	}
	rest := b.rows - n
	b.release()
	if rest > 0 {
		b.parts = []map[string]Column{tail}
		b.rows = rest
		for _, c := range tail {
			b.bytes += int64(len(c.Data) + len(c.Offsets) + len(c.Validity))
		}
	}
	return head
}

func (b *buffer) names() []string {
	var out []string
	if b.dims {
		for _, d := range b.s.Dimensions {
			out = append(out, d.Name)
		}
	}
	for _, a := range b.s.Attributes {
		out = append(out, a.Name)
	}
	return out
}

// splitConcat concatenates one column of every part and cuts it after n
// cells. Offsets are rebased onto the concatenated values.
func splitConcat(parts []map[string]Column, name string, isVar bool, cs, n int) (head, tail Column) {
	var rows, dataLen, validLen int
	for _, p := range parts {
		c := p[name]
		dataLen += len(c.Data)
		validLen += len(c.Validity)
		if isVar {
			rows += len(c.Offsets) / 8
		} else if cs > 0 {
			rows += len(c.Data) / cs
		}
	}
	data := make([]byte, 0, dataLen)
	var offs, valid []byte
	if isVar {
		offs = make([]byte, 0, 8*rows)
	}
	if validLen > 0 {
		valid = make([]byte, 0, validLen)
	}
	for _, p := range parts {
		c := p[name]
		base := uint64(len(data))
		for i := 0; i+8 <= len(c.Offsets); i += 8 {
			offs = binary.LittleEndian.AppendUint64(offs, base+binary.LittleEndian.Uint64(c.Offsets[i:]))
		}
		data = append(data, c.Data...)
		valid = append(valid, c.Validity...)
	}
	cut := func(a, b int) Column {
		var c Column
		if isVar {
			lo := binary.LittleEndian.Uint64(offs[8*a:])
			hi := uint64(len(data))
			if b < rows {
				hi = binary.LittleEndian.Uint64(offs[8*b:])
			}
			c.Data = data[lo:hi]
			c.Offsets = make([]byte, 8*(b-a))
			for i := a; i < b; i++ {
				binary.LittleEndian.PutUint64(c.Offsets[8*(i-a):], binary.LittleEndian.Uint64(offs[8*i:])-lo)
			}
		} else {
			c.Data = data[a*cs : b*cs]
		}
		if valid != nil {
			c.Validity = valid[a:b]
		}
		return c
	}
	head = cut(0, n)
	if n < rows {
		tail = cut(n, rows)
		// The tail is copied so the head's memory goes with the fragment.
		tail.Data = append([]byte(nil), tail.Data...)
		if tail.Validity != nil {
			tail.Validity = append([]byte(nil), tail.Validity...)
		}
	}
	return head, tail
}

// stream is the state common to both streaming writers.
type stream struct {
	ctx    context.Context
	s      *schema.ArraySchema
	dir    string
	opt    Options
	fields []*field
	layout fragmeta.Layout
	lw     *logicalWrite
	buf    buffer
	rows   int64
	err    error // sticky: the first failure
	closed bool
	// pending delivers the outcome of the fragment being written in the
	// background (nil when none is).
	pending chan error
	// pipe, when set, takes a dense write's cells instead of buf (see
	// densepipe.go).
	pipe *densePipe
}

func newStream(ctx context.Context, st storage.Store, dir string, s *schema.ArraySchema, opt Options, dense bool) (*stream, error) {
	if err := checkSchema(s); err != nil {
		return nil, err
	}
	if err := checkArrayKey(ctx, st, dir, s.Name, opt.EncryptionKey); err != nil {
		return nil, err
	}
	layout := layoutOf(s)
	if opt.CellTimestamps || opt.DeleteMeta {
		if dense {
			return nil, invalidf("array %q: dense fragments carry no per-cell timestamps or delete metadata", dir)
		}
		if opt.DeleteMeta && !opt.CellTimestamps {
			return nil, invalidf("array %q: delete metadata needs per-cell timestamps", dir)
		}
		s = withSpecials(s, opt.CellTimestamps, opt.DeleteMeta)
	}
	fields, err := newFields(s, !dense, opt.EncryptionKey)
	if err != nil {
		return nil, invalidf("array %q: %v", dir, err)
	}
	return &stream{
		ctx: ctx, s: s, dir: dir, opt: opt, fields: fields, layout: layout,
		lw:  &logicalWrite{st: st, dir: dir, ts: opt.timestamp(), ts0: opt.TimestampStart, conc: opt.Concurrency, key: opt.EncryptionKey},
		buf: buffer{s: s, dims: !dense},
	}, nil
}

// usable says why the writer takes no more calls, if it does not.
func (w *stream) usable() error {
	if w.err != nil {
		return w.err
	}
	if w.closed {
		return invalidf("array %q: the write is already committed or aborted", w.dir)
	}
	return nil
}

// addAsync writes fr in the background once the previous fragment is
// written: the caller goes on receiving and converting the next cells
// meanwhile, so the filtering (on every core) of one fragment overlaps
// the network and decoding (on one) of the next. At most one fragment is
// in flight, so memory stays about two fragments' worth.
func (w *stream) addAsync(fr *fragment) error {
	if err := w.wait(); err != nil {
		return w.fail(fmt.Errorf("array %q: %w", w.dir, err))
	}
	ch := make(chan error, 1)
	w.pending = ch
	go func() {
		_, err := w.lw.add(w.ctx, fr)
		ch <- err
	}()
	return nil
}

// wait waits for the fragment being written in the background, if any,
// and returns its failure.
func (w *stream) wait() error {
	if w.pending == nil {
		return nil
	}
	err := <-w.pending
	w.pending = nil
	return err
}

// fail records err, deletes what was written and releases the buffer.
func (w *stream) fail(err error) error {
	w.wait() // the background write touches lw and the buffered cells
	if w.pipe != nil {
		w.pipe.shutdown()
	}
	w.err = err
	w.buf.release()
	w.lw.abort(w.ctx)
	return err
}

// finish commits the fragments written (or, staged, only hands their
// names back) and closes the writer.
func (w *stream) finish(stage bool) (*Result, error) {
	if err := w.wait(); err != nil {
		return nil, w.fail(fmt.Errorf("array %q: %w", w.dir, err))
	}
	if stage {
		res := w.lw.stage()
		w.closed = true
		res.Rows = w.rows
		return res, nil
	}
	res, err := w.lw.commit(w.ctx)
	if err != nil {
		// The commit object may have landed (a lost reply): keep the
		// fragments it would name.
		w.err = err
		w.closed = true // Abort must not delete what the commit may name
		return nil, err
	}
	w.closed = true
	res.Rows = w.rows
	return res, nil
}

// abort is Abort for both writers.
func (w *stream) abort() error {
	w.wait()
	if w.pipe != nil {
		w.pipe.shutdown()
	}
	w.buf.release()
	if w.closed {
		return nil
	}
	w.closed = true
	if w.err == nil {
		w.err = invalidf("array %q: the write was aborted", w.dir)
	}
	return w.lw.abort(w.ctx)
}

// fromArrow converts a batch and names its rows in errors.
func (w *stream) fromArrow(rec arrow.RecordBatch) (map[string]Column, error) {
	cols, err := FromArrow(w.s, rec)
	if err != nil {
		return nil, fmt.Errorf("rows %d..%d: %w", w.rows, w.rows+rec.NumRows()-1, err)
	}
	return cols, nil
}

// SparseWriter streams cells of a sparse array, in any order, into the
// fragments of one logical write. Not safe for concurrent use.
type SparseWriter struct {
	w *stream
	// Duplicate coordinates across fragments are found at Commit by a
	// merge of the fragments' coordinates read back from the store.
}

// NewSparseWriter starts a streaming write to the sparse array at dir
// whose schema is s (LoadSchema). Nothing is visible before Commit.
func NewSparseWriter(ctx context.Context, st storage.Store, dir string, s *schema.ArraySchema, opt Options) (*SparseWriter, error) {
	if s != nil && s.IsDense() {
		return nil, invalidf("array %q is dense: write it with NewDenseWriter", dir)
	}
	w, err := newStream(ctx, st, dir, s, opt, false)
	if err != nil {
		return nil, err
	}
	return &SparseWriter{w: w}, nil
}

// Append adds a record batch with a column for every dimension and
// attribute (see FromArrow). The writer keeps a reference to the batch
// (Retain) until its cells are written.
func (sw *SparseWriter) Append(rec arrow.RecordBatch) error {
	if err := sw.w.usable(); err != nil {
		return err
	}
	cols, err := sw.w.fromArrow(rec)
	if err != nil {
		return sw.w.fail(err)
	}
	return sw.append(cols, rec)
}

// AppendColumns adds cells given as write columns. The writer keeps the
// slices (it does not copy them) until their cells are written: the
// caller must not change them before Commit or Abort returns.
func (sw *SparseWriter) AppendColumns(cols map[string]Column) error {
	if err := sw.w.usable(); err != nil {
		return err
	}
	return sw.append(cols, nil)
}

func (sw *SparseWriter) append(cols map[string]Column, rec arrow.RecordBatch) error {
	w := sw.w
	cs, n, err := checkColumns(w.s, cols, true)
	if err == nil {
		err = checkCoords(w.s, cs, n)
	}
	if err != nil {
		return w.fail(fmt.Errorf("array %q: rows %d..%d: %w", w.dir, w.rows, w.rows+int64(n)-1, err))
	}
	w.buf.add(cols, n, rec)
	w.rows += int64(n)
	if w.buf.bytes >= w.opt.maxBytes() {
		return sw.flush()
	}
	return nil
}

// flush writes the buffered cells as one fragment.
func (sw *SparseWriter) flush() error {
	w := sw.w
	if w.buf.rows == 0 {
		return nil
	}
	cs, n, err := checkColumns(w.s, w.buf.take(w.buf.rows), true)
	if err != nil {
		return w.fail(err)
	}
	sc, err := globalOrder(w.s, cs, n)
	if err != nil {
		return w.fail(err)
	}
	if w.opt.CellTimestamps {
		newestFirst(sc, cs[fragmeta.TimestampsName])
	}
	if !w.s.AllowsDups && !w.opt.CellTimestamps {
		if i := firstDup(sc); i >= 0 {
			return w.fail(invalidf("array %q: duplicate coordinates %s (the array does not allow duplicates)", w.dir, coordString(w.s, cs, int(sc.perm[i]))))
		}
	}
	fr := sparseFragment(w.s, w.layout, w.fields, cs, sc.perm, w.opt.Concurrency)
	fr.processed = w.opt.ProcessedConditions
	return w.addAsync(fr)
}

// Commit writes the remaining cells, checks that no two fragments of the
// write hold the same coordinates (unless the array allows duplicates),
// and makes the whole write visible at once. On any error nothing
// becomes visible and what was written is deleted.
func (sw *SparseWriter) Commit() (*Result, error) {
	w := sw.w
	if err := w.usable(); err != nil {
		return nil, err
	}
	if err := sw.flush(); err != nil {
		return nil, err
	}
	if err := w.wait(); err != nil {
		return nil, w.fail(fmt.Errorf("array %q: %w", w.dir, err))
	}
	if !w.s.AllowsDups && !w.opt.CellTimestamps && len(w.lw.done) > 1 {
		if err := checkAcross(w.ctx, w.lw, w.s); err != nil {
			return nil, w.fail(fmt.Errorf("array %q: %w", w.dir, err))
		}
	}
	return w.finish(false)
}

// Stage writes the remaining cells and checks them as Commit does, but
// commits nothing: the fragments stay in the store, invisible, and the
// result lists them for CommitFragments (or AbortFragments) to settle
// later. Abort after a successful Stage is a no-op.
func (sw *SparseWriter) Stage() (*Result, error) {
	w := sw.w
	if err := w.usable(); err != nil {
		return nil, err
	}
	if err := sw.flush(); err != nil {
		return nil, err
	}
	if err := w.wait(); err != nil {
		return nil, w.fail(fmt.Errorf("array %q: %w", w.dir, err))
	}
	if !w.s.AllowsDups && !w.opt.CellTimestamps && len(w.lw.done) > 1 {
		if err := checkAcross(w.ctx, w.lw, w.s); err != nil {
			return nil, w.fail(fmt.Errorf("array %q: %w", w.dir, err))
		}
	}
	return w.finish(true)
}

// Abort deletes every fragment written so far and releases the buffered
// batches; the array is left as it was. It is a no-op after Commit, so a
// deferred Abort is safe.
func (sw *SparseWriter) Abort() error { return sw.w.abort() }

// Rows is the number of cells appended so far.
func (sw *SparseWriter) Rows() int64 { return sw.w.rows }

// DenseWriter streams the cells of one dense subarray, in row-major (or
// col-major) order of the subarray, into the fragments of one logical
// write. A fragment is cut on space-tile boundaries of the slowest input
// dimension, so the buffer holds at least one such band of tiles
// whatever MaxFragmentBytes says. Not safe for concurrent use.
type DenseWriter struct {
	w        *stream
	g        *grid
	subarray [][2]int64
	layout   schema.Layout
	slow     int
	plane    int64 // cells per value of the slowest input dimension
	next     int64 // first value (offset from the subarray start) of the slow dim not yet written
}

// NewDenseWriter starts a streaming write of subarray (one inclusive
// range per dimension) of the dense array at dir, the cells arriving in
// layout order (schema.RowMajor or schema.ColMajor). Commit checks that
// exactly the subarray's cells were given.
func NewDenseWriter(ctx context.Context, st storage.Store, dir string, s *schema.ArraySchema, subarray [][2]int64, layout schema.Layout, opt Options) (*DenseWriter, error) {
	if err := checkSchema(s); err != nil {
		return nil, err
	}
	if !s.IsDense() {
		return nil, invalidf("array %q is sparse: write it with NewSparseWriter", dir)
	}
	if layout != schema.RowMajor && layout != schema.ColMajor {
		return nil, invalidf("dense write layout %s: want row-major or col-major", layout)
	}
	g, err := newGrid(s, subarray)
	if err != nil {
		return nil, err
	}
	w, err := newStream(ctx, st, dir, s, opt, true)
	if err != nil {
		return nil, err
	}
	dw := &DenseWriter{w: w, g: g, subarray: append([][2]int64(nil), subarray...), layout: layout}
	if layout == schema.ColMajor {
		dw.slow = len(s.Dimensions) - 1
	}
	dw.plane = int64(g.cells / (g.sub[dw.slow][1] - g.sub[dw.slow][0] + 1))
	if pipelined(w.fields) {
		w.pipe = newDensePipe(dw)
	}
	return dw, nil
}

// Append adds the next cells of the subarray: a record batch with a
// column for every attribute. The batch is retained until written.
func (dw *DenseWriter) Append(rec arrow.RecordBatch) error {
	if err := dw.w.usable(); err != nil {
		return err
	}
	cols, err := dw.w.fromArrow(rec)
	if err != nil {
		return dw.w.fail(err)
	}
	return dw.append(cols, rec)
}

// AppendColumns adds the next cells as write columns, kept (not copied)
// until written: the caller must not change them before Commit or Abort.
func (dw *DenseWriter) AppendColumns(cols map[string]Column) error {
	if err := dw.w.usable(); err != nil {
		return err
	}
	return dw.append(cols, nil)
}

func (dw *DenseWriter) append(cols map[string]Column, rec arrow.RecordBatch) error {
	w := dw.w
	cs, n, err := checkColumns(w.s, cols, false)
	if err != nil {
		return w.fail(fmt.Errorf("array %q: rows %d..%d: %w", w.dir, w.rows, w.rows+int64(n)-1, err))
	}
	if uint64(w.rows)+uint64(n) > dw.g.cells {
		return w.fail(invalidf("dense write to %q: more than the %d cells of the subarray", w.dir, dw.g.cells))
	}
	if w.pipe != nil {
		if err := w.pipe.add(cs, n, rec); err != nil {
			return w.fail(fmt.Errorf("array %q: %w", w.dir, err))
		}
		w.rows += int64(n)
		return nil
	}
	w.buf.add(cols, n, rec)
	w.rows += int64(n)
	if w.buf.bytes >= w.opt.maxBytes() {
		return dw.flush(false)
	}
	return nil
}

// flush writes the buffered whole bands of tiles along the slowest input
// dimension as one fragment (everything left, when final).
func (dw *DenseWriter) flush(final bool) error {
	w := dw.w
	g := dw.g
	d := dw.slow
	ext := g.ext[d]
	start := g.sub[d][0] + uint64(dw.next) // offset in the domain
	avail := uint64(int64(w.buf.rows) / dw.plane)
	end := start + avail // exclusive
	if !final {
		// Back to the last tile boundary, unless the subarray ends here.
		if end <= g.sub[d][1] {
			end = end / ext * ext
		}
	}
	if end <= start {
		return nil
	}
	cnt := int64(end-start) * dw.plane
	cols := w.buf.take(int(cnt))
	cs, _, err := checkColumns(w.s, cols, false)
	if err != nil {
		return w.fail(err)
	}
	sub := append([][2]int64(nil), dw.subarray...)
	dim := &w.s.Dimensions[d]
	base := schema.AsUint64(dim.Type, dim.Lo())
	sub[d] = [2]int64{int64(start + base), int64(end - 1 + base)}
	pg, err := newGrid(w.s, sub)
	if err != nil {
		return w.fail(err)
	}
	fr := denseFragment(w.s, w.layout, w.fields, pg, sub, dw.layout, cs)
	dw.next += int64(end - start)
	return w.addAsync(fr)
}

// flushAll writes every cell not yet stored.
func (dw *DenseWriter) flushAll() error {
	w := dw.w
	if w.pipe != nil {
		if err := w.pipe.finish(); err != nil {
			return w.fail(fmt.Errorf("array %q: %w", w.dir, err))
		}
		return nil
	}
	return dw.flush(true)
}

// Commit writes the remaining cells and makes the whole write visible at
// once. It fails, leaving nothing, when the cells given are not exactly
// the subarray's.
func (dw *DenseWriter) Commit() (*Result, error) {
	w := dw.w
	if err := w.usable(); err != nil {
		return nil, err
	}
	if uint64(w.rows) != dw.g.cells {
		return nil, w.fail(invalidf("dense write to %q: %d rows for a subarray of %d cells", w.dir, w.rows, dw.g.cells))
	}
	if err := dw.flushAll(); err != nil {
		return nil, err
	}
	return w.finish(false)
}

// Stage writes the remaining cells as Commit does but commits nothing
// (see SparseWriter.Stage).
func (dw *DenseWriter) Stage() (*Result, error) {
	w := dw.w
	if err := w.usable(); err != nil {
		return nil, err
	}
	if uint64(w.rows) != dw.g.cells {
		return nil, w.fail(invalidf("dense write to %q: %d rows for a subarray of %d cells", w.dir, w.rows, dw.g.cells))
	}
	if err := dw.flushAll(); err != nil {
		return nil, err
	}
	return w.finish(true)
}

// Abort deletes every fragment written so far; the array is left as it
// was. A no-op after Commit.
func (dw *DenseWriter) Abort() error { return dw.w.abort() }

// Rows is the number of cells appended so far.
func (dw *DenseWriter) Rows() int64 { return dw.w.rows }
