package agg

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
	"math"
	"math/bits"
	"slices"

	arrowarray "github.com/apache/arrow-go/v18/arrow/array"

	"github.com/tileflight/tileflight/b2nd"
	"github.com/tileflight/tileflight/errkind"
	"github.com/tileflight/tileflight/format/schema"
	"github.com/tileflight/tileflight/query"
	"github.com/tileflight/tileflight/reader/base"
	"github.com/tileflight/tileflight/reader/ndarray"
	"github.com/tileflight/tileflight/reader/plan"
)

// b2ndAggBatchRows is the batch size of an aggregate's inner read.
const b2ndAggBatchRows = 1 << 16

func newB2NDReader(ctx context.Context, p *plan.Plan, opt base.Options) (*Reader, error) {
	ts := plan.B2NDTypedSchema(p.Array)
	aggs, err := newAggs(ts, p.Array.Dir, p.Query.Aggregates)
	if err != nil {
		return nil, err
	}
	src := &Reader{aggs: aggs, dense: true}
	if src.schema, err = Schema(p); err != nil {
		return nil, err
	}
	inner := *p
	inner.Columns = aggColumns(aggs, ts.Dimensions[0].Name)
	inner.Limit = -1
	inner.BatchRows = b2ndAggBatchRows
	inner.Layout = query.LayoutGlobal
	var special func([]byte, uint64) error
	if inner.Cond == nil {
		// Special chunks are taken whole: one item stands for their cells.
		fields := map[string]b2nd.Field{}
		for _, f := range p.Array.B2ND.Dtype.Fields {
			fields[f.Name] = f
		}
		special = func(item []byte, cells uint64) error {
			for _, a := range aggs {
				var v []byte
				if f, ok := fields[a.spec.Field]; ok {
					v = append([]byte(nil), item[f.Offset:f.Offset+f.Size]...)
					if f.Big {
						slices.Reverse(v)
					}
				}
				if err := a.addRepeated(v, cells); err != nil {
					return fmt.Errorf("array %s: %w", p.Array.Dir, err)
				}
			}
			return nil
		}
		for _, a := range aggs {
			if _, ok := fields[a.spec.Field]; !ok && a.spec.Field != "*" && a.spec.Op != "count" {
				special = nil // a dimension's values differ from cell to cell
			}
		}
	}
	bs, err := ndarray.NewAggReader(ctx, &inner, opt, special)
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
			if inner.Cond != nil { // the last column tells which cells pass
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
	return src, nil
}

// addRepeated aggregates k cells that all hold value v (little-endian):
// the cells of a special chunk, taken without filling them.
func (a *aggState) addRepeated(v []byte, k uint64) error {
	if k == 0 {
		return nil
	}
	switch a.spec.Op {
	case "count":
		a.cells += k
		return nil
	case "null_count":
		return nil
	case "min", "max":
		// One copy decides; the others only count.
		if err := a.add(v, 1, nil, nil, nil, true); err != nil {
			return err
		}
		a.values += k - 1
		return nil
	}
	a.values += k
	switch {
	case a.typ.IsFloat():
		f, _ := rawFloat(a.typ, v)
		a.fsum += f * float64(k)
	case a.typ.IsSigned():
		x := schema.AsInt64(a.typ, v)
		hi, lo := bits.Mul64(uint64(max(x, -x)), k)
		if hi != 0 || lo > math.MaxInt64 {
			a.overflow = true
			break
		}
		p := int64(lo)
		if x < 0 {
			p = -p
		}
		s := a.isum + p
		if (p > 0 && s < a.isum) || (p < 0 && s > a.isum) {
			a.overflow = true
		}
		a.isum = s
	default:
		hi, lo := bits.Mul64(schema.AsUint64(a.typ, v), k)
		s := a.usum + lo
		if hi != 0 || s < a.usum {
			a.overflow = true
		}
		a.usum = s
	}
	if a.overflow {
		return errkind.Errorf(errkind.InvalidArgument, "%s: overflow on sum", a.spec.Column())
	}
	return nil
}
