package flightsvc

// This file holds every call the service makes into the query engine
// (package reader and reader/plan), so that the rest of the package does
// not depend on how the engine spells things.

import (
	"context"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/tileflight/tileflight/errkind"
	"github.com/tileflight/tileflight/query"
	"github.com/tileflight/tileflight/reader"
	"github.com/tileflight/tileflight/reader/agg"
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
	p, err := s.openPlan(ctx, q)
	if err != nil {
		return nil, err
	}
	r, err := reader.OpenPlan(ctx, p, reader.Options{
		MemoryBudget: s.cfg.MemoryBudget, MaxWorkingSet: s.cfg.MaxWorkingSet, Workers: s.cfg.Workers, EncryptionKey: s.keyOf(p.Array),
		TileCache: s.tiles, ZstdPassThrough: q.Compression == query.CompressionZstd,
	})
	if err != nil {
		return nil, s.openErr(ctx, q.Array, err)
	}
	return readerStream{r}, nil
}

type readerStream struct{ *reader.Reader }

func (r readerStream) Close() error { r.Reader.Close(); return nil }

// openPlan opens q's array as a read of q would, with the daemon's key
// (see openArray), and resolves q against it.
func (s *Service) openPlan(ctx context.Context, q *query.Query) (*plan.Plan, error) {
	if q.Stage {
		return nil, errkind.Errorf(errkind.InvalidArgument, `query on %q: "stage" belongs to DoPut descriptors only`, q.Array)
	}
	if err := s.checkName(ctx, q.Array); err != nil {
		return nil, err
	}
	a, err := reader.OpenArrayWith(ctx, s.cfg.Store, q, reader.Options{EncryptionKey: s.cfg.EncryptionKey, Cache: s.cache})
	if err != nil {
		return nil, s.openErr(ctx, q.Array, err)
	}
	return plan.Resolve(a, q)
}

// resolve opens q's array as a read of q would and resolves q against it.
func (s *Service) resolve(ctx context.Context, q *query.Query) (*plan.Plan, *arrow.Schema, error) {
	p, err := s.openPlan(ctx, q)
	if err != nil {
		return nil, nil, err
	}
	if q.Aggregates != nil {
		sc, err := agg.Schema(p)
		return p, sc, err
	}
	sc, err := arrowSchema(p.Array, q.Array, p.Columns)
	if err != nil {
		return nil, nil, err
	}
	return p, sc, nil
}

// resultSchema is the Arrow schema DoGet will stream for q.
func (s *Service) resultSchema(ctx context.Context, q *query.Query) (*arrow.Schema, error) {
	_, sc, err := s.resolve(ctx, q)
	return sc, err
}

// Without a "partitions" request, a result is cut into one endpoint per
// rowsPerEndpoint rows, up to maxAutoEndpoints.
const (
	rowsPerEndpoint  = 4 << 20
	maxAutoEndpoints = 16
	minRowsToSpread  = 64 << 10
)

// partition resolves q and splits it into disjoint parts along tile
// boundaries; total is the exact row count or -1.
func (s *Service) partition(ctx context.Context, q *query.Query) (*arrow.Schema, []*query.Query, int64, error) {
	p, sc, err := s.resolve(ctx, q)
	if err != nil {
		return nil, nil, 0, err
	}
	if q.Aggregates != nil {
		// One row, which only the whole read can compute.
		return sc, []*query.Query{q}, 1, nil
	}
	total, exact := plan.EstimateRows(p)
	if !exact || p.Cond != nil && !p.Array.Schema.IsDense() {
		total = -1
	}
	n := q.Partitions
	if n == 0 {
		n = 1
		if total > 0 {
			n = int(min(int64(maxAutoEndpoints), (total+rowsPerEndpoint-1)/rowsPerEndpoint))
		}
		// In a cluster, a result big enough to share gets at least one
		// endpoint per live node, so that every node serves a part.
		if s.cfg.Cluster != nil && total >= minRowsToSpread {
			n = max(n, min(len(s.cfg.Cluster.Nodes()), int(total/(minRowsToSpread/2))))
		}
	}
	return sc, plan.Split(p, n), total, nil
}
