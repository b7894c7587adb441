// Package native implements the Flight SQL layer's engine
// (tables.Engine) over the native service (package flightsvc), so that a
// statement is read, written, limited, checked and logged exactly as a
// native call is. It is the one place where the SQL side meets the
// engine's packages (array metadata, the reader's plan, conditions): a
// package of its own rather than part of flightsvc, so that the native
// service knows nothing of SQL, and outside sqlsvc, so that the SQL layer
// imports none of them.
package native

import (
	"context"

	"github.com/apache/arrow-go/v18/arrow"
	aflight "github.com/apache/arrow-go/v18/arrow/flight"

	"github.com/tileflight/tileflight/calls"
	"github.com/tileflight/tileflight/flightsvc"
	"github.com/tileflight/tileflight/format/fragmeta"
	"github.com/tileflight/tileflight/format/schema"
	"github.com/tileflight/tileflight/query"
	"github.com/tileflight/tileflight/query/cond"
	"github.com/tileflight/tileflight/reader/plan"
	"github.com/tileflight/tileflight/sqlsvc/tables"
	"github.com/tileflight/tileflight/tdbarray"
)

// Engine is tables.Engine over a native service.
type Engine struct{ svc *flightsvc.Service }

var _ tables.Engine = Engine{}

// New returns the engine of svc.
func New(svc *flightsvc.Service) Engine { return Engine{svc: svc} }

func (e Engine) ListArrays(ctx context.Context, prefix string) ([]tables.Entry, error) {
	es, err := e.svc.ListArrays(ctx, prefix)
	if err != nil {
		return nil, err
	}
	out := make([]tables.Entry, len(es))
	for i, x := range es {
		out[i] = tables.Entry{Path: x.Name, B2ND: x.B2ND}
	}
	return out, nil
}

func (e Engine) Describe(ctx context.Context, path string) (*tables.Array, error) {
	calls.From(ctx).AddArrays(path)
	a, sc, err := e.svc.OpenArray(ctx, path)
	if err != nil {
		return nil, err
	}
	return describe(path, a, sc), nil
}

// describe is the SQL layer's view of an opened array.
func describe(path string, a *tdbarray.Array, sc *arrow.Schema) *tables.Array {
	s := a.Schema
	out := &tables.Array{
		Path:  path,
		Arrow: sc,
		Dense: s.IsDense(),
		B2ND:  a.B2ND != nil,
		CheckFilter: func(filter string) error {
			_, err := cond.Compile(filter, s)
			return err
		},
	}
	for i := range s.Dimensions {
		d := &s.Dimensions[i]
		c := tables.Column{Name: d.Name, Type: d.Type, CellValNum: d.CellValNum, Var: d.IsVar()}
		if !d.IsVar() {
			c.Domain = tables.Range{Lo: bound(s, i, d.Lo()), Hi: bound(s, i, d.Hi())}
		}
		out.Dims = append(out.Dims, c)
	}
	for i := range s.Attributes {
		at := &s.Attributes[i]
		c := tables.Column{Name: at.Name, Type: at.Type, CellValNum: at.CellValNum, Var: at.IsVar(),
			Nullable: at.Nullable, Enumeration: at.EnumerationName}
		if at.EnumerationName != "" {
			// as the writer finds it (writer.ArrowField)
			ref := s.EnumerationByName(at.EnumerationName)
			c.Enumerated = ref != nil && ref.Enum != nil
		}
		out.Attrs = append(out.Attrs, c)
	}
	out.NonEmpty = ranges(s, plan.NonEmptyDomain(a))
	for _, f := range a.Fragments {
		tf := tables.Fragment{NonEmpty: ranges(s, f.NonEmptyDomain())}
		if n, err := f.CellNum(); err == nil {
			tf.Cells, tf.CellsKnown = n, true
		}
		out.Fragments = append(out.Fragments, tf)
	}
	return out
}

// ranges converts a non-empty domain (nil stays nil). Ranges of
// variable-size dimensions are left zero: they hold strings.
func ranges(s *schema.ArraySchema, mbr fragmeta.MBR) []tables.Range {
	if mbr == nil {
		return nil
	}
	out := make([]tables.Range, len(mbr))
	for i, r := range mbr {
		if i < len(s.Dimensions) && !s.Dimensions[i].IsVar() {
			out[i] = tables.Range{Lo: bound(s, i, r.Start), Hi: bound(s, i, r.End)}
		}
	}
	return out
}

// bound reads one value of dimension i.
func bound(s *schema.ArraySchema, i int, b []byte) tables.Bound {
	t := s.Dimensions[i].Type
	return tables.Bound{Int: schema.AsInt64(t, b), Uint: schema.AsUint64(t, b), Float: schema.AsFloat64(t, b)}
}

func (e Engine) ResultSchema(ctx context.Context, q *query.Query) (*arrow.Schema, error) {
	return e.svc.QuerySchema(ctx, q)
}

func (e Engine) Scan(ctx context.Context, q *query.Query) (tables.RecordStream, error) {
	return e.svc.OpenQuery(ctx, q)
}

func (e Engine) Partition(ctx context.Context, q *query.Query) ([]*query.Query, bool, error) {
	return e.svc.PartitionQuery(ctx, q)
}

func (e Engine) AssignLocations(eps []*aflight.FlightEndpoint) { e.svc.AssignLocations(eps) }

func (e Engine) Write(ctx context.Context, path string, src tables.RecordSource) (int64, error) {
	calls.From(ctx).AddArrays(path)
	res, err := e.svc.Write(ctx, &query.Query{Array: path, Limit: -1}, src)
	if err != nil {
		return 0, err
	}
	return res.Rows, nil
}

func (e Engine) CreateArray(ctx context.Context, body []byte) error {
	return e.svc.CreateArray(ctx, body)
}

func (e Engine) DropArray(ctx context.Context, path string) error { return e.svc.DropArray(ctx, path) }

func (e Engine) AcquireStream(ctx context.Context) (func(), error) { return e.svc.AcquireStream(ctx) }

func (e Engine) RequireWrite(ctx context.Context, what string) error {
	return flightsvc.RequireWrite(ctx, what)
}

func (e Engine) Status(err error) error { return flightsvc.Status(err) }

func (e Engine) NoteCall(ctx context.Context, array string, rows, bytes int64) {
	flightsvc.NoteCall(ctx, array, rows, bytes)
}

func (e Engine) RecordBytes(rec arrow.RecordBatch) int64 { return flightsvc.RecordBytes(rec) }
