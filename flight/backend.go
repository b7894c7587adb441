package flight

// This file holds every call the service makes into the query engine
// (package reader and reader/plan), so that the rest of the package does
// not depend on how the engine spells things.

import (
	"context"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/tileflight/tileflight/errkind"
	"github.com/tileflight/tileflight/query"
	"github.com/tileflight/tileflight/reader/plan"
)

// batchStream is one query's result as the reader produces it.
type batchStream interface {
	Schema() *arrow.Schema
	// Next returns the next batch (the caller releases it), io.EOF at the end.
	Next(ctx context.Context) (arrow.RecordBatch, error)
	Close() error
}

// openStream starts reading q.
func (s *Service) openStream(ctx context.Context, q *query.Query) (batchStream, error) {
	if _, _, err := s.querySchema(ctx, q); err != nil {
		return nil, err
	}
	return nil, errkind.Errorf(errkind.Unimplemented, "array %q: reading needs the query engine (package reader), which is not built yet", q.Array)
}

// resultSchema is the Arrow schema DoGet will stream for q.
func (s *Service) resultSchema(ctx context.Context, q *query.Query) (*arrow.Schema, error) {
	_, sc, err := s.querySchema(ctx, q)
	return sc, err
}

// Without a "partitions" request, a result is cut into one endpoint per
// rowsPerEndpoint rows, up to maxAutoEndpoints.
const (
	rowsPerEndpoint  = 4 << 20
	maxAutoEndpoints = 16
)

// partition resolves q and splits it into disjoint parts along tile
// boundaries; total is the exact row count or -1.
func (s *Service) partition(ctx context.Context, q *query.Query) (*arrow.Schema, []*query.Query, int64, error) {
	a, sc, err := s.querySchema(ctx, q)
	if err != nil {
		return nil, nil, 0, err
	}
	p, err := plan.Resolve(a, q)
	if err != nil {
		return nil, nil, 0, err
	}
	total, exact := plan.EstimateRows(p)
	if !exact {
		total = -1
	}
	n := q.Partitions
	if n == 0 {
		n = 1
		if total > 0 {
			n = int(min(int64(maxAutoEndpoints), (total+rowsPerEndpoint-1)/rowsPerEndpoint))
		}
	}
	return sc, plan.Split(p, n), total, nil
}
