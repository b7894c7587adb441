// Package plan owns a query resolved against an opened array: the output
// columns as fields of the array's schema, the subarray as typed ranges per
// dimension, and the effective layout, limit and batch size. Resolution
// (query JSON -> Plan) checks names, types and domains and produces
// InvalidArgument errors that say what to fix; the read paths (dense in
// package reader/dense, sparse in package reader/sparse, .b2nd in
// reader/ndarray) consume a Plan. It also splits a plan into disjoint
// queries (GetFlightInfo endpoints) and estimates result sizes.
package plan

import (
	"github.com/tileflight/tileflight/query"
	"github.com/tileflight/tileflight/query/cond"
	"github.com/tileflight/tileflight/tdbarray"
)

// Range is one inclusive range of one dimension. For fixed-size dimensions
// Lo and Hi are one little-endian value of the dimension's datatype each;
// for var-sized (string) dimensions they are the strings' bytes.
type Range struct {
	Lo, Hi []byte
}

// Subarray holds, for every dimension in schema order, the ranges to read
// in the order the query gave them (never empty: a dimension the query left
// out spans the array's non-empty domain; see Plan.Empty for arrays with
// no non-empty domain).
type Subarray [][]Range

// Plan is a query resolved against an opened array.
type Plan struct {
	Array *tdbarray.Array
	// Columns are the output fields by name, in output order (dimensions
	// and/or attributes of Array.Schema).
	Columns []string
	// Subarray is the typed subarray.
	Subarray Subarray
	// Layout is the effective layout (never query.LayoutDefault).
	Layout query.Layout
	// BatchRows is the most rows in one record batch.
	BatchRows int
	// Limit is the most rows in the result; -1 means no limit.
	Limit int64

	// Query is the query the plan was resolved from.
	Query *query.Query
	// Empty is set when the result is known to be empty without reading:
	// the query left a dimension out and no visible fragment has a
	// non-empty domain (the ranges of such dimensions then hold the
	// schema's domain, or an empty string range for string dimensions).
	Empty bool
	// Given[d] tells whether the query named dimension d (false: its
	// ranges come from the non-empty domain).
	Given []bool
	// Cond is the query's filter bound to the schema, nil without one.
	Cond *cond.Cond
}
