package reader

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	arrowarray "github.com/apache/arrow-go/v18/arrow/array"

	"github.com/tileflight/tileflight/internal/fixtures"
	"github.com/tileflight/tileflight/query"
	"github.com/tileflight/tileflight/storage"
)

// denseCases are the TileDB-written dense arrays: the fixture matrix (or
// its golden subset) plus this package's own cases in testdata/dense
// (python_tests/golden/reader_dense_cases.py).
func denseCases(t *testing.T) []fixtures.Case {
	t.Helper()
	var out []fixtures.Case
	for _, c := range fixtures.Cases(t) {
		if c.Expect.Schema.Type == "dense" {
			out = append(out, c)
		}
	}
	own, err := fixtures.LoadDir(filepath.Join("testdata", "dense"))
	if err != nil {
		t.Fatal(err)
	}
	return append(out, own...)
}

// queryFor turns a read TileDB recorded into our query. TileDB's dense
// reads without a subarray span the schema's whole domain (not the
// non-empty domain a query without a subarray means here), so those
// dimensions are written out.
func queryFor(c fixtures.Case, r fixtures.Read) *query.Query {
	q := &query.Query{Array: filepath.Base(c.Dir), Columns: r.Columns, Layout: query.Layout(r.Layout), Limit: -1}
	if r.Timestamp != nil {
		q.Timestamp = &query.Timestamp{Start: 0, End: *r.Timestamp}
	}
	sch := c.Expect.Schema
	if r.Schema != nil {
		sch = *r.Schema
	}
	num := func(v fixtures.Value) query.Value { return query.Value{Num: v.(json.Number)} }
	for _, d := range sch.Dimensions {
		dr := query.DimRanges{Dim: d.Name}
		if rs, ok := r.Subarray[d.Name]; ok {
			for _, rr := range rs {
				dr.Ranges = append(dr.Ranges, query.Range{Lo: num(rr[0]), Hi: num(rr[1])})
			}
		} else {
			dr.Ranges = []query.Range{{Lo: num(d.Domain[0]), Hi: num(d.Domain[1])}}
		}
		q.Subarray = append(q.Subarray, dr)
	}
	return q
}

func openCase(t *testing.T, c fixtures.Case) (storage.Store, []byte) {
	t.Helper()
	st, err := storage.NewLocal(filepath.Dir(c.Dir))
	if err != nil {
		t.Fatal(err)
	}
	var key []byte
	if c.Expect.Encryption != nil {
		key = []byte(c.Expect.Encryption.Key)
	}
	return st, key
}

// readAll runs q and returns its batches.
func readAll(t *testing.T, st storage.Store, q *query.Query, opt Options) ([]arrow.Record, *arrow.Schema, error) {
	t.Helper()
	r, err := Open(context.Background(), st, q, opt)
	if err != nil {
		return nil, nil, err
	}
	defer r.Close()
	var recs []arrow.Record
	for {
		rec, err := r.Next(context.Background())
		if err == io.EOF {
			return recs, r.Schema(), nil
		}
		if err != nil {
			return recs, r.Schema(), err
		}
		if !rec.Schema().Equal(r.Schema()) {
			t.Fatalf("record schema %v differs from the reader's %v", rec.Schema(), r.Schema())
		}
		recs = append(recs, rec)
	}
}

// Every dense read TileDB recorded, in every layout, at every timestamp,
// reads back the same cells in the same order.
func TestDenseConformance(t *testing.T) {
	n := 0
	for _, c := range denseCases(t) {
		for _, rd := range c.Expect.Reads {
			t.Run(c.Name+"/"+rd.Name, func(t *testing.T) {
				st, key := openCase(t, c)
				for _, opt := range []Options{{EncryptionKey: key}, {EncryptionKey: key, MemoryBudget: 1, Workers: 3}} {
					q := queryFor(c, rd)
					q.BatchRows = 7 // several batches, cut inside tiles
					recs, _, err := readAll(t, st, q, opt)
					if err != nil {
						t.Fatalf("%+v: %v", opt, err)
					}
					compareRead(t, c, rd, recs)
					for _, r := range recs {
						r.Release()
					}
				}
				n++
			})
		}
	}
	if n == 0 {
		t.Fatal("no dense reads")
	}
}

func typeNames(c fixtures.Case, r fixtures.Read) map[string]string {
	sch := c.Expect.Schema
	if r.Schema != nil {
		sch = *r.Schema
	}
	out := map[string]string{}
	for _, d := range sch.Dimensions {
		out[d.Name] = d.Type
	}
	for _, a := range sch.Attributes {
		out[a.Name] = a.Type
	}
	return out
}

func compareRead(t *testing.T, c fixtures.Case, rd fixtures.Read, recs []arrow.Record) {
	t.Helper()
	types := typeNames(c, rd)
	total := 0
	for _, r := range recs {
		if r.NumRows() > 7 {
			t.Errorf("batch of %d rows, batch_rows is 7", r.NumRows())
		}
		total += int(r.NumRows())
	}
	if total != rd.NumCells {
		t.Fatalf("%d rows, TileDB read %d", total, rd.NumCells)
	}
	for ci, col := range rd.Columns {
		row := 0
		bad := 0
		for _, r := range recs {
			if r.ColumnName(ci) != col {
				t.Fatalf("column %d is %q, want %q", ci, r.ColumnName(ci), col)
			}
			arr := r.Column(ci)
			for i := 0; i < arr.Len(); i++ {
				got := canon(arr, i)
				want, err := canonExpect(rd.Data[col][row], arr.DataType(), types[col])
				if err != nil {
					t.Fatalf("column %q cell %d: %v", col, row, err)
				}
				if got != want && bad < 5 {
					t.Errorf("column %q cell %d: got %s, TileDB read %s", col, row, got, want)
					bad++
				}
				row++
			}
		}
	}
}

// canon renders one cell of an Arrow array for comparison.
func canon(a arrow.Array, i int) string {
	if a.IsNull(i) {
		return "null"
	}
	switch x := a.(type) {
	case *arrowarray.Int8:
		return strconv.FormatInt(int64(x.Value(i)), 10)
	case *arrowarray.Int16:
		return strconv.FormatInt(int64(x.Value(i)), 10)
	case *arrowarray.Int32:
		return strconv.FormatInt(int64(x.Value(i)), 10)
	case *arrowarray.Int64:
		return strconv.FormatInt(x.Value(i), 10)
	case *arrowarray.Uint8:
		return strconv.FormatUint(uint64(x.Value(i)), 10)
	case *arrowarray.Uint16:
		return strconv.FormatUint(uint64(x.Value(i)), 10)
	case *arrowarray.Uint32:
		return strconv.FormatUint(uint64(x.Value(i)), 10)
	case *arrowarray.Uint64:
		return strconv.FormatUint(x.Value(i), 10)
	case *arrowarray.Float32:
		return fmtFloat(float64(x.Value(i)), 32)
	case *arrowarray.Float64:
		return fmtFloat(x.Value(i), 64)
	case *arrowarray.Boolean:
		return strconv.FormatBool(x.Value(i))
	case *arrowarray.Timestamp:
		return strconv.FormatInt(int64(x.Value(i)), 10)
	case *arrowarray.Date32:
		return strconv.FormatInt(int64(x.Value(i)), 10)
	case *arrowarray.Time32:
		return strconv.FormatInt(int64(x.Value(i)), 10)
	case *arrowarray.Time64:
		return strconv.FormatInt(int64(x.Value(i)), 10)
	case *arrowarray.LargeString:
		// TileDB's default fill of a var string is one NUL byte, which
		// tiledb-py strips when it makes a Python str of it.
		return strconv.Quote(strings.TrimRight(x.Value(i), "\x00"))
	case *arrowarray.LargeBinary:
		return hex.EncodeToString(x.Value(i))
	case *arrowarray.FixedSizeBinary:
		return hex.EncodeToString(x.Value(i))
	case *arrowarray.FixedSizeList:
		s, e := x.ValueOffsets(i)
		return canonList(x.ListValues(), int(s), int(e))
	case *arrowarray.LargeList:
		s, e := x.ValueOffsets(i)
		return canonList(x.ListValues(), int(s), int(e))
	case *arrowarray.Dictionary:
		return canon(x.Indices(), i)
	}
	return fmt.Sprintf("<%s>", a.DataType())
}

func canonList(v arrow.Array, s, e int) string {
	parts := make([]string, 0, e-s)
	for k := s; k < e; k++ {
		parts = append(parts, canon(v, k))
	}
	return "[" + strings.Join(parts, ",") + "]"
}

func fmtFloat(f float64, bits int) string {
	if math.IsNaN(f) {
		return "NaN"
	}
	return strconv.FormatFloat(f, 'g', -1, bits)
}

// canonExpect renders an expect value like canon renders ours.
func canonExpect(v fixtures.Value, dt arrow.DataType, tname string) (string, error) {
	if v == nil {
		return "null", nil
	}
	switch t := dt.(type) {
	case *arrow.DictionaryType:
		return canonExpect(v, t.IndexType, tname)
	case *arrow.FixedSizeListType:
		return canonExpectList(v, t.Elem(), tname)
	case *arrow.LargeListType:
		return canonExpectList(v, t.Elem(), tname)
	}
	switch dt.ID() {
	case arrow.FLOAT32, arrow.FLOAT64:
		f, err := fixtures.Float(v)
		if err != nil {
			return "", err
		}
		if dt.ID() == arrow.FLOAT32 {
			return fmtFloat(float64(float32(f)), 32), nil
		}
		return fmtFloat(f, 64), nil
	case arrow.BOOL:
		b, ok := v.(bool)
		if !ok {
			return "", fmt.Errorf("%v is not a bool", v)
		}
		return strconv.FormatBool(b), nil
	case arrow.LARGE_STRING:
		s, ok := v.(string)
		if !ok {
			return "", fmt.Errorf("%v is not a string", v)
		}
		return strconv.Quote(s), nil
	case arrow.LARGE_BINARY, arrow.FIXED_SIZE_BINARY:
		if fixtures.IsBinaryType(tname) {
			b, err := fixtures.Bytes(v)
			return hex.EncodeToString(b), err
		}
		s, ok := v.(string)
		if !ok {
			return "", fmt.Errorf("%v is not a string", v)
		}
		return hex.EncodeToString([]byte(s)), nil
	case arrow.DATE32, arrow.TIME32:
		n, err := fixtures.Int(v)
		if err == nil && n == math.MinInt64 {
			return "null", nil // NaT does not fit 32 bits: our Arrow null
		}
		return strconv.FormatInt(n, 10), err
	case arrow.UINT64:
		n, err := fixtures.Uint(v)
		return strconv.FormatUint(n, 10), err
	}
	if num, ok := v.(json.Number); ok {
		return string(num), nil
	}
	if b, ok := v.(bool); ok {
		if b {
			return "1", nil
		}
		return "0", nil
	}
	return "", fmt.Errorf("unexpected value %v (%T) for %s", v, v, dt)
}

func canonExpectList(v fixtures.Value, elem arrow.DataType, tname string) (string, error) {
	l, ok := v.([]any)
	if !ok {
		return "", fmt.Errorf("%v is not a list", v)
	}
	parts := make([]string, len(l))
	for k, e := range l {
		s, err := canonExpect(e, elem, tname)
		if err != nil {
			return "", err
		}
		parts[k] = s
	}
	return "[" + strings.Join(parts, ",") + "]", nil
}
