package sqlsvc

// Tables made by bulk ingest. A SQL table has no coordinates, so an array
// created from an ingest's Arrow schema is sparse with one int64
// dimension, RowID, numbering the rows in the order ingested (0, 1, ...;
// later appends continue after the largest), and one attribute per column
// of the stream, nullable when the Arrow field is. Duplicates are allowed,
// so two appends racing for the same numbers both keep their rows.

import (
	"encoding/json"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	arr "github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/tileflight/tileflight/errkind"
	"github.com/tileflight/tileflight/format/datatype"
	"github.com/tileflight/tileflight/sqlsvc/tables"
)

// RowID is the dimension of arrays created by bulk ingest.
const RowID = "_rowid"

// rowIDMax is the largest row number (the domain's high bound).
const rowIDMax = 1<<62 - 1

// ingestType is the TileDB type (and var-sizedness) of an ingested Arrow
// column.
func ingestType(t arrow.DataType) (string, bool, error) {
	switch t.ID() {
	case arrow.BOOL:
		return "bool", false, nil
	case arrow.INT8:
		return "int8", false, nil
	case arrow.INT16:
		return "int16", false, nil
	case arrow.INT32:
		return "int32", false, nil
	case arrow.INT64:
		return "int64", false, nil
	case arrow.UINT8:
		return "uint8", false, nil
	case arrow.UINT16:
		return "uint16", false, nil
	case arrow.UINT32:
		return "uint32", false, nil
	case arrow.UINT64:
		return "uint64", false, nil
	case arrow.FLOAT32:
		return "float32", false, nil
	case arrow.FLOAT64:
		return "float64", false, nil
	case arrow.STRING, arrow.LARGE_STRING, arrow.STRING_VIEW:
		return "string_utf8", true, nil
	case arrow.BINARY, arrow.LARGE_BINARY, arrow.BINARY_VIEW:
		return "blob", true, nil
	case arrow.DATE32:
		return "datetime_day", false, nil
	case arrow.TIMESTAMP:
		switch t.(*arrow.TimestampType).Unit {
		case arrow.Second:
			return "datetime_sec", false, nil
		case arrow.Millisecond:
			return "datetime_ms", false, nil
		case arrow.Microsecond:
			return "datetime_us", false, nil
		}
		return "datetime_ns", false, nil
	}
	return "", false, fmt.Errorf("arrow type %s has no TileDB attribute type here", t)
}

// ingestSchema is the create_array body of the array an ingest of sc
// creates.
func ingestSchema(path string, sc *arrow.Schema) ([]byte, error) {
	if sc == nil || sc.NumFields() == 0 {
		return nil, errkind.Errorf(errkind.InvalidArgument, "bulk ingest into %q: the stream has no columns to make attributes of", path)
	}
	type attr struct {
		Name     string `json:"name"`
		Type     string `json:"type"`
		CellVal  any    `json:"cell_val_num"`
		Nullable bool   `json:"nullable"`
	}
	var attrs []attr
	for _, f := range sc.Fields() {
		if f.Name == RowID {
			return nil, errkind.Errorf(errkind.InvalidArgument, "bulk ingest into %q: column %q is the row number of arrays made by ingest; rename it", path, f.Name)
		}
		typ, isVar, err := ingestType(f.Type)
		if err != nil {
			return nil, errkind.Errorf(errkind.Unimplemented, "bulk ingest into %q: column %q: %v (supported: bool, integers, floats, strings, binary, date32, timestamps); create the array with create_array and ingest with mode=\"append\"", path, f.Name, err)
		}
		a := attr{Name: f.Name, Type: typ, CellVal: 1, Nullable: f.Nullable}
		if isVar {
			a.CellVal = "var"
		}
		attrs = append(attrs, a)
	}
	body := map[string]any{
		"array":             path,
		"type":              "sparse",
		"allows_duplicates": true,
		"capacity":          65536,
		"dimensions": []map[string]any{{
			"name": RowID, "type": "int64", "domain": []int64{0, rowIDMax}, "tile": 1 << 20,
			"filters": []map[string]any{{"name": "double_delta"}, {"name": "zstd"}},
		}},
		"attributes": attrs,
	}
	return json.Marshal(body)
}

// isRowIDArray says whether a is an array made by ingest (one int64
// dimension RowID, sparse) and the stream lacks RowID: its rows are then
// numbered on.
func isRowIDArray(a *tables.Array, sc *arrow.Schema) bool {
	if a == nil || a.B2ND || a.Dense || len(a.Dims) != 1 {
		return false
	}
	d := &a.Dims[0]
	if d.Name != RowID || d.Type != datatype.Int64 {
		return false
	}
	return len(sc.FieldIndices(RowID)) == 0
}

// nextRowID is the row number after the largest written.
func nextRowID(a *tables.Array) int64 {
	ned := a.NonEmpty
	if ned == nil {
		return 0
	}
	return ned[0].Hi.Int + 1
}

// rowIDSource numbers the rows of an ingest stream: each batch gets a
// RowID column.
type rowIDSource struct {
	in interface {
		Schema() *arrow.Schema
		Next() bool
		RecordBatch() arrow.RecordBatch
		Err() error
	}
	next int64
	mem  memory.Allocator
	cur  arrow.RecordBatch
	err  error
	sc   *arrow.Schema
}

func (r *rowIDSource) Schema() *arrow.Schema {
	if r.sc == nil {
		fs := append([]arrow.Field{{Name: RowID, Type: arrow.PrimitiveTypes.Int64}}, r.in.Schema().Fields()...)
		r.sc = arrow.NewSchema(fs, nil)
	}
	return r.sc
}

func (r *rowIDSource) Next() bool {
	if r.cur != nil {
		r.cur.Release()
		r.cur = nil
	}
	if r.err != nil || !r.in.Next() {
		return false
	}
	rec := r.in.RecordBatch()
	n := rec.NumRows()
	if r.next+n-1 > rowIDMax || r.next+n < r.next {
		r.err = errkind.Errorf(errkind.ResourceExhausted, "bulk ingest: more than 2^62 rows in one array")
		return false
	}
	b := arr.NewInt64Builder(r.mem)
	defer b.Release()
	b.Reserve(int(n))
	for i := int64(0); i < n; i++ {
		b.UnsafeAppend(r.next + i)
	}
	r.next += n
	ids := b.NewArray()
	defer ids.Release()
	cols := append([]arrow.Array{ids}, rec.Columns()...)
	r.cur = arr.NewRecordBatch(r.Schema(), cols, n)
	return true
}

func (r *rowIDSource) RecordBatch() arrow.RecordBatch { return r.cur }

func (r *rowIDSource) Err() error {
	if r.err != nil {
		return r.err
	}
	return r.in.Err()
}
