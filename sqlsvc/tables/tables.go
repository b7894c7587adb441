// Package tables is the array engine as the Flight SQL layer (package
// sqlsvc) sees it: the Engine interface sqlsvc is written against and the
// values it trades in, in the SQL layer's terms (arrays as tables, scans
// as record streams, writes of record streams). It imports no engine
// package, so that sqlsvc does not either; package sqlsvc/native
// implements Engine over the native service.
//
// The interface lives in its own package rather than in sqlsvc itself so
// that sqlsvc's tests can build a server over the real engine
// (sqlsvc/native imports this package, which sqlsvc's in-package tests
// could not import were the interface in sqlsvc).
//
// Two value types of lower layers are kept, both plain values without I/O:
// query.Query (a scan is the native protocol's query, so that a statement
// that is a plain scan can hand its parts out as tickets) and
// datatype.Datatype (which dimensions take ranges, datetime units, what
// an INSERT may write are questions of the TileDB type).
package tables

import (
	"context"

	"github.com/apache/arrow-go/v18/arrow"
	aflight "github.com/apache/arrow-go/v18/arrow/flight"

	"github.com/tileflight/tileflight/format/datatype"
	"github.com/tileflight/tileflight/query"
)

// Engine is what the SQL layer needs of the engine: the arrays, their
// scans and writes, and the service's limits, access checks, error
// mapping and access log, so that a statement and a native call behave
// alike.
type Engine interface {
	// ListArrays lists the arrays whose path starts with prefix, by path.
	ListArrays(ctx context.Context, prefix string) ([]Entry, error)
	// Describe opens an array now and describes it (errkind NotFound
	// when there is none).
	Describe(ctx context.Context, path string) (*Array, error)

	// ResultSchema is the Arrow schema Scan(q) streams.
	ResultSchema(ctx context.Context, q *query.Query) (*arrow.Schema, error)
	// Scan starts reading q's result, as a DoGet of q's ticket would.
	Scan(ctx context.Context, q *query.Query) (RecordStream, error)
	// Partition splits q into the disjoint queries that GetFlightInfo
	// would give its endpoints, and says whether their results
	// concatenate in q's order.
	Partition(ctx context.Context, q *query.Query) (parts []*query.Query, ordered bool, err error)
	// AssignLocations gives endpoints the cluster's nodes as locations
	// (the preferred first), as GetFlightInfo does; outside a cluster it
	// leaves them without (this server).
	AssignLocations(eps []*aflight.FlightEndpoint)

	// Write writes src's rows into the array at path as one atomic write,
	// as a DoPut with a PATH descriptor would, and says how many rows it
	// wrote. The caller holds a stream slot and has checked write access.
	Write(ctx context.Context, path string, src RecordSource) (rows int64, err error)
	// CreateArray creates an array as the create_array action does
	// (body: the schema JSON with "array").
	CreateArray(ctx context.Context, body []byte) error
	// DropArray deletes an array as the drop_array action does.
	DropArray(ctx context.Context, path string) error

	// AcquireStream takes one of the service's concurrent stream slots
	// (-max-queries), or says why not.
	AcquireStream(ctx context.Context) (release func(), err error)
	// RequireWrite refuses a mutation to a caller with a read-only token.
	RequireWrite(ctx context.Context, what string) error
	// Status maps an error of any layer to the gRPC status a client sees.
	Status(err error) error
	// NoteCall records, for the access log, the array a call is about
	// ("": leave it) and the rows and bytes it moved.
	NoteCall(ctx context.Context, array string, rows, bytes int64)
	// RecordBytes is the size of a record's buffers, as the access log
	// counts them.
	RecordBytes(rec arrow.RecordBatch) int64
}

// Entry is an array under the data directory.
type Entry struct {
	Path string
	// B2ND is a Blosc2 NDArray file.
	B2ND bool
}

// RecordStream is one scan's result.
type RecordStream interface {
	Schema() *arrow.Schema
	// Next returns the next record (the caller releases it), io.EOF at
	// the end.
	Next(ctx context.Context) (arrow.RecordBatch, error)
	Close() error
}

// RecordSource is a stream of records to write (a Flight MessageReader is
// one). An error of Err that carries an errkind keeps its kind.
type RecordSource interface {
	Schema() *arrow.Schema
	Next() bool
	RecordBatch() arrow.RecordBatch
	Err() error
}

// Array is what the SQL layer knows of one array, as opened at one time.
type Array struct {
	Path string
	// Arrow is the Arrow schema of every column, dimensions then
	// attributes (docs/protocol.md, "Arrow type mapping").
	Arrow *arrow.Schema
	Dense bool
	// B2ND is a Blosc2 NDArray file.
	B2ND  bool
	Dims  []Column
	Attrs []Column
	// NonEmpty bounds the written cells, one range per dimension (nil:
	// nothing written; a .b2nd: its whole domain).
	NonEmpty []Range
	// Fragments are the visible fragments, oldest first.
	Fragments []Fragment
	// CheckFilter says whether a scan can evaluate a condition (the
	// native query's "filter") against this array: nil when it compiles.
	CheckFilter func(filter string) error
}

// Column is one dimension or attribute.
type Column struct {
	Name string
	Type datatype.Datatype
	// CellValNum is the number of values per cell (Var: variable).
	CellValNum uint32
	Var        bool
	Nullable   bool
	// Enumeration names the enumeration an attribute's values index (""
	// for none); Enumerated says its values were found, so that an
	// INSERT gives them as strings.
	Enumeration string
	Enumerated  bool
	// Domain is a fixed-size dimension's domain.
	Domain Range
}

// Range is an inclusive range of a fixed-size dimension.
type Range struct{ Lo, Hi Bound }

// Bound is one end of a range, read as each of the three number types
// from the dimension's type (a float read as int64 truncates; a signed
// value read as uint64 wraps).
type Bound struct {
	Int   int64
	Uint  uint64
	Float float64
}

// Fragment is one fragment of an array.
type Fragment struct {
	// NonEmpty bounds the fragment's cells, one range per dimension.
	NonEmpty []Range
	// Cells is the fragment's cell count, when CellsKnown.
	Cells      uint64
	CellsKnown bool
}

// DimIndex is the index of the dimension named name, -1 when none.
func (a *Array) DimIndex(name string) int {
	for i := range a.Dims {
		if a.Dims[i].Name == name {
			return i
		}
	}
	return -1
}

// AttrIndex is the index of the attribute named name, -1 when none.
func (a *Array) AttrIndex(name string) int {
	for i := range a.Attrs {
		if a.Attrs[i].Name == name {
			return i
		}
	}
	return -1
}

// Column finds a dimension or attribute by name.
func (a *Array) Column(name string) (Column, bool) {
	if i := a.DimIndex(name); i >= 0 {
		return a.Dims[i], true
	}
	if i := a.AttrIndex(name); i >= 0 {
		return a.Attrs[i], true
	}
	return Column{}, false
}
