package flightsvc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/big"
	"strconv"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	arrarray "github.com/apache/arrow-go/v18/arrow/array"
	aflight "github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/tileflight/tileflight/arrowconv"
	"github.com/tileflight/tileflight/errkind"
	"github.com/tileflight/tileflight/format/datatype"
	"github.com/tileflight/tileflight/format/schema"
	"github.com/tileflight/tileflight/query"
	"github.com/tileflight/tileflight/storage"
	"github.com/tileflight/tileflight/writer"
)

// putResult is the app_metadata of DoPut's one PutResult.
type putResult struct {
	Fragments []string `json:"fragments"`
	Rows      int64    `json:"rows"`
	// Staged is set when the descriptor asked for "stage": true: the
	// fragments are written but not committed.
	Staged bool `json:"staged,omitempty"`
}

// DoPut writes the stream's rows into the descriptor's array as one atomic
// write. The stream's schema is checked against the array before any row is
// read; rows then go to a streaming writer that cuts a fragment each time
// its buffer reaches the fragment size, so a DoPut holds about one fragment
// in memory however long the stream. The fragments stay invisible until the
// one commit object that names them all is written at the end; any failure
// (a bad value in a late batch, a limit, the client hanging up) deletes them.
func (s *Service) DoPut(stream aflight.FlightService_DoPutServer) error {
	ctx := stream.Context()
	// A stream without even a first message is refused before any limit
	// is taken or access checked; the message is then replayed.
	first, err := stream.Recv()
	if err != nil {
		if ctx.Err() != nil {
			return toStatus(fmt.Errorf("DoPut: %w", ctx.Err()))
		}
		return toStatus(errkind.Errorf(errkind.InvalidArgument, "DoPut: the stream must start with a flight descriptor and an Arrow schema: %v", err))
	}
	stream = &putStream{FlightService_DoPutServer: stream, first: first}
	if err := requireWrite(ctx, "DoPut"); err != nil {
		return toStatus(err)
	}
	release, err := s.acquireStream(ctx)
	if err != nil {
		return toStatus(err)
	}
	defer release()
	res, err := s.doPut(ctx, stream)
	if err != nil {
		return toStatus(err)
	}
	if len(res.Fragments) > 0 {
		s.cfg.Metrics.PutCommitted(len(res.Fragments))
	}
	meta, err := json.Marshal(res)
	if err != nil {
		return toStatus(err)
	}
	return stream.Send(&aflight.PutResult{AppMetadata: meta})
}

// putWriter is what DoPut needs of writer.SparseWriter and writer.DenseWriter.
type putWriter interface {
	Append(rec arrow.RecordBatch) error
	Commit() (*writer.Result, error)
	Stage() (*writer.Result, error)
	Abort() error
}

func (s *Service) doPut(ctx context.Context, stream aflight.FlightService_DoPutServer) (*putResult, error) {
	rdr, err := aflight.NewRecordReader(stream)
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("DoPut: %w", ctx.Err())
		}
		return nil, errkind.Errorf(errkind.InvalidArgument, "DoPut: the stream must start with a flight descriptor and an Arrow schema: %v", err)
	}
	defer rdr.Release()
	q, err := descriptorQuery(rdr.LatestFlightDescriptor())
	if err != nil {
		return nil, fmt.Errorf("DoPut: %w", err)
	}
	return s.write(ctx, q, rdr)
}

// RecordSource is a stream of record batches to write (a Flight
// MessageReader is one).
type RecordSource interface {
	Schema() *arrow.Schema
	Next() bool
	RecordBatch() arrow.RecordBatch
	Err() error
}

// write writes rdr's rows into q's array as one atomic write, the rules
// of DoPut (docs/protocol.md, "Queries, tickets and descriptors") applying to q and to the stream.
func (s *Service) write(ctx context.Context, q *query.Query, rdr RecordSource) (*putResult, error) {
	ci := callInfo(ctx)
	ci.SetArray(q.Array)
	if q.Columns != nil || q.Limit >= 0 || q.BatchRows != 0 || q.Partitions != 0 || q.Compression != "" {
		return nil, errkind.Errorf(errkind.InvalidArgument, "DoPut to %q: the descriptor may hold only array, subarray, timestamp, layout and stage", q.Array)
	}
	a, err := s.openForWrite(ctx, q.Array)
	if err != nil {
		return nil, err
	}
	if a.B2ND != nil {
		return s.doPutB2ND(ctx, q, a, rdr)
	}
	sch := a.Schema
	if _, err := checkPutSchema(q.Array, sch, rdr.Schema()); err != nil {
		return nil, err
	}
	var dense *denseTarget
	if sch.IsDense() {
		if dense, err = denseSubarray(q, sch); err != nil {
			return nil, err
		}
	} else if len(q.Subarray) > 0 || q.Layout != query.LayoutDefault {
		return nil, errkind.Errorf(errkind.InvalidArgument, "DoPut to sparse array %q: cells carry their coordinates; drop \"subarray\" and \"layout\" from the descriptor", q.Array)
	}

	// An encrypted array was opened with the daemon's key (a daemon
	// without one was refused above): its fragments are sealed with it.
	opt := writer.Options{MaxFragmentBytes: s.cfg.MaxFragmentBytes, EncryptionKey: s.keyOf(a)}
	if q.Timestamp != nil {
		opt.Timestamp = q.Timestamp.End
	}
	// The writer works under a context that the client hanging up does not
	// cancel: its Abort must still be able to delete the fragments written
	// so far. The hang-up itself is seen by the next read of the stream.
	wctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	var w putWriter
	if dense != nil {
		w, err = newDenseWriter(wctx, s.cfg.Store, q.Array, sch, dense, opt)
	} else {
		w, err = writer.NewSparseWriter(wctx, s.cfg.Store, q.Array, sch, opt)
	}
	if err != nil {
		return nil, fmt.Errorf("DoPut to %q: %w", q.Array, err)
	}
	// Abort is a no-op after a successful Commit, and after a failed one
	// it keeps what the commit object may already name.
	defer w.Abort()
	committed := false
	defer func() {
		if !committed {
			s.cfg.Metrics.PutAborted()
		}
	}()

	var rows, bytes int64
	for rdr.Next() {
		rec := rdr.RecordBatch()
		bytes += recordBytes(rec)
		if bytes > s.cfg.MaxPutBytes {
			return nil, errkind.Errorf(errkind.ResourceExhausted, "%s", putTooBig(q.Array, s.cfg.MaxPutBytes))
		}
		n := rec.NumRows()
		if dense != nil && rows+n > dense.cells {
			return nil, errkind.Errorf(errkind.InvalidArgument, "DoPut to dense array %q: the subarray %s holds %d cells but the stream has more (%d rows so far)", q.Array, dense.describe(sch), dense.cells, rows+n)
		}
		if err := w.Append(rec); err != nil {
			return nil, fmt.Errorf("DoPut to %q: %w", q.Array, err)
		}
		rows += n
	}
	if err := rdr.Err(); err != nil && !errors.Is(err, io.EOF) {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("DoPut to %q: the client went away after %d rows; nothing was written: %w", q.Array, rows, ctx.Err())
		}
		if errkind.Of(err) != nil {
			// A source that classifies its own errors (an SQL INSERT's
			// rows: a value that does not fit, an array not found) keeps
			// its kind.
			return nil, fmt.Errorf("DoPut to %q: after %d rows; nothing was written: %w", q.Array, rows, err)
		}
		return nil, errkind.Errorf(errkind.InvalidArgument, "DoPut to %q: reading the stream after %d rows: %v", q.Array, rows, err)
	}
	ci.AddRows(rows)
	ci.AddBytes(bytes)
	if dense != nil && rows != dense.cells {
		return nil, errkind.Errorf(errkind.InvalidArgument, "DoPut to dense array %q: the subarray %s holds %d cells but the stream has %d rows", q.Array, dense.describe(sch), dense.cells, rows)
	}
	if rows == 0 {
		committed = true // nothing to roll back
		return &putResult{Fragments: []string{}, Staged: q.Stage}, nil
	}
	if ctx.Err() != nil {
		return nil, fmt.Errorf("DoPut to %q: the client went away before the commit; nothing was written: %w", q.Array, ctx.Err())
	}
	finish := w.Commit
	if q.Stage {
		finish = w.Stage
	}
	res, err := finish()
	if err != nil {
		return nil, fmt.Errorf("DoPut to %q: %w", q.Array, err)
	}
	committed = true
	frags := res.Fragments
	if frags == nil {
		frags = []string{}
	}
	if !q.Stage {
		s.notifyWrite(q.Array, len(frags))
	}
	return &putResult{Fragments: frags, Rows: res.Rows, Staged: q.Stage}, nil
}

// checkPutSchema checks the stream's schema against the array before any
// row is read: the right set of columns, each of a type the conversions of
// docs/protocol.md, "Queries, tickets and descriptors" accept. It returns the column names.
func checkPutSchema(name string, s *schema.ArraySchema, in *arrow.Schema) ([]string, error) {
	want := map[string]bool{}
	var order []string
	if !s.IsDense() {
		for _, d := range s.Dimensions {
			want[d.Name] = true
			order = append(order, d.Name)
		}
	}
	for _, at := range s.Attributes {
		want[at.Name] = true
		order = append(order, at.Name)
	}
	kind := "sparse"
	if s.IsDense() {
		kind = "dense"
	}
	seen := map[string]bool{}
	var names []string
	for _, f := range in.Fields() {
		if seen[f.Name] {
			return nil, errkind.Errorf(errkind.InvalidArgument, "DoPut to %q: column %q appears twice", name, f.Name)
		}
		seen[f.Name] = true
		if !want[f.Name] {
			if s.IsDense() && s.DimensionIndex(f.Name) >= 0 {
				return nil, errkind.Errorf(errkind.InvalidArgument, "DoPut to dense array %q: column %q is a dimension; dense writes give the cells' place with the descriptor's subarray and send only attributes (%s)", name, f.Name, strings.Join(order, ", "))
			}
			return nil, errkind.Errorf(errkind.InvalidArgument, "DoPut to %s array %q: unknown column %q (want exactly: %s)", kind, name, f.Name, strings.Join(order, ", "))
		}
		af, _ := writer.ArrowField(s, f.Name)
		if err := checkColumnType(af, f.Type); err != nil {
			wt, _ := arrowconv.ArrowType(af)
			return nil, errkind.Errorf(errkind.InvalidArgument, "DoPut to %q: column %q: type %s does not convert to the array's %s (Arrow %v): %v", name, f.Name, f.Type, af.Type, wt, err)
		}
		names = append(names, f.Name)
	}
	var missing []string
	for _, n := range order {
		if !seen[n] {
			missing = append(missing, n)
		}
	}
	if len(missing) > 0 {
		return nil, errkind.Errorf(errkind.InvalidArgument, "DoPut to %s array %q: missing column(s) %s (want exactly: %s)", kind, name, strings.Join(missing, ", "), strings.Join(order, ", "))
	}
	return names, nil
}

// checkColumnType asks the converter about an empty column of the stream's
// type: types are refused before any row arrives, value checks (exact
// numeric casts, nulls in non-nullable attributes) come with the rows.
func checkColumnType(af arrowconv.Field, dt arrow.DataType) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("unsupported Arrow type %s", dt)
		}
	}()
	b := arrarray.NewBuilder(memory.DefaultAllocator, dt)
	defer b.Release()
	empty := b.NewArray()
	defer empty.Release()
	_, _, _, err = arrowconv.ToTileDB(af, empty)
	return err
}

// denseTarget is where a dense DoPut goes: one inclusive range per
// dimension (as int64 values, or uint64 bit patterns for UINT64) and the
// order of the incoming cells.
type denseTarget struct {
	Lo, Hi   []int64
	ColMajor bool
	cells    int64
}

func (d *denseTarget) describe(s *schema.ArraySchema) string {
	parts := make([]string, len(d.Lo))
	for i := range d.Lo {
		parts[i] = fmt.Sprintf("%s=[%d, %d]", s.Dimensions[i].Name, d.Lo[i], d.Hi[i])
	}
	return strings.Join(parts, " ")
}

// denseSubarray reads the dense write's target from the descriptor: one
// range per dimension, inside the domain; a dimension left out spans its
// whole domain.
func denseSubarray(q *query.Query, s *schema.ArraySchema) (*denseTarget, error) {
	d := &denseTarget{Lo: make([]int64, len(s.Dimensions)), Hi: make([]int64, len(s.Dimensions))}
	switch q.Layout {
	case query.LayoutDefault, query.LayoutRowMajor:
	case query.LayoutColMajor:
		d.ColMajor = true
	default:
		return nil, errkind.Errorf(errkind.InvalidArgument, "DoPut to dense array %q: layout %q: rows come in row-major or col-major order", q.Array, q.Layout)
	}
	given := map[string]query.DimRanges{}
	for _, dr := range q.Subarray {
		if s.DimensionIndex(dr.Dim) < 0 {
			return nil, errkind.Errorf(errkind.InvalidArgument, "DoPut to %q: subarray names %q, which is not a dimension", q.Array, dr.Dim)
		}
		given[dr.Dim] = dr
	}
	cells := big.NewInt(1)
	for i := range s.Dimensions {
		dim := &s.Dimensions[i]
		if !dim.Type.IsInteger() && !dim.Type.IsDatetime() && !dim.Type.IsTime() {
			return nil, errkind.Errorf(errkind.Unimplemented, "DoPut to %q: dense dimension %q of type %s", q.Array, dim.Name, dim.Type)
		}
		lo, hi := domainInt(dim.Type, dim.Lo()), domainInt(dim.Type, dim.Hi())
		if dr, ok := given[dim.Name]; ok {
			if len(dr.Ranges) != 1 {
				return nil, errkind.Errorf(errkind.InvalidArgument, "DoPut to dense array %q: dimension %q: give exactly one [lo, hi] range, not %d", q.Array, dim.Name, len(dr.Ranges))
			}
			var err error
			if lo, err = boundInt(dim.Type, dr.Ranges[0].Lo); err == nil {
				hi, err = boundInt(dim.Type, dr.Ranges[0].Hi)
			}
			if err != nil {
				return nil, errkind.Errorf(errkind.InvalidArgument, "DoPut to %q: dimension %q: %v", q.Array, dim.Name, err)
			}
			dlo, dhi := domainInt(dim.Type, dim.Lo()), domainInt(dim.Type, dim.Hi())
			if cmpInt(dim.Type, lo, hi) > 0 || cmpInt(dim.Type, lo, dlo) < 0 || cmpInt(dim.Type, hi, dhi) > 0 {
				return nil, errkind.Errorf(errkind.InvalidArgument, "DoPut to %q: dimension %q: range [%s, %s] is empty or outside the domain [%s, %s]", q.Array, dim.Name,
					fmtInt(dim.Type, lo), fmtInt(dim.Type, hi), fmtInt(dim.Type, dlo), fmtInt(dim.Type, dhi))
			}
		}
		d.Lo[i], d.Hi[i] = lo, hi
		n := new(big.Int)
		if dim.Type == datatype.Uint64 {
			n.SetUint64(uint64(hi) - uint64(lo))
		} else {
			n.Sub(big.NewInt(hi), big.NewInt(lo))
		}
		cells.Mul(cells, n.Add(n, big.NewInt(1)))
	}
	if !cells.IsInt64() || cells.Int64() > math.MaxInt64/2 {
		return nil, errkind.Errorf(errkind.InvalidArgument, "DoPut to %q: the subarray holds more cells than one write can", q.Array)
	}
	d.cells = cells.Int64()
	return d, nil
}

func domainInt(t datatype.Datatype, b []byte) int64 {
	if t == datatype.Uint64 {
		return int64(schema.AsUint64(t, b))
	}
	return schema.AsInt64(t, b)
}

func boundInt(t datatype.Datatype, v query.Value) (int64, error) {
	if v.IsStr {
		return 0, fmt.Errorf("bound %q is a string; the dimension is %s", v.Str, t)
	}
	if t == datatype.Uint64 {
		u, err := strconv.ParseUint(string(v.Num), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("bound %s is not a %s", v.Num, t)
		}
		return int64(u), nil
	}
	i, err := v.Num.Int64()
	if err != nil {
		return 0, fmt.Errorf("bound %s is not an integer", v.Num)
	}
	return i, nil
}

func cmpInt(t datatype.Datatype, a, b int64) int {
	if t == datatype.Uint64 {
		ua, ub := uint64(a), uint64(b)
		switch {
		case ua < ub:
			return -1
		case ua > ub:
			return 1
		}
		return 0
	}
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func fmtInt(t datatype.Datatype, v int64) string {
	if t == datatype.Uint64 {
		return fmt.Sprint(uint64(v))
	}
	return fmt.Sprint(v)
}

// newDenseWriter starts the streaming writer of a dense DoPut.
func newDenseWriter(ctx context.Context, st storage.Store, name string, s *schema.ArraySchema, d *denseTarget, opt writer.Options) (*writer.DenseWriter, error) {
	sub := make([][2]int64, len(d.Lo))
	for i := range d.Lo {
		sub[i] = [2]int64{d.Lo[i], d.Hi[i]}
	}
	layout := schema.RowMajor
	if d.ColMajor {
		layout = schema.ColMajor
	}
	return writer.NewDenseWriter(ctx, st, name, s, sub, layout, opt)
}

// putStream replays the first message of a DoPut stream, which DoPut
// reads before anything else.
type putStream struct {
	aflight.FlightService_DoPutServer
	first *aflight.FlightData
}

func (p *putStream) Recv() (*aflight.FlightData, error) {
	if f := p.first; f != nil {
		p.first = nil
		return f, nil
	}
	return p.FlightService_DoPutServer.Recv()
}
