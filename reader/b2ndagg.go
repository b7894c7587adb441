package reader

// Aggregates over a .b2nd: the cells of the subarray are read by the
// .b2nd read path (global order, only the fields the aggregates and the
// filter read) and accumulated by the aggState of the TileDB path with
// dense semantics: a .b2nd is a dense array every cell of which is
// written, so count counts every cell of the subarray (as TileDB's dense
// count does, filter or not) and the other aggregates take the cells that
// pass the filter.

import (
	"context"
	"fmt"
	"io"

	arrowarray "github.com/apache/arrow-go/v18/arrow/array"

	"github.com/tileflight/tileflight/query"
	"github.com/tileflight/tileflight/reader/plan"
)

// b2ndAggBatchRows is the batch size of an aggregate's inner read.
const b2ndAggBatchRows = 1 << 16

func openB2NDAggregate(ctx context.Context, p *plan.Plan, opt Options) (*Reader, error) {
	ts := plan.B2NDTypedSchema(p.Array)
	aggs, err := newAggs(ts, p.Array.Dir, p.Query.Aggregates)
	if err != nil {
		return nil, err
	}
	src := &aggSource{aggs: aggs, dense: true}
	if src.schema, err = AggregateSchema(p); err != nil {
		return nil, err
	}
	inner := *p
	inner.Columns = nil
	for _, a := range aggs {
		if a.spec.Field != "*" && !contains(inner.Columns, a.spec.Field) {
			inner.Columns = append(inner.Columns, a.spec.Field)
		}
	}
	if len(inner.Columns) == 0 {
		inner.Columns = []string{ts.Dimensions[0].Name}
	}
	inner.Limit = -1
	inner.BatchRows = b2ndAggBatchRows
	inner.Layout = query.LayoutGlobal
	bs, err := newB2NDSource(ctx, &inner, opt, true)
	if err != nil {
		return nil, err
	}
	src.close = bs.Close
	idx := func(name string) int {
		for i, c := range inner.Columns {
			if c == name {
				return i
			}
		}
		return -1
	}
	src.run = func(ctx context.Context) error {
		for {
			rec, err := bs.Next(ctx)
			if err == io.EOF {
				return nil
			}
			if err != nil {
				return err
			}
			n := int(rec.NumRows())
			var pass []bool
			if bs.prog != nil {
				pc := rec.Column(int(rec.NumCols()) - 1).(*arrowarray.Boolean)
				pass = make([]bool, n)
				for i := range pass {
					pass[i] = pc.Value(i)
				}
			}
			for _, a := range aggs {
				var data []byte
				if a.spec.Field != "*" && a.size > 0 && a.spec.Op != "count" {
					col := rec.Column(idx(a.spec.Field))
					bufs := col.Data().Buffers()
					if len(bufs) > 1 && bufs[1] != nil {
						data = bufs[1].Bytes()[col.Data().Offset()*a.size:]
					}
				}
				if err := a.add(data, n, nil, pass, nil, true); err != nil {
					rec.Release()
					return fmt.Errorf("array %s: %w", p.Array.Dir, err)
				}
			}
			rec.Release()
		}
	}
	return &Reader{plan: p, schema: src.schema, src: src}, nil
}
