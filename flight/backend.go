package flight

// This file holds every call the service makes into the query engine
// (package reader and reader/plan), so that the rest of the package does
// not depend on how the engine spells things.

import (
	"context"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/tileflight/tileflight/errkind"
	"github.com/tileflight/tileflight/query"
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

// partition resolves q and splits it into disjoint parts along tile
// boundaries; total is the exact row count or -1.
func (s *Service) partition(ctx context.Context, q *query.Query) (*arrow.Schema, []*query.Query, int64, error) {
	_, sc, err := s.querySchema(ctx, q)
	if err != nil {
		return nil, nil, 0, err
	}
	one := *q
	one.Partitions = 0
	return sc, []*query.Query{&one}, -1, nil
}
