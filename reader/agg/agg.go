// Package agg owns aggregates (docs/protocol.md, "Array lifecycle",
// `aggregates`): it checks them against the schema as TileDB does,
// accumulates them with TileDB 2.30's semantics over the cells an inner
// read returns (reader/dense chunks, reader/sparse batches, reader/ndarray
// batches), answers whole tiles from their statistics and .b2nd special
// chunks from their one value, and streams the one-row result. It imports
// reader/base, the three readers and the packages below them, never
// package reader.
package agg

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow"
	arrowarray "github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/tileflight/tileflight/arrowconv"
	"github.com/tileflight/tileflight/errkind"
	"github.com/tileflight/tileflight/format/datatype"
	"github.com/tileflight/tileflight/format/schema"
	"github.com/tileflight/tileflight/query"
	"github.com/tileflight/tileflight/reader/base"
	"github.com/tileflight/tileflight/reader/dense"
	"github.com/tileflight/tileflight/reader/plan"
	"github.com/tileflight/tileflight/reader/sparse"
	"github.com/tileflight/tileflight/reader/tileio"
	"github.com/tileflight/tileflight/tdbarray"
)

// aggState is one aggregate of docs/protocol.md, "Array lifecycle" (`aggregates`), accumulated
// as TileDB 2.30 does: sum in int64 / uint64 / float64 (an overflow is an
// error), min and max keep the first value and replace it by a smaller
// (larger) one, so a NaN seen first sticks, mean is sum / values, count
// counts cells and null_count null cells.
type aggState struct {
	spec  query.Aggregate
	field arrowconv.Field // zero for count(*)
	typ   datatype.Datatype
	size  int

	cells, nulls, values uint64
	isum                 int64
	usum                 uint64
	fsum                 float64
	mm                   []byte // min/max so far (values > 0)
	overflow             bool
	// str: min/max of a STRING_ASCII field (var-sized or fixed), compared
	// as bytes as TileDB's std::less<std::string_view>; mm holds the value.
	str bool
}

// newAggs checks the aggregates of q against the array's schema the way
// TileDB does and prepares them.
func newAggs(s *schema.ArraySchema, dir string, aggs []query.Aggregate) ([]*aggState, error) {
	var out []*aggState
	for _, a := range aggs {
		st := &aggState{spec: a}
		if a.Field != "*" {
			f, err := base.FieldFor(s, a.Field)
			if err != nil {
				return nil, errkind.Errorf(errkind.InvalidArgument, "array %s: aggregates: no attribute or dimension %q", dir, a.Field)
			}
			st.field, st.typ, st.size = f, f.Type, f.Type.Size()
			bad := func(why string) error {
				return errkind.Errorf(errkind.InvalidArgument, "array %s: aggregates: %s: %s", dir, a.Column(), why)
			}
			switch a.Op {
			case "null_count":
				if !f.Nullable {
					return nil, bad("null_count is only for nullable fields (TileDB)")
				}
			case "sum", "mean", "min", "max":
				if (a.Op == "min" || a.Op == "max") && f.Type == datatype.StringASCII && f.Enumeration == nil {
					st.str = true
					break
				}
				if (a.Op == "min" || a.Op == "max") && (f.Type.IsString() || f.Type == datatype.Char) {
					// TileDB 2.30's MinOperation/MaxOperation take
					// STRING_ASCII only ("Datatype::CHAR is not a
					// supported Datatype").
					return nil, bad(fmt.Sprintf("TileDB defines min/max of strings for string_ascii only, not %s", f.Type.TileDBName()))
				}
				if f.IsVar() || f.CellValNum != 1 {
					return nil, bad("only fields of one fixed-size value per cell can be summed or compared")
				}
				if f.Enumeration != nil {
					return nil, bad("aggregates over enumerated attributes are not supported")
				}
				switch {
				case f.Type.IsFloat(), f.Type.IsInteger() && !f.Type.IsDatetime() && !f.Type.IsTime() && f.Type != datatype.Bool:
				case (a.Op == "min" || a.Op == "max") && (f.Type.IsDatetime() || f.Type.IsTime()):
				default:
					return nil, bad(fmt.Sprintf("type %s is not supported by this aggregate", f.Type.TileDBName()))
				}
			}
		}
		out = append(out, st)
	}
	return out, nil
}

// add aggregates n cells of the field: data holds n fixed-size values
// (nil for count-only aggregates), valid(i) tells whether cell i is not
// null (nil: all valid), pass[i] whether the cell is in (nil: all), and
// written[i] whether a fragment wrote it (dense; nil: all). Unwritten
// cells count in count(), as TileDB's dense aggregates count every cell
// of the subarray, and nowhere else.
func (a *aggState) add(data []byte, n int, valid func(int) bool, pass, written []bool, dense bool) error {
	in := func(i int) bool { return (pass == nil || pass[i]) && (written == nil || written[i]) }
	if a.str && a.spec.Op != "count" && a.spec.Op != "null_count" {
		return fmt.Errorf("%s: a string aggregate needs its cells (addStrings)", a.spec.Column())
	}
	switch a.spec.Op {
	case "count":
		if dense {
			a.cells += uint64(n)
			return nil
		}
		if pass == nil {
			a.cells += uint64(n)
			return nil
		}
		for i := 0; i < n; i++ {
			if pass[i] {
				a.cells++
			}
		}
		return nil
	case "null_count":
		for i := 0; i < n; i++ {
			if in(i) && valid != nil && !valid(i) {
				a.nulls++
			}
		}
		return nil
	}
	if len(data) < n*a.size {
		return fmt.Errorf("%s: %d bytes for %d cells", a.spec.Column(), len(data), n)
	}
	sel := func(i int) bool { return in(i) && (valid == nil || valid(i)) }
	all := pass == nil && written == nil && valid == nil
	switch a.typ {
	case datatype.Int8:
		aggNum[int8](a, data, n, all, sel)
	case datatype.Uint8:
		aggNum[uint8](a, data, n, all, sel)
	case datatype.Int16:
		aggNum[int16](a, data, n, all, sel)
	case datatype.Uint16:
		aggNum[uint16](a, data, n, all, sel)
	case datatype.Int32:
		aggNum[int32](a, data, n, all, sel)
	case datatype.Uint32:
		aggNum[uint32](a, data, n, all, sel)
	case datatype.Uint64:
		aggNum[uint64](a, data, n, all, sel)
	case datatype.Float32:
		aggNum[float32](a, data, n, all, sel)
	case datatype.Float64:
		aggNum[float64](a, data, n, all, sel)
	default:
		aggNum[int64](a, data, n, all, sel) // INT64, datetimes, times
	}
	if a.overflow {
		return errkind.Errorf(errkind.InvalidArgument, "%s: overflow on sum", a.spec.Column())
	}
	return nil
}

type numeric interface {
	~int8 | ~uint8 | ~int16 | ~uint16 | ~int32 | ~uint32 | ~int64 | ~uint64 | ~float32 | ~float64
}

func aggNum[T numeric](a *aggState, data []byte, n int, all bool, sel func(int) bool) {
	if n == 0 {
		return
	}
	xs := unsafe.Slice((*T)(unsafe.Pointer(unsafe.SliceData(data))), n)
	var zero T
	isFloat := any(zero) == any(float32(0)) || any(zero) == any(float64(0))
	signed := T(0)-1 < 0
	switch a.spec.Op {
	case "sum", "mean":
		for i, x := range xs {
			if !all && !sel(i) {
				continue
			}
			a.values++
			switch {
			case isFloat:
				a.fsum += float64(x)
			case signed:
				v := int64(x)
				s := a.isum + v
				if (v > 0 && s < a.isum) || (v < 0 && s > a.isum) {
					a.overflow = true
				}
				a.isum = s
			default:
				v := uint64(x)
				s := a.usum + v
				if s < a.usum {
					a.overflow = true
				}
				a.usum = s
			}
		}
	case "min", "max":
		// NaN is skipped (TileDB's result with NaN cells depends on the
		// order it visits cells in: a NaN met first sticks); a field
		// holding only NaN answers NaN.
		var cur T
		if a.values > 0 {
			cur = *(*T)(unsafe.Pointer(unsafe.SliceData(a.mm)))
		}
		isMin := a.spec.Op == "min"
		for i, x := range xs {
			if !all && !sel(i) {
				continue
			}
			if x != x {
				if a.values == 0 {
					cur = x
					a.values++
				}
				continue
			}
			if a.values == 0 || cur != cur || (isMin && x < cur) || (!isMin && x > cur) {
				cur = x
			}
			a.values++
		}
		if a.values > 0 {
			if a.mm == nil {
				a.mm = make([]byte, a.size)
			}
			*(*T)(unsafe.Pointer(unsafe.SliceData(a.mm))) = cur
		}
	}
}

// addStrings is add for string min/max: cell(i) returns cell i's bytes.
func (a *aggState) addStrings(n int, cell func(int) []byte, valid func(int) bool, pass, written []bool) {
	isMin := a.spec.Op == "min"
	for i := 0; i < n; i++ {
		if pass != nil && !pass[i] || written != nil && !written[i] || valid != nil && !valid(i) {
			continue
		}
		v := cell(i)
		if a.values == 0 {
			a.mm = append(a.mm[:0], v...)
		} else if c := bytes.Compare(v, a.mm); isMin && c < 0 || !isMin && c > 0 {
			a.mm = append(a.mm[:0], v...)
		}
		a.values++
	}
}

// cellsOf returns the bytes of cell i of a string column (nil for other
// types).
func cellsOf(col arrow.Array) func(int) []byte {
	switch c := col.(type) {
	case *arrowarray.String:
		return func(i int) []byte { return []byte(c.Value(i)) }
	case *arrowarray.LargeString:
		return func(i int) []byte { return []byte(c.Value(i)) }
	case *arrowarray.Binary:
		return c.Value
	case *arrowarray.LargeBinary:
		return c.Value
	case *arrowarray.FixedSizeBinary:
		return c.Value
	}
	return nil
}

// denseCells returns the bytes of cell i of a dense chunk's column (data
// and offsets as dense.Chunk.Column gives them): fixed cells of size, or
// var cells by their start offsets (the last one ends at len(data)).
func denseCells(data, offsets []byte, size int) func(int) []byte {
	if offsets == nil {
		return func(i int) []byte { return data[i*size : (i+1)*size] }
	}
	n := len(offsets) / 8
	return func(i int) []byte {
		lo := binary.LittleEndian.Uint64(offsets[8*i:])
		hi := uint64(len(data))
		if i+1 < n {
			hi = binary.LittleEndian.Uint64(offsets[8*(i+1):])
		}
		return data[lo:hi]
	}
}

// column is the aggregate's one-cell result column and its Arrow field.
func (a *aggState) column(dense bool) (arrow.Field, arrow.Array, error) {
	name := a.spec.Column()
	u64 := func(v uint64) (arrow.Field, arrow.Array, error) {
		b := arrowarray.NewUint64Builder(memPool)
		defer b.Release()
		b.Append(v)
		return arrow.Field{Name: name, Type: arrow.PrimitiveTypes.Uint64}, b.NewArray(), nil
	}
	nullable := a.field.Nullable
	switch a.spec.Op {
	case "count":
		return u64(a.cells)
	case "null_count":
		return u64(a.nulls)
	case "mean":
		b := arrowarray.NewFloat64Builder(memPool)
		defer b.Release()
		switch {
		case a.values > 0:
			b.Append(a.sumFloat() / float64(a.values))
		case nullable:
			b.AppendNull()
		default:
			b.Append(math.NaN())
		}
		return arrow.Field{Name: name, Type: arrow.PrimitiveTypes.Float64, Nullable: true}, b.NewArray(), nil
	case "sum":
		empty := a.values == 0 && nullable
		switch {
		case a.typ.IsFloat():
			b := arrowarray.NewFloat64Builder(memPool)
			defer b.Release()
			if empty {
				b.AppendNull()
			} else {
				b.Append(a.fsum)
			}
			return arrow.Field{Name: name, Type: arrow.PrimitiveTypes.Float64, Nullable: true}, b.NewArray(), nil
		case a.typ.IsSigned():
			b := arrowarray.NewInt64Builder(memPool)
			defer b.Release()
			if empty {
				b.AppendNull()
			} else {
				b.Append(a.isum)
			}
			return arrow.Field{Name: name, Type: arrow.PrimitiveTypes.Int64, Nullable: true}, b.NewArray(), nil
		default:
			b := arrowarray.NewUint64Builder(memPool)
			defer b.Release()
			if empty {
				b.AppendNull()
			} else {
				b.Append(a.usum)
			}
			return arrow.Field{Name: name, Type: arrow.PrimitiveTypes.Uint64, Nullable: true}, b.NewArray(), nil
		}
	}
	// min, max: the field's own type. Without a value: null, except that
	// TileDB's dense reads of fields that cannot be null answer zero.
	f := a.field
	f.Name = name
	f.Nullable = true
	val := a.mm
	valid := []byte{1}
	cellSize := a.size
	if a.str && !f.IsVar() {
		cellSize = f.CellSize()
	}
	if a.values == 0 {
		// Strings: TileDB's var-sized answer without a value is empty.
		val = make([]byte, cellSize)
		if a.str && f.IsVar() {
			val = []byte{}
		}
		if !dense || nullable {
			valid[0] = 0
		}
	}
	af, err := arrowconv.ArrowField(f)
	if err != nil {
		return arrow.Field{}, nil, err
	}
	var offs []byte
	if f.IsVar() {
		offs = make([]byte, 8)
	}
	col, err := arrowconv.NewColumn(f, val, offs, valid, 1)
	return af, col, err
}

func (a *aggState) sumFloat() float64 {
	switch {
	case a.typ.IsFloat():
		return a.fsum
	case a.typ.IsSigned():
		return float64(a.isum)
	}
	return float64(a.usum)
}

// Reader answers an aggregate query with one record of one row.
type Reader struct {
	run    func(ctx context.Context) error
	aggs   []*aggState
	dense  bool
	schema *arrow.Schema
	done   bool
	close  func()
}

// Schema is the schema of the one-row result (the package function
// Schema of the plan).
func (s *Reader) Schema() *arrow.Schema { return s.schema }

// Next returns the one-row result, then io.EOF.
func (s *Reader) Next(ctx context.Context) (arrow.RecordBatch, error) {
	if s.done {
		return nil, io.EOF
	}
	s.done = true
	if err := s.run(ctx); err != nil {
		return nil, err
	}
	cols := make([]arrow.Array, len(s.aggs))
	defer func() {
		for _, c := range cols {
			if c != nil {
				c.Release()
			}
		}
	}()
	for i, a := range s.aggs {
		_, col, err := a.column(s.dense)
		if err != nil {
			return nil, err
		}
		cols[i] = col
	}
	return arrowarray.NewRecordBatch(s.schema, cols, 1), nil
}

// Close stops the inner read.
func (s *Reader) Close() {
	if s.close != nil {
		s.close()
	}
}

// Schema is the schema of the one-row result of p's aggregates.
func Schema(p *plan.Plan) (*arrow.Schema, error) {
	s := aggSchema(p)
	aggs, err := newAggs(s, p.Array.Dir, p.Query.Aggregates)
	if err != nil {
		return nil, err
	}
	var fields []arrow.Field
	for _, a := range aggs {
		f, col, err := a.column(s.IsDense())
		if err != nil {
			return nil, errkind.Wrap(errkind.Unimplemented, fmt.Errorf("array %s: %w", p.Array.Dir, err))
		}
		col.Release()
		fields = append(fields, f)
	}
	return arrow.NewSchema(fields, nil), nil
}

// aggSchema is the schema aggregates are bound against: a .b2nd's with
// its typed fields.
func aggSchema(p *plan.Plan) *schema.ArraySchema {
	if p.Array.B2ND != nil {
		return plan.B2NDTypedSchema(p.Array)
	}
	return p.Array.Schema
}

// NewReader plans the read of the fields p's aggregates need (p.Query.
// Aggregates) and starts it under a Reader.
func NewReader(ctx context.Context, p *plan.Plan, opt base.Options) (*Reader, error) {
	if p.Array.B2ND != nil {
		return newB2NDReader(ctx, p, opt)
	}
	s := p.Array.Schema
	aggs, err := newAggs(s, p.Array.Dir, p.Query.Aggregates)
	if err != nil {
		return nil, err
	}
	src := &Reader{aggs: aggs, dense: s.IsDense()}
	if src.schema, err = Schema(p); err != nil {
		return nil, err
	}
	// The inner read: every field an aggregate reads, once.
	inner := *p
	inner.Columns = aggColumns(aggs, s.Dimensions[0].Name)
	inner.Limit = -1
	inner.BatchRows = query.MaxBatchRows
	if src.dense {
		inner.Layout = query.LayoutGlobal
	} else {
		inner.Layout = query.LayoutUnordered
	}
	var ifields []arrowconv.Field
	for _, c := range inner.Columns {
		f, err := base.FieldFor(s, c)
		if err != nil {
			return nil, fmt.Errorf("array %s: %w", p.Array.Dir, err)
		}
		ifields = append(ifields, f)
	}
	loader := tileio.NewLoader(p.Array, tileio.Options{MemoryBudget: opt.MemoryBudget, MaxWorkingSet: opt.MaxWorkingSet, EncryptionKey: opt.EncryptionKey, Meter: opt.Meter})
	idx := func(name string) int {
		for i, c := range inner.Columns {
			if c == name {
				return i
			}
		}
		return -1
	}
	if src.dense {
		sch, err := arrowconv.Schema(ifields, nil)
		if err != nil {
			return nil, errkind.Wrap(errkind.Unimplemented, fmt.Errorf("array %s: %w", p.Array.Dir, err))
		}
		var mu sync.Mutex
		d, err := dense.NewAggReader(ctx, &inner, ifields, sch, loader, opt, func(f *tdbarray.Fragment, t, cells uint64) (bool, error) {
			mu.Lock()
			defer mu.Unlock()
			return statsTile(aggs, f, t, cells)
		})
		if err != nil {
			return nil, err
		}
		src.close = d.Close
		addChunk := func(c *dense.Chunk) error {
			for _, a := range aggs {
				var data []byte
				var valid func(int) bool
				if a.spec.Field != "*" {
					var offsets, validity []byte
					data, offsets, validity = c.Column(idx(a.spec.Field))
					if v := validity; v != nil {
						valid = func(i int) bool { return v[i] != 0 }
					}
					if a.str && a.spec.Op != "count" && a.spec.Op != "null_count" {
						a.addStrings(c.N(), denseCells(data, offsets, a.field.CellSize()), valid, c.Pass(), c.Written())
						continue
					}
				}
				if err := a.add(data, c.N(), valid, c.Pass(), c.Written(), true); err != nil {
					return fmt.Errorf("array %s: %w", p.Array.Dir, err)
				}
			}
			return nil
		}
		src.run = func(ctx context.Context) error {
			for {
				c, err := d.NextChunk(ctx)
				if err == io.EOF {
					return nil
				}
				if err != nil {
					return err
				}
				if c.Answered() {
					continue
				}
				mu.Lock() // workers may be adding tile statistics meanwhile
				err = addChunk(c)
				mu.Unlock()
				if err != nil {
					return err
				}
			}
		}
	} else {
		sp, err := sparse.NewReader(ctx, sparse.Input{Plan: &inner, Loader: loader, Fields: ifields,
			Stats: func(f *tdbarray.Fragment, t, cells uint64) (bool, error) { return statsTile(aggs, f, t, cells) }})
		if err != nil {
			return nil, err
		}
		src.close = sp.Close
		src.run = func(ctx context.Context) error {
			for {
				rec, err := sp.Next(ctx)
				if err == io.EOF {
					return nil
				}
				if err != nil {
					return err
				}
				n := int(rec.NumRows())
				for _, a := range aggs {
					var data []byte
					var valid func(int) bool
					if a.spec.Field != "*" {
						col := rec.Column(idx(a.spec.Field))
						if col.NullN() > 0 {
							valid = col.IsValid
						}
						if a.str && a.spec.Op != "count" && a.spec.Op != "null_count" {
							cell := cellsOf(col)
							if cell == nil {
								rec.Release()
								return fmt.Errorf("array %s: %s: column of type %s", p.Array.Dir, a.spec.Column(), col.DataType())
							}
							a.addStrings(n, cell, valid, nil, nil)
							continue
						}
						if a.size > 0 && !a.field.IsVar() {
							bufs := col.Data().Buffers()
							if len(bufs) > 1 && bufs[1] != nil {
								off := col.Data().Offset() * a.size * int(max(a.field.CellValNum, 1))
								data = bufs[1].Bytes()[off:]
							}
						}
					}
					if err := a.add(data, n, valid, nil, nil, false); err != nil {
						rec.Release()
						return fmt.Errorf("array %s: %w", p.Array.Dir, err)
					}
				}
				rec.Release()
			}
		}
	}
	return src, nil
}

// statsTile answers every aggregate for tile t of fragment f from the
// fragment metadata's tile statistics, or none (false) when one of them
// lacks what it needs.
func statsTile(aggs []*aggState, f *tdbarray.Fragment, t, cells uint64) (bool, error) {
	apply := make([]func(), 0, len(aggs))
	for _, a := range aggs {
		fn, ok, err := a.fromStats(f, t, cells)
		if err != nil || !ok {
			return false, err
		}
		apply = append(apply, fn)
	}
	for _, fn := range apply {
		fn()
	}
	statTiles.Add(1)
	return true, nil
}

// statTiles counts the tiles answered from statistics (tests).
var statTiles atomic.Int64

func (a *aggState) fromStats(f *tdbarray.Fragment, t, cells uint64) (func(), bool, error) {
	if a.spec.Field == "*" || a.spec.Op == "count" {
		return func() { a.cells += cells }, true, nil
	}
	if a.str && a.spec.Op != "null_count" {
		return nil, false, nil // string min/max read their tiles
	}
	var mi int
	if d := f.Schema.DimensionIndex(a.spec.Field); d >= 0 {
		mi = f.Layout.DimIndex(d)
	} else if i := f.Schema.AttributeIndex(a.spec.Field); i >= 0 {
		mi = f.Layout.AttrIndex(i)
	} else {
		return nil, false, nil // written before the attribute existed
	}
	lo, ok1, err := f.Meta.TileMin(mi, t)
	if err != nil || !ok1 {
		return nil, false, err
	}
	hi, ok2, err := f.Meta.TileMax(mi, t)
	if err != nil || !ok2 {
		return nil, false, err
	}
	nulls := uint64(0)
	if a.field.Nullable {
		nc, ok, err := f.Meta.TileNullCount(mi, t)
		if err != nil || !ok || nc > cells {
			return nil, false, err
		}
		nulls = nc
	}
	values := cells - nulls
	switch a.spec.Op {
	case "null_count":
		return func() { a.nulls += nulls }, true, nil
	case "sum", "mean":
		raw, ok, err := f.Meta.TileSum(mi, t)
		if err != nil || !ok {
			return nil, false, err
		}
		switch {
		case a.typ.IsFloat():
			return func() { a.fsum += math.Float64frombits(raw); a.values += values }, true, nil
		case a.typ.IsSigned():
			return func() {
				v := int64(raw)
				s := a.isum + v
				if (v > 0 && s < a.isum) || (v < 0 && s > a.isum) {
					a.overflow = true
				}
				a.isum = s
				a.values += values
			}, true, nil
		}
		return func() {
			s := a.usum + raw
			if s < a.usum {
				a.overflow = true
			}
			a.usum = s
			a.values += values
		}, true, nil
	}
	// min, max
	if values == 0 {
		return func() {}, true, nil
	}
	if a.typ.IsFloat() {
		return nil, false, nil // NaN cells derail TileDB's float bounds (see eval.MayMatch)
	}
	v := lo
	if a.spec.Op == "max" {
		v = hi
	}
	if len(v) != a.size {
		return nil, false, nil
	}
	return func() {
		if a.values == 0 || better(a.typ, v, a.mm, a.spec.Op == "min") {
			a.mm = append(a.mm[:0], v...)
		}
		a.values += values
	}, true, nil
}

// rawFloat reads a float value (isNaN reports NaN); other types: 0, false.
func rawFloat(t datatype.Datatype, v []byte) (float64, bool) {
	switch t {
	case datatype.Float32:
		f := float64(math.Float32frombits(binary.LittleEndian.Uint32(v)))
		return f, f != f
	case datatype.Float64:
		f := math.Float64frombits(binary.LittleEndian.Uint64(v))
		return f, f != f
	}
	return 0, false
}

// better reports whether v should replace cur as the min (or max); a NaN
// cur is always replaced.
func better(t datatype.Datatype, v, cur []byte, isMin bool) bool {
	var c int
	switch {
	case t.IsFloat():
		x, _ := rawFloat(t, v)
		y, nan := rawFloat(t, cur)
		if nan {
			return true
		}
		c = cmpInt(x, y)
	case t.IsSigned():
		c = cmpInt(schema.AsInt64(t, v), schema.AsInt64(t, cur))
	default:
		c = cmpInt(schema.AsUint64(t, v), schema.AsUint64(t, cur))
	}
	if isMin {
		return c < 0
	}
	return c > 0
}

func cmpInt[T int64 | uint64 | float64](x, y T) int {
	switch {
	case x < y:
		return -1
	case x > y:
		return 1
	}
	return 0
}

func contains(l []string, s string) bool {
	for _, x := range l {
		if x == s {
			return true
		}
	}
	return false
}

var memPool = memory.DefaultAllocator

// aggColumns lists the fields the aggregates read, each once, in their
// order; count(*) alone reads only the first dimension, whose cells it
// counts.
func aggColumns(aggs []*aggState, firstDim string) []string {
	var cols []string
	for _, a := range aggs {
		if a.spec.Field != "*" && !contains(cols, a.spec.Field) {
			cols = append(cols, a.spec.Field)
		}
	}
	if len(cols) == 0 {
		cols = []string{firstDim}
	}
	return cols
}
