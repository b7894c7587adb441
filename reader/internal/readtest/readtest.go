// Package readtest holds the helpers the tests of package reader and of
// its readers (reader/dense, reader/agg, reader/ndarray) share: the test
// policy of their TestMain (poisoned buffers), queries from fixture
// cases, whole reads through reader.Open, the cell-by-cell comparison
// with what TileDB read, and a store wrapper that logs the keys read.
// Only _test.go files import it; it may import anything a test of those
// packages does.
package readtest

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	arrowarray "github.com/apache/arrow-go/v18/arrow/array"

	"github.com/tileflight/tileflight/internal/bufpool"
	"github.com/tileflight/tileflight/internal/fixtures"
	"github.com/tileflight/tileflight/internal/s3test"
	"github.com/tileflight/tileflight/query"
	"github.com/tileflight/tileflight/reader"
	"github.com/tileflight/tileflight/reader/tileio"
	"github.com/tileflight/tileflight/storage"
	"github.com/tileflight/tileflight/storage/errorfs"
)

// Main is the TestMain of the reader packages' tests.
func Main(m *testing.M) {
	// Pooled tiles are overwritten when recycled, so that a read of one
	// after its release fails the tests instead of passing by luck.
	bufpool.SetPoison(bufpool.Poison)
	// Bytes of a tile decoded in part that were not decoded are 0xA5
	// (tileio.LoadRange), so that painting one fails the tests too.
	tileio.SetPartialMode(tileio.PartialPoison)
	code := m.Run()
	s3test.Stop()
	os.Exit(code)
}

// Parse parses a JSON query or fails the test.
func Parse(t *testing.T, js string) *query.Query {
	t.Helper()
	q, err := query.Parse([]byte(js))
	if err != nil {
		t.Fatal(err)
	}
	return q
}

// QueryFor turns a read TileDB recorded into our query. TileDB's dense
// reads without a subarray span the schema's whole domain (not the
// non-empty domain a query without a subarray means here), so those
// dimensions are written out.
func QueryFor(c fixtures.Case, r fixtures.Read) *query.Query {
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

// OpenCase opens the store holding a fixture case's array and returns
// its encryption key (nil for none).
func OpenCase(t *testing.T, c fixtures.Case) (storage.Store, []byte) {
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

// ReadAll runs q and returns its batches.
func ReadAll(t *testing.T, st storage.Store, q *query.Query, opt reader.Options) ([]arrow.RecordBatch, *arrow.Schema, error) {
	t.Helper()
	r, err := reader.Open(context.Background(), st, q, opt)
	if err != nil {
		return nil, nil, err
	}
	defer r.Close()
	var recs []arrow.RecordBatch
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

// TypeNames maps each dimension and attribute of the case (or of the
// read's own schema) to its TileDB type name.
func TypeNames(c fixtures.Case, r fixtures.Read) map[string]string {
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

// CompareRead compares batches of at most 7 rows with the cells TileDB
// read, cell by cell.
func CompareRead(t *testing.T, c fixtures.Case, rd fixtures.Read, recs []arrow.RecordBatch) {
	t.Helper()
	types := TypeNames(c, rd)
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
				got := Canon(arr, i)
				want, err := CanonExpect(rd.Data[col][row], arr.DataType(), types[col])
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

// Canon renders one cell of an Arrow array for comparison.
func Canon(a arrow.Array, i int) string {
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
		return Canon(x.Indices(), i)
	}
	return fmt.Sprintf("<%s>", a.DataType())
}

func canonList(v arrow.Array, s, e int) string {
	parts := make([]string, 0, e-s)
	for k := s; k < e; k++ {
		parts = append(parts, Canon(v, k))
	}
	return "[" + strings.Join(parts, ",") + "]"
}

func fmtFloat(f float64, bits int) string {
	if math.IsNaN(f) {
		return "NaN"
	}
	return strconv.FormatFloat(f, 'g', -1, bits)
}

// CanonExpect renders an expect value like Canon renders ours.
func CanonExpect(v fixtures.Value, dt arrow.DataType, tname string) (string, error) {
	if v == nil {
		return "null", nil
	}
	switch t := dt.(type) {
	case *arrow.DictionaryType:
		return CanonExpect(v, t.IndexType, tname)
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
		s, err := CanonExpect(e, elem, tname)
		if err != nil {
			return "", err
		}
		parts[k] = s
	}
	return "[" + strings.Join(parts, ",") + "]", nil
}

// KeyLog records the keys of ranged reads (errorfs.Wrap(st, log)); a
// test clears Keys between reads.
type KeyLog struct {
	mu   sync.Mutex
	Keys []string
}

// Inject records the key of every Get and GetRange.
func (k *KeyLog) Inject(i errorfs.Info) error {
	if i.Op == errorfs.OpGetRange || i.Op == errorfs.OpGet {
		k.mu.Lock()
		k.Keys = append(k.Keys, i.Key)
		k.mu.Unlock()
	}
	return nil
}

// Reads counts the recorded reads of keys holding substr.
func (k *KeyLog) Reads(substr string) int {
	k.mu.Lock()
	defer k.mu.Unlock()
	n := 0
	for _, key := range k.Keys {
		if strings.Contains(key, substr) {
			n++
		}
	}
	return n
}

// AggRow runs the aggregate query q and returns its one row by column.
func AggRow(t *testing.T, st storage.Store, q string) map[string]any {
	t.Helper()
	r, err := reader.Open(context.Background(), st, Parse(t, q), reader.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	rec, err := r.Next(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Release()
	if rec.NumRows() != 1 {
		t.Fatalf("%d rows", rec.NumRows())
	}
	if _, err := r.Next(context.Background()); err != io.EOF {
		t.Fatalf("second Next: %v", err)
	}
	out := map[string]any{}
	for i, f := range rec.Schema().Fields() {
		out[f.Name] = cell(rec.Column(i))
	}
	return out
}

func cell(a arrow.Array) any {
	if a.IsNull(0) {
		return nil
	}
	if b, ok := a.(*arrowarray.FixedSizeBinary); ok {
		return string(b.Value(0))
	}
	s := a.ValueStr(0)
	return s
}
