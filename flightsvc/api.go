package flightsvc

// This file is the service's API for the layers built over it (the Flight
// SQL server, through its engine adapter sqlsvc/native): the same limits,
// auth checks, error mapping, query engine and writer as the native
// protocol, so that a statement and a ticket behave alike.

import (
	"context"
	"encoding/json"

	"github.com/apache/arrow-go/v18/arrow"
	aflight "github.com/apache/arrow-go/v18/arrow/flight"

	"github.com/tileflight/tileflight/errkind"
	"github.com/tileflight/tileflight/query"
	"github.com/tileflight/tileflight/tdbarray"
)

// Status maps an error of any layer to the gRPC status a client sees.
func Status(err error) error { return toStatus(err) }

// AcquireStream takes one of the -max-queries slots.
func (s *Service) AcquireStream(ctx context.Context) (release func(), err error) {
	return s.acquireStream(ctx)
}

// RequireWrite refuses a mutation to a caller with a read-only token.
func RequireWrite(ctx context.Context, what string) error { return requireWrite(ctx, what) }

// NoteCall records, for the access log, the array a call is about and the
// rows and bytes it moved.
func NoteCall(ctx context.Context, arrayName string, rows, bytes int64) {
	ci := callInfo(ctx)
	if arrayName != "" {
		ci.SetArray(arrayName)
	}
	ci.AddRows(rows)
	ci.AddBytes(bytes)
}

// RecordBytes is the size of a record's buffers.
func RecordBytes(rec arrow.RecordBatch) int64 { return recordBytes(rec) }

// BatchStream is one query's result as the reader produces it.
type BatchStream interface {
	Schema() *arrow.Schema
	// Next returns the next batch (the caller releases it), io.EOF at the end.
	Next(ctx context.Context) (arrow.RecordBatch, error)
	Close() error
}

// OpenQuery starts reading q, as DoGet of q's ticket would.
func (s *Service) OpenQuery(ctx context.Context, q *query.Query) (BatchStream, error) {
	return s.openStream(ctx, q)
}

// PartitionQuery splits q into the disjoint queries that GetFlightInfo
// would give its endpoints (one per part of the result, more in a
// cluster), and says whether their results concatenate in q's order.
func (s *Service) PartitionQuery(ctx context.Context, q *query.Query) (parts []*query.Query, ordered bool, err error) {
	_, parts, _, err = s.partition(ctx, q)
	return parts, orderedParts(q), err
}

// AssignLocations gives endpoints the cluster's nodes as locations, as
// GetFlightInfo does (the preferred node first); outside a cluster it
// leaves them without, meaning "this server".
func (s *Service) AssignLocations(eps []*aflight.FlightEndpoint) {
	if s.cfg.Cluster != nil {
		s.cfg.Cluster.assign(eps)
	}
}

// QuerySchema is the Arrow schema DoGet would stream for q.
func (s *Service) QuerySchema(ctx context.Context, q *query.Query) (*arrow.Schema, error) {
	return s.resultSchema(ctx, q)
}

// ArrayEntry is an array under the data directory.
type ArrayEntry struct {
	Name string
	// B2ND is a Blosc2 NDArray file.
	B2ND bool
}

// ListArrays lists the arrays whose name starts with prefix, by name.
func (s *Service) ListArrays(ctx context.Context, prefix string) ([]ArrayEntry, error) {
	es, err := s.listArrays(ctx, prefix)
	if err != nil {
		return nil, err
	}
	out := make([]ArrayEntry, len(es))
	for i, e := range es {
		out[i] = ArrayEntry(e)
	}
	return out, nil
}

// OpenArray opens an array now and returns it with the Arrow schema of
// all its columns (dimensions, then attributes).
func (s *Service) OpenArray(ctx context.Context, name string) (*tdbarray.Array, *arrow.Schema, error) {
	return s.querySchema(ctx, &query.Query{Array: name, Limit: -1})
}

// WriteResult is what a write made.
type WriteResult struct {
	Fragments []string
	Rows      int64
}

// Write writes rdr's rows into q's array as one atomic write, as DoPut of
// a descriptor holding q would (q: array, subarray, timestamp, layout).
// The caller holds a stream slot and has checked write access.
func (s *Service) Write(ctx context.Context, q *query.Query, rdr RecordSource) (*WriteResult, error) {
	if q == nil {
		return nil, errkind.Errorf(errkind.InvalidArgument, "write: no target array")
	}
	res, err := s.write(ctx, q, rdr)
	if err != nil {
		return nil, err
	}
	return &WriteResult{Fragments: res.Fragments, Rows: res.Rows}, nil
}

// CreateArray creates an array as the create_array action does (body: the
// schema JSON with "array"), for bulk ingest's mode "create".
func (s *Service) CreateArray(ctx context.Context, body []byte) error {
	_, err := s.actCreate(ctx, body)
	return err
}

// DropArray deletes an array as the drop_array action does (bulk ingest
// removes an array it created when the write into it fails).
func (s *Service) DropArray(ctx context.Context, name string) error {
	b, err := json.Marshal(map[string]string{"array": name})
	if err != nil {
		return err
	}
	_, err = s.actDrop(ctx, b)
	return err
}
