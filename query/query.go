// Package query owns the query of docs/protocol.md, "Queries, tickets and descriptors": the JSON object that
// Flight tickets, CMD descriptors and DoPut descriptors carry. It parses
// and validates the JSON strictly (a hand-written ticket with a typo is an
// InvalidArgument error, not a silently ignored key) and renders queries
// back to JSON for the tickets that GetFlightInfo hands out. Resolving
// names and ranges against an array's schema is the reader's job.
package query

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"unicode/utf8"

	"github.com/tileflight/tileflight/errkind"
	"github.com/tileflight/tileflight/query/cond"
)

// Layout is the order of the result cells.
type Layout string

// The layouts of docs/protocol.md, "Queries, tickets and descriptors". LayoutDefault lets the reader choose
// (dense: row-major, sparse: unordered).
const (
	LayoutDefault   Layout = ""
	LayoutRowMajor  Layout = "row-major"
	LayoutColMajor  Layout = "col-major"
	LayoutGlobal    Layout = "global"
	LayoutUnordered Layout = "unordered"
)

// Limits that keep a hostile query from asking for unbounded work.
const (
	DefaultBatchRows = 65536
	MaxBatchRows     = 1 << 24
	MaxPartitions    = 1024
	MaxRanges        = 1 << 16 // per dimension
	MaxQueryBytes    = 1 << 20
)

// Value is one bound of a range: a number (kept as its JSON text so that
// int64 and uint64 bounds keep full precision) or a string.
type Value struct {
	Num   json.Number
	Str   string
	IsStr bool
}

// Range is an inclusive [Lo, Hi] range on one dimension.
type Range struct {
	Lo, Hi Value
}

// DimRanges are the ranges given for one dimension, in the order given.
type DimRanges struct {
	Dim    string
	Ranges []Range
}

// Timestamp is an inclusive range of milliseconds since the epoch.
type Timestamp struct {
	Start, End uint64
}

// Query is a parsed, syntactically valid query.
type Query struct {
	Array   string
	Columns []string // nil = all, in schema order
	// Subarray holds the dimensions the query restricts, in the order they
	// appear in the JSON object.
	Subarray  []DimRanges
	Layout    Layout
	Timestamp *Timestamp // nil = now
	BatchRows int        // 0 = DefaultBatchRows
	Limit     int64      // -1 = no limit
	// Partitions is only meaningful to GetFlightInfo (0 = server's choice).
	Partitions int
	// Filter is a condition in TileDB-Py's QueryCondition syntax
	// (package query/cond parses it; the reader binds it to the schema).
	Filter string
	// Aggregates, when not nil, asks for one row of aggregates instead of
	// cells, in the order the JSON object gave them.
	Aggregates []Aggregate
	// Stage is only meaningful to DoPut: write the fragments without
	// committing them (docs/protocol.md, "Array lifecycle", staged writes).
	Stage bool
	// Compression is CompressionZstd when the client accepts record
	// batch bodies compressed with zstd (Arrow IPC body compression), ""
	// otherwise: the server then sends tiles stored with zstd alone as
	// they are, without decompressing them.
	Compression string
	// DropFailing is not a JSON key: the Flight SQL layer sets it so that
	// a dense read with a filter returns only the cells that pass (as a
	// sparse read does) instead of TileDB's fill values for the others,
	// which a SQL WHERE must not see.
	DropFailing bool
}

// Aggregate is one aggregate of the `aggregates` key: Op over Field
// ("*" for count(*)).
type Aggregate struct {
	Field string
	Op    string
}

// Column is the name of the aggregate's result column, e.g. "sum(v)".
func (a Aggregate) Column() string { return a.Op + "(" + a.Field + ")" }

// The aggregate operations (TileDB-Py's query().agg() names).
var AggregateOps = []string{"sum", "min", "max", "mean", "count", "null_count"}

type rawQuery struct {
	Array       *string         `json:"array"`
	Columns     []string        `json:"columns"`
	Subarray    json.RawMessage `json:"subarray"`
	Layout      *string         `json:"layout"`
	Timestamp   json.RawMessage `json:"timestamp"`
	BatchRows   *int64          `json:"batch_rows"`
	Limit       *int64          `json:"limit"`
	Partitions  *int64          `json:"partitions"`
	Filter      *string         `json:"filter"`
	Aggregates  json.RawMessage `json:"aggregates"`
	Stage       *bool           `json:"stage"`
	Compression *string         `json:"compression"`
}

func invalid(format string, args ...any) error {
	return errkind.Errorf(errkind.InvalidArgument, "query: "+format, args...)
}

// Parse decodes and validates a query.
func Parse(b []byte) (*Query, error) {
	if len(b) > MaxQueryBytes {
		return nil, invalid("%d bytes is more than the %d a query may have", len(b), MaxQueryBytes)
	}
	if !utf8.Valid(b) {
		return nil, invalid("not valid UTF-8")
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	dec.UseNumber()
	var raw rawQuery
	if err := dec.Decode(&raw); err != nil {
		return nil, invalid("bad JSON: %v", err)
	}
	if dec.More() {
		return nil, invalid("trailing data after the JSON object")
	}
	q := &Query{Limit: -1}
	if raw.Array == nil {
		return nil, invalid(`"array" is required`)
	}
	if err := ValidateArrayName(*raw.Array); err != nil {
		return nil, err
	}
	q.Array = *raw.Array
	if raw.Columns != nil {
		seen := map[string]bool{}
		for _, c := range raw.Columns {
			if c == "" || strings.ContainsRune(c, 0) {
				return nil, invalid("array %q: empty or NUL column name", q.Array)
			}
			if seen[c] {
				return nil, invalid("array %q: column %q listed twice", q.Array, c)
			}
			seen[c] = true
		}
		q.Columns = raw.Columns
	}
	if len(raw.Subarray) > 0 && string(raw.Subarray) != "null" {
		sub, err := parseSubarray(raw.Subarray)
		if err != nil {
			return nil, fmt.Errorf("array %q: %w", q.Array, err)
		}
		q.Subarray = sub
	}
	if raw.Layout != nil {
		switch l := Layout(*raw.Layout); l {
		case LayoutRowMajor, LayoutColMajor, LayoutGlobal, LayoutUnordered:
			q.Layout = l
		default:
			return nil, invalid("array %q: layout %q is not one of row-major, col-major, global, unordered", q.Array, *raw.Layout)
		}
	}
	if len(raw.Timestamp) > 0 && string(raw.Timestamp) != "null" {
		ts, err := parseTimestamp(raw.Timestamp)
		if err != nil {
			return nil, fmt.Errorf("array %q: %w", q.Array, err)
		}
		q.Timestamp = ts
	}
	if raw.BatchRows != nil {
		if *raw.BatchRows < 1 || *raw.BatchRows > MaxBatchRows {
			return nil, invalid("array %q: batch_rows %d is outside [1, %d]", q.Array, *raw.BatchRows, MaxBatchRows)
		}
		q.BatchRows = int(*raw.BatchRows)
	}
	if raw.Limit != nil {
		if *raw.Limit < 0 {
			return nil, invalid("array %q: limit %d is negative", q.Array, *raw.Limit)
		}
		q.Limit = *raw.Limit
	}
	if raw.Partitions != nil {
		if *raw.Partitions < 1 || *raw.Partitions > MaxPartitions {
			return nil, invalid("array %q: partitions %d is outside [1, %d]", q.Array, *raw.Partitions, MaxPartitions)
		}
		q.Partitions = int(*raw.Partitions)
	}
	if raw.Filter != nil {
		if strings.TrimSpace(*raw.Filter) == "" {
			return nil, invalid("array %q: filter is empty (leave the key out for no condition)", q.Array)
		}
		if _, err := cond.Parse(*raw.Filter); err != nil {
			return nil, fmt.Errorf("array %q: %w", q.Array, err)
		}
		q.Filter = *raw.Filter
	}
	if len(raw.Aggregates) > 0 && string(raw.Aggregates) != "null" {
		aggs, err := parseAggregates(raw.Aggregates)
		if err != nil {
			return nil, fmt.Errorf("array %q: %w", q.Array, err)
		}
		q.Aggregates = aggs
	}
	if raw.Stage != nil {
		q.Stage = *raw.Stage
	}
	if raw.Compression != nil {
		switch *raw.Compression {
		case "none":
		case CompressionZstd:
			q.Compression = CompressionZstd
		default:
			return nil, invalid("array %q: compression %q is not one of none, zstd", q.Array, *raw.Compression)
		}
	}
	return q, nil
}

// CompressionZstd is the value of the compression key that asks for
// zstd-compressed record batch bodies.
const CompressionZstd = "zstd"

func parseAggregates(b json.RawMessage) ([]Aggregate, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	tok, err := dec.Token()
	if err != nil || tok != json.Delim('{') {
		return nil, invalid(`"aggregates" must be an object of field name -> list of operations, e.g. {"v": ["sum", "max"], "*": ["count"]}`)
	}
	out := []Aggregate{}
	seen := map[Aggregate]bool{}
	fields := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, invalid("aggregates: %v", err)
		}
		field := tok.(string)
		if field == "" || strings.ContainsRune(field, 0) {
			return nil, invalid("aggregates: empty or NUL field name")
		}
		if fields[field] {
			return nil, invalid("aggregates: field %q given twice", field)
		}
		fields[field] = true
		var ops []string
		if err := dec.Decode(&ops); err != nil {
			return nil, invalid("aggregates: field %q: want a list of operations: %v", field, err)
		}
		if len(ops) == 0 {
			return nil, invalid("aggregates: field %q: empty list of operations", field)
		}
		for _, op := range ops {
			known := false
			for _, k := range AggregateOps {
				known = known || k == op
			}
			if !known {
				return nil, invalid("aggregates: field %q: unknown operation %q (want one of %s)", field, op, strings.Join(AggregateOps, ", "))
			}
			if field == "*" && op != "count" {
				return nil, invalid("aggregates: \"*\" takes only \"count\", not %q", op)
			}
			a := Aggregate{Field: field, Op: op}
			if seen[a] {
				return nil, invalid("aggregates: %s asked twice", a.Column())
			}
			seen[a] = true
			out = append(out, a)
		}
		if len(out) > 1024 {
			return nil, invalid("aggregates: more than 1024")
		}
	}
	if len(out) == 0 {
		return nil, invalid("aggregates: no aggregate asked (leave the key out for cells)")
	}
	return out, nil
}

func parseSubarray(b json.RawMessage) ([]DimRanges, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil || tok != json.Delim('{') {
		return nil, invalid(`"subarray" must be an object of dimension name -> list of [lo, hi]`)
	}
	var out []DimRanges
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, invalid("subarray: %v", err)
		}
		dim := tok.(string)
		if seen[dim] {
			return nil, invalid("subarray: dimension %q given twice", dim)
		}
		seen[dim] = true
		var pairs []json.RawMessage
		if err := dec.Decode(&pairs); err != nil {
			return nil, invalid("subarray: dimension %q: want a list of [lo, hi] ranges: %v", dim, err)
		}
		if len(pairs) == 0 {
			return nil, invalid("subarray: dimension %q: empty list of ranges", dim)
		}
		if len(pairs) > MaxRanges {
			return nil, invalid("subarray: dimension %q: %d ranges, at most %d", dim, len(pairs), MaxRanges)
		}
		dr := DimRanges{Dim: dim, Ranges: make([]Range, 0, len(pairs))}
		for i, p := range pairs {
			r, err := parseRange(p)
			if err != nil {
				return nil, invalid("subarray: dimension %q: range %d: %v", dim, i, err)
			}
			dr.Ranges = append(dr.Ranges, r)
		}
		out = append(out, dr)
	}
	return out, nil
}

func parseRange(b json.RawMessage) (Range, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var vals []any
	if err := dec.Decode(&vals); err != nil || len(vals) != 2 {
		return Range{}, fmt.Errorf("want [lo, hi], got %s", truncate(string(b)))
	}
	var r Range
	for i, v := range vals {
		var val Value
		switch x := v.(type) {
		case json.Number:
			val.Num = x
		case string:
			val.Str, val.IsStr = x, true
		default:
			return Range{}, fmt.Errorf("bounds must be numbers or strings, got %s", truncate(string(b)))
		}
		if i == 0 {
			r.Lo = val
		} else {
			r.Hi = val
		}
	}
	if r.Lo.IsStr != r.Hi.IsStr {
		return Range{}, fmt.Errorf("bounds mix a number and a string")
	}
	return r, nil
}

func parseTimestamp(b json.RawMessage) (*Timestamp, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, invalid("timestamp: %v", err)
	}
	toMs := func(x any) (uint64, error) {
		n, ok := x.(json.Number)
		if !ok {
			return 0, invalid("timestamp: want milliseconds since the epoch, got %v", x)
		}
		i, err := n.Int64()
		if err != nil || i < 0 {
			if f, ferr := n.Float64(); ferr == nil && f >= 0 && f == math.Trunc(f) && f < 1<<63 {
				return uint64(f), nil
			}
			return 0, invalid("timestamp: %s is not a non-negative integer number of milliseconds", n)
		}
		return uint64(i), nil
	}
	switch x := v.(type) {
	case json.Number:
		t, err := toMs(x)
		if err != nil {
			return nil, err
		}
		return &Timestamp{Start: 0, End: t}, nil
	case []any:
		if len(x) != 2 {
			return nil, invalid("timestamp: want t or [start, end]")
		}
		s, err := toMs(x[0])
		if err != nil {
			return nil, err
		}
		e, err := toMs(x[1])
		if err != nil {
			return nil, err
		}
		if s > e {
			return nil, invalid("timestamp: start %d is after end %d", s, e)
		}
		return &Timestamp{Start: s, End: e}, nil
	}
	return nil, invalid("timestamp: want t or [start, end]")
}

func truncate(s string) string {
	if len(s) > 80 {
		return s[:80] + "..."
	}
	return s
}

// ValidateArrayName checks an array name against docs/protocol.md, "Queries, tickets and descriptors": segments of
// [A-Za-z0-9._-] joined by "/", none empty, "." or "..", none starting
// with "__".
func ValidateArrayName(name string) error {
	if name == "" {
		return errkind.Errorf(errkind.InvalidArgument, "array name is empty")
	}
	if len(name) > 1024 {
		return errkind.Errorf(errkind.InvalidArgument, "array name is longer than 1024 bytes")
	}
	for _, seg := range strings.Split(name, "/") {
		switch {
		case seg == "":
			return errkind.Errorf(errkind.InvalidArgument, "array name %q: empty segment (absolute paths and \"//\" are refused)", name)
		case seg == "." || seg == "..":
			return errkind.Errorf(errkind.InvalidArgument, "array name %q: %q segments are refused", name, seg)
		case strings.HasPrefix(seg, "__"):
			return errkind.Errorf(errkind.InvalidArgument, "array name %q: segment %q starts with \"__\", which TileDB reserves", name, seg)
		}
		for _, c := range seg {
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
				return errkind.Errorf(errkind.InvalidArgument, "array name %q: character %q is not allowed (use A-Z a-z 0-9 . _ -)", name, c)
			}
		}
	}
	return nil
}

// MarshalJSON renders the query in the canonical ticket form.
func (q *Query) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteString(`{"array":`)
	writeJSON(&b, q.Array)
	if q.Columns != nil {
		b.WriteString(`,"columns":`)
		writeJSON(&b, q.Columns)
	}
	if len(q.Subarray) > 0 {
		b.WriteString(`,"subarray":{`)
		for i, d := range q.Subarray {
			if i > 0 {
				b.WriteByte(',')
			}
			writeJSON(&b, d.Dim)
			b.WriteString(":[")
			for j, r := range d.Ranges {
				if j > 0 {
					b.WriteByte(',')
				}
				b.WriteByte('[')
				r.Lo.write(&b)
				b.WriteByte(',')
				r.Hi.write(&b)
				b.WriteByte(']')
			}
			b.WriteByte(']')
		}
		b.WriteByte('}')
	}
	if q.Layout != LayoutDefault {
		b.WriteString(`,"layout":`)
		writeJSON(&b, string(q.Layout))
	}
	if q.Timestamp != nil {
		fmt.Fprintf(&b, `,"timestamp":[%d,%d]`, q.Timestamp.Start, q.Timestamp.End)
	}
	if q.BatchRows > 0 {
		fmt.Fprintf(&b, `,"batch_rows":%d`, q.BatchRows)
	}
	if q.Limit >= 0 {
		fmt.Fprintf(&b, `,"limit":%d`, q.Limit)
	}
	if q.Partitions > 0 {
		fmt.Fprintf(&b, `,"partitions":%d`, q.Partitions)
	}
	if q.Filter != "" {
		b.WriteString(`,"filter":`)
		writeJSON(&b, q.Filter)
	}
	if q.Aggregates != nil {
		b.WriteString(`,"aggregates":{`)
		// Parse keeps each field's operations together (a field key may
		// appear once), so consecutive entries of one field share a key.
		for i, a := range q.Aggregates {
			switch {
			case i == 0:
			case q.Aggregates[i-1].Field == a.Field:
				b.WriteByte(',')
				writeJSON(&b, a.Op)
				continue
			default:
				b.WriteString("],")
			}
			writeJSON(&b, a.Field)
			b.WriteString(":[")
			writeJSON(&b, a.Op)
		}
		b.WriteString("]")
		b.WriteByte('}')
	}
	if q.Stage {
		b.WriteString(`,"stage":true`)
	}
	if q.Compression != "" {
		b.WriteString(`,"compression":`)
		writeJSON(&b, q.Compression)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

func (v Value) write(b *bytes.Buffer) {
	if v.IsStr {
		writeJSON(b, v.Str)
		return
	}
	b.WriteString(string(v.Num))
}

func writeJSON(b *bytes.Buffer, v any) {
	enc, _ := json.Marshal(v)
	b.Write(enc)
}
