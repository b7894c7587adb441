package sparse

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	arrowarray "github.com/apache/arrow-go/v18/arrow/array"

	"github.com/tileflight/tileflight/arrowconv"
	"github.com/tileflight/tileflight/format/datatype"
	"github.com/tileflight/tileflight/format/schema"
	"github.com/tileflight/tileflight/internal/fixtures"
	"github.com/tileflight/tileflight/query"
	"github.com/tileflight/tileflight/reader/plan"
	"github.com/tileflight/tileflight/reader/tileio"
	"github.com/tileflight/tileflight/storage"
	"github.com/tileflight/tileflight/tdbarray"
)

// openArray opens the array in dir at [0, end] (end 0: now).
func openArray(t testing.TB, dir string, end uint64, key string) *tdbarray.Array {
	t.Helper()
	st, err := storage.NewLocal(filepath.Dir(dir))
	if err != nil {
		t.Fatal(err)
	}
	opt := tdbarray.Options{End: end}
	if key != "" {
		opt.EncryptionKey = []byte(key)
	}
	a, err := tdbarray.Open(context.Background(), st, filepath.Base(dir), opt)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// fieldsOf builds the Arrow-facing fields of columns the way the reader
// package does (enumerated attributes stay plain indexes here).
func fieldsOf(t testing.TB, s *schema.ArraySchema, cols []string) []arrowconv.Field {
	t.Helper()
	var out []arrowconv.Field
	for _, c := range cols {
		f, ok := s.FieldByName(c)
		if !ok {
			t.Fatalf("no field %q", c)
		}
		role := arrowconv.Attribute
		if f.Dimension {
			role = arrowconv.Dimension
		}
		out = append(out, arrowconv.Field{Name: f.Name, Type: f.Type, CellValNum: f.CellValNum, Nullable: f.Nullable, Role: role})
	}
	return out
}

// valueBytes encodes one JSON value of a dimension as plan.Range bytes.
func valueBytes(d *schema.Dimension, v fixtures.Value) ([]byte, error) {
	if d.IsVar() {
		s, ok := v.(string)
		if !ok {
			return nil, fmt.Errorf("dimension %s: %v is not a string", d.Name, v)
		}
		return []byte(s), nil
	}
	b := make([]byte, d.Type.Size())
	switch {
	case d.Type.IsFloat():
		f, err := fixtures.Float(v)
		if err != nil {
			return nil, err
		}
		if d.Type == datatype.Float32 {
			binary.LittleEndian.PutUint32(b, math.Float32bits(float32(f)))
		} else {
			binary.LittleEndian.PutUint64(b, math.Float64bits(f))
		}
	case d.Type == datatype.Uint64:
		u, err := fixtures.Uint(v)
		if err != nil {
			return nil, err
		}
		binary.LittleEndian.PutUint64(b, u)
	default:
		i, err := fixtures.Int(v)
		if err != nil {
			return nil, err
		}
		for k := range b {
			b[k] = byte(uint64(i) >> (8 * k))
		}
	}
	return b, nil
}

// subarrayOf turns a read's subarray into typed ranges; a dimension left
// out spans the union of the fragments' non-empty domains.
func subarrayOf(t testing.TB, a *tdbarray.Array, sub map[string][][]fixtures.Value) plan.Subarray {
	t.Helper()
	s := a.Schema
	out := make(plan.Subarray, len(s.Dimensions))
	for i := range s.Dimensions {
		d := &s.Dimensions[i]
		if rs, ok := sub[d.Name]; ok {
			for _, r := range rs {
				lo, err := valueBytes(d, r[0])
				if err != nil {
					t.Fatal(err)
				}
				hi, err := valueBytes(d, r[1])
				if err != nil {
					t.Fatal(err)
				}
				out[i] = append(out[i], plan.Range{Lo: lo, Hi: hi})
			}
			continue
		}
		out[i] = []plan.Range{nonEmptyUnion(a, i)}
	}
	return out
}

func nonEmptyUnion(a *tdbarray.Array, i int) plan.Range {
	d := &a.Schema.Dimensions[i]
	di := newDimInfo(i, d, nil)
	var r plan.Range
	for _, f := range a.Fragments {
		ned := f.NonEmptyDomain()
		if len(ned) <= i {
			continue
		}
		if r.Lo == nil || di.compare(ned[i].Start, r.Lo) < 0 {
			r.Lo = ned[i].Start
		}
		if r.Hi == nil || di.compare(ned[i].End, r.Hi) > 0 {
			r.Hi = ned[i].End
		}
	}
	if r.Lo == nil {
		// No fragment: any range works; use the domain.
		if d.IsVar() {
			return plan.Range{Lo: []byte{}, Hi: []byte{0x7f}}
		}
		return plan.Range{Lo: d.Lo(), Hi: d.Hi()}
	}
	return r
}

// readAll runs a plan to the end, checking batch sizes, and returns the
// records.
func readAll(t testing.TB, p *plan.Plan, fields []arrowconv.Field, budget int64) []arrow.RecordBatch {
	t.Helper()
	ctx := context.Background()
	ld := tileio.NewLoader(p.Array, tileio.Options{MemoryBudget: budget})
	r, err := NewReader(ctx, Input{Plan: p, Loader: ld, Fields: fields})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var recs []arrow.RecordBatch
	for {
		rec, err := r.Next(ctx)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if rec.NumRows() > int64(p.BatchRows) || rec.NumRows() == 0 {
			t.Fatalf("batch of %d rows (batch rows %d)", rec.NumRows(), p.BatchRows)
		}
		recs = append(recs, rec)
	}
	return recs
}

// rowsOf renders records as one canonical string per cell per column.
func rowsOf(t testing.TB, recs []arrow.RecordBatch) [][]string {
	t.Helper()
	var cols [][]string
	for _, rec := range recs {
		if cols == nil {
			cols = make([][]string, rec.NumCols())
		}
		for c := 0; c < int(rec.NumCols()); c++ {
			col := rec.Column(c)
			for i := 0; i < col.Len(); i++ {
				cols[c] = append(cols[c], arrowCell(t, col, i))
			}
		}
	}
	return cols
}

func fmtFloat(f float64) string {
	if f != f {
		return "NaN"
	}
	return strconv.FormatFloat(f, 'g', -1, 64)
}

func arrowCell(t testing.TB, col arrow.Array, i int) string {
	if col.IsNull(i) {
		return "null"
	}
	switch a := col.(type) {
	case *arrowarray.Int8:
		return strconv.FormatInt(int64(a.Value(i)), 10)
	case *arrowarray.Int16:
		return strconv.FormatInt(int64(a.Value(i)), 10)
	case *arrowarray.Int32:
		return strconv.FormatInt(int64(a.Value(i)), 10)
	case *arrowarray.Int64:
		return strconv.FormatInt(a.Value(i), 10)
	case *arrowarray.Uint8:
		return strconv.FormatUint(uint64(a.Value(i)), 10)
	case *arrowarray.Uint16:
		return strconv.FormatUint(uint64(a.Value(i)), 10)
	case *arrowarray.Uint32:
		return strconv.FormatUint(uint64(a.Value(i)), 10)
	case *arrowarray.Uint64:
		return strconv.FormatUint(a.Value(i), 10)
	case *arrowarray.Float32:
		return fmtFloat(float64(a.Value(i)))
	case *arrowarray.Float64:
		return fmtFloat(a.Value(i))
	case *arrowarray.Boolean:
		if a.Value(i) {
			return "1"
		}
		return "0"
	case *arrowarray.String:
		return strconv.Quote(a.Value(i))
	case *arrowarray.LargeString:
		return strconv.Quote(a.Value(i))
	case *arrowarray.Binary:
		return base64.StdEncoding.EncodeToString(a.Value(i))
	case *arrowarray.LargeBinary:
		return base64.StdEncoding.EncodeToString(a.Value(i))
	case *arrowarray.FixedSizeBinary:
		return base64.StdEncoding.EncodeToString(a.Value(i))
	case *arrowarray.Timestamp:
		return strconv.FormatInt(int64(a.Value(i)), 10)
	case *arrowarray.Date32:
		return strconv.FormatInt(int64(a.Value(i)), 10)
	case *arrowarray.Time32:
		return strconv.FormatInt(int64(a.Value(i)), 10)
	case *arrowarray.Time64:
		return strconv.FormatInt(int64(a.Value(i)), 10)
	case *arrowarray.FixedSizeList:
		s, e := a.ValueOffsets(i)
		return listOf(t, a.ListValues(), int(s), int(e))
	case *arrowarray.LargeList:
		s, e := a.ValueOffsets(i)
		return listOf(t, a.ListValues(), int(s), int(e))
	case *arrowarray.Dictionary:
		return arrowCell(t, a.Indices(), i)
	}
	t.Fatalf("no rendering for Arrow type %s", col.DataType())
	return ""
}

func listOf(t testing.TB, vals arrow.Array, s, e int) string {
	parts := make([]string, 0, e-s)
	for k := s; k < e; k++ {
		parts = append(parts, arrowCell(t, vals, k))
	}
	return "[" + strings.Join(parts, ",") + "]"
}

// expectCell renders one expect-JSON cell like arrowCell.
func expectCell(t testing.TB, typ string, cellN int, v fixtures.Value) string {
	t.Helper()
	if v == nil {
		return "null"
	}
	if l, ok := v.([]any); ok {
		parts := make([]string, len(l))
		for k, x := range l {
			parts[k] = expectCell(t, typ, 0, x)
		}
		return "[" + strings.Join(parts, ",") + "]"
	}
	dt, err := datatype.Parse(typ)
	if err != nil {
		t.Fatalf("type %q: %v", typ, err)
	}
	switch {
	case fixtures.IsBinaryType(typ):
		b, err := fixtures.Bytes(v)
		if err != nil {
			t.Fatal(err)
		}
		// numpy drops the trailing NULs of fixed-size char cells.
		for len(b) < cellN {
			b = append(b, 0)
		}
		return base64.StdEncoding.EncodeToString(b)
	case dt.IsByteLike() || dt.IsString():
		return strconv.Quote(v.(string))
	case dt.IsFloat():
		f, err := fixtures.Float(v)
		if err != nil {
			t.Fatal(err)
		}
		return fmtFloat(f)
	case dt == datatype.Uint64:
		u, err := fixtures.Uint(v)
		if err != nil {
			t.Fatal(err)
		}
		return strconv.FormatUint(u, 10)
	}
	i, err := fixtures.Int(v)
	if err != nil {
		t.Fatal(err)
	}
	return strconv.FormatInt(i, 10)
}

// fieldType finds a column's type name and fixed cell size in an expect
// schema.
func fieldType(s *fixtures.Schema, name string) (string, int) {
	for _, d := range s.Dimensions {
		if d.Name == name {
			return d.Type, 0
		}
	}
	for _, a := range s.Attributes {
		if a.Name == name {
			if a.CellValNum.Var {
				return a.Type, 0
			}
			return a.Type, int(a.CellValNum.N)
		}
	}
	return "", 0
}

func layoutOf(s string) query.Layout {
	switch s {
	case "row-major":
		return query.LayoutRowMajor
	case "col-major":
		return query.LayoutColMajor
	case "global":
		return query.LayoutGlobal
	}
	return query.LayoutUnordered
}

// rowStrings joins the columns of each row.
func rowStrings(cols [][]string, n int, upto int) []string {
	rows := make([]string, n)
	for i := range rows {
		parts := make([]string, 0, len(cols))
		for c := 0; c < upto && c < len(cols); c++ {
			parts = append(parts, cols[c][i])
		}
		rows[i] = strings.Join(parts, "|")
	}
	return rows
}

func sortedCopy(s []string) []string {
	c := append([]string(nil), s...)
	sort.Strings(c)
	return c
}

var _ = json.Number("")
