package sqlsvc

// The SQL engine's view of the data directory: go-mysql-server asks a
// DatabaseProvider for databases (our db_schemas: folders, "main" for the
// root) and their tables (arrays). A table is scanned through the same
// query engine as a DoGet: the engine hands it the columns it needs
// (ProjectedTable) and the WHERE terms it can answer exactly
// (FilteredTable: ranges on integer and float dimensions become the
// subarray), and reads the Arrow batches row by row.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync/atomic"

	"github.com/apache/arrow-go/v18/arrow"
	gms "github.com/dolthub/go-mysql-server/sql"

	"github.com/tileflight/tileflight/errkind"
	"github.com/tileflight/tileflight/query"
	"github.com/tileflight/tileflight/sqlsvc/tables"
)

// mainSchema is the db_schema of arrays at the top of the data directory.
const mainSchema = "main"

// provider is the engine's DatabaseProvider.
type provider struct{ srv *Server }

var _ gms.DatabaseProvider = (*provider)(nil)

// folderOf maps a db_schema name to the folder it stands for.
func folderOf(db string) string {
	if strings.EqualFold(db, mainSchema) {
		return ""
	}
	return db
}

// schemaOf maps an array path to its db_schema and table name.
func schemaOf(path string) (db, table string) {
	i := strings.LastIndexByte(path, '/')
	if i < 0 {
		return mainSchema, path
	}
	return path[:i], path[i+1:]
}

func (p *provider) Database(ctx *gms.Context, name string) (gms.Database, error) {
	if strings.EqualFold(name, mainSchema) {
		return &database{srv: p.srv, name: mainSchema}, nil
	}
	for _, db := range p.srv.schemas(ctx) {
		if strings.EqualFold(db, name) {
			return &database{srv: p.srv, name: db}, nil
		}
	}
	return nil, gms.ErrDatabaseNotFound.New(name)
}

func (p *provider) HasDatabase(ctx *gms.Context, name string) bool {
	_, err := p.Database(ctx, name)
	return err == nil
}

func (p *provider) AllDatabases(ctx *gms.Context) []gms.Database {
	var out []gms.Database
	for _, db := range p.srv.schemas(ctx) {
		out = append(out, &database{srv: p.srv, name: db})
	}
	return out
}

// database is one db_schema: the arrays directly inside one folder.
type database struct {
	srv  *Server
	name string
}

var _ gms.Database = (*database)(nil)

func (d *database) Name() string { return d.name }

// GetTableInsensitive finds a table by name. A name holding "/" is a whole
// array path ("climate/temp" written as a quoted identifier), whatever the
// current database; otherwise the array is looked up in this folder, by
// exact name first, then ignoring case.
func (d *database) GetTableInsensitive(ctx *gms.Context, name string) (gms.Table, bool, error) {
	path := name
	if !strings.Contains(name, "/") {
		if f := folderOf(d.name); f != "" {
			path = f + "/" + name
		}
	}
	if query.ValidateArrayName(path) != nil {
		return nil, false, nil
	}
	t, err := d.srv.openTable(ctx, path)
	if err == nil {
		return t, true, nil
	}
	if errkind.Of(err) != errkind.NotFound {
		return nil, false, err
	}
	names, lerr := d.GetTableNames(ctx)
	if lerr != nil || strings.Contains(name, "/") {
		return nil, false, nil
	}
	for _, n := range names {
		if strings.EqualFold(n, name) {
			full := n
			if f := folderOf(d.name); f != "" {
				full = f + "/" + n
			}
			t, err := d.srv.openTable(ctx, full)
			if err != nil {
				return nil, false, err
			}
			return t, true, nil
		}
	}
	return nil, false, nil
}

func (d *database) GetTableNames(ctx *gms.Context) ([]string, error) {
	folder := folderOf(d.name)
	prefix := ""
	if folder != "" {
		prefix = folder + "/"
	}
	es, err := d.srv.eng.ListArrays(ctx, prefix)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range es {
		rest := strings.TrimPrefix(e.Path, prefix)
		if !strings.Contains(rest, "/") {
			out = append(out, rest)
		}
	}
	return out, nil
}

// table is one array as the engine sees it, with what was pushed down
// into its scan.
type table struct {
	srv   *Server
	path  string
	name  string
	arr   *tables.Array
	arrow *arrow.Schema // every column, docs/protocol.md, "Arrow type mapping" order
	full  gms.Schema
	// proj are the indexes (into arrow/full) of the columns scanned; nil
	// means all.
	proj    []int
	projSet bool
	// filter is the condition pushed into the scan (filter.go), "" for
	// none.
	filter string
	// extra are dimension ranges taken from WHERE terms the engine's
	// index did not turn into the lookup (filter.go); every partition
	// intersects its ranges with them.
	extra dimRanges
}

var (
	_ gms.Table                 = (*table)(nil)
	_ gms.ProjectedTable        = (*table)(nil)
	_ gms.IndexAddressableTable = (*table)(nil)
	_ gms.IndexedTable          = (*table)(nil)
	_ gms.PrimaryKeyTable       = (*table)(nil)
)

func (s *Server) openTable(ctx context.Context, path string) (*table, error) {
	a, err := s.eng.Describe(ctx, path)
	if err != nil {
		return nil, err
	}
	sc := a.Arrow
	_, name := schemaOf(path)
	t := &table{srv: s, path: path, name: name, arr: a, arrow: sc}
	for _, f := range sc.Fields() {
		typ, err := gmsType(f.Type)
		if err != nil {
			return nil, errkind.Errorf(errkind.Unimplemented, "array %q: column %q: %v", path, f.Name, err)
		}
		t.full = append(t.full, &gms.Column{Name: f.Name, Type: typ, Nullable: f.Nullable, Source: name, DatabaseSource: dbOf(path)})
	}
	return t, nil
}

func dbOf(path string) string { db, _ := schemaOf(path); return db }

func isDimension(f arrow.Field) bool {
	v, ok := f.Metadata.GetValue("tiledb.role")
	return ok && v == "dimension"
}

func (t *table) Name() string { return t.name }

func (t *table) String() string { return t.path }

// describe is what EXPLAIN shows for a scan: the native query it runs.
func (t *table) describe(ranges dimRanges, layout query.Layout) string {
	q, empty := t.nativeQuery(ranges, -1)
	q.Layout = layout
	if empty {
		return fmt.Sprintf("scan of %q: no cell can match the pushed-down ranges", t.path)
	}
	b := queryJSON(q)
	if q.DropFailing {
		return fmt.Sprintf("scan %s (dense: the cells that fail the filter are dropped)", b)
	}
	return fmt.Sprintf("scan %s", b)
}

// queryJSON is a native query as EXPLAIN shows it: its JSON, with the
// comparison operators of a filter written as such (Go's encoder escapes
// <, > and & for HTML).
func queryJSON(q *query.Query) string {
	b, _ := q.MarshalJSON()
	return strings.NewReplacer(`\u003c`, "<", `\u003e`, ">", `\u0026`, "&").Replace(string(b))
}

func (t *table) Schema() gms.Schema {
	if !t.projSet {
		return t.full
	}
	out := make(gms.Schema, len(t.proj))
	for i, k := range t.proj {
		out[i] = t.full[k]
	}
	return out
}

func (t *table) Collation() gms.CollationID { return gms.Collation_Default }

// PrimaryKeySchema is every column, before projection (the planner
// numbers columns by it). No column is declared a key: a sparse array
// that allows duplicates has none, and the planner would trust one.
func (t *table) PrimaryKeySchema() gms.PrimaryKeySchema {
	return gms.PrimaryKeySchema{Schema: t.full, PkOrdinals: []int{}}
}

func (t *table) WithProjections(cols []string) gms.Table {
	n := *t
	n.proj = make([]int, 0, len(cols))
	n.projSet = true
	for _, c := range cols {
		for k, col := range t.full {
			if strings.EqualFold(col.Name, c) {
				n.proj = append(n.proj, k)
				break
			}
		}
	}
	return &n
}

func (t *table) Projections() []string {
	if !t.projSet {
		return nil
	}
	out := make([]string, len(t.proj))
	for i, k := range t.proj {
		out[i] = t.full[k].Name
	}
	return out
}

// columnNames are the array's names of the scanned columns.
func (t *table) columnNames() []string {
	if !t.projSet {
		return nil
	}
	out := make([]string, 0, len(t.proj))
	for _, k := range t.proj {
		out = append(out, t.arrow.Field(k).Name)
	}
	return out
}

// nativeQuery is the query of docs/protocol.md, "Queries, tickets and descriptors" the scan runs; empty says that
// the pushed-down ranges leave no cell.
func (t *table) nativeQuery(ranges dimRanges, limit int64) (*query.Query, bool) {
	q := &query.Query{Array: t.path, Limit: limit}
	cols := t.columnNames()
	if cols != nil && len(cols) == 0 {
		// The engine needs the rows, not their values (COUNT(*)): one
		// dimension is the cheapest column that says how many.
		cols = []string{t.arr.Dims[0].Name}
	}
	q.Columns = cols
	if t.filter != "" {
		q.Filter = t.filter
		// A dense read gives failing cells fill values; the table holds
		// only the rows that pass.
		q.DropFailing = t.arr.Dense
	}
	sub, empty := t.withExtra(ranges).subarray(t.arr)
	q.Subarray = sub
	return q, empty
}

// withExtra is a partition's ranges intersected with the table's extra
// ranges.
func (t *table) withExtra(ranges dimRanges) dimRanges {
	if len(t.extra) == 0 {
		return ranges
	}
	out := ranges.clone()
	for d, rs := range t.extra {
		out.intersect(d, rs)
		out[d] = nonEmpty(out[d])
		if len(out[d]) == 0 {
			out[d] = []rng{{lo: 1, hi: 0, flo: 1, fhi: 0}}
		}
	}
	return out
}

// partition is one scan: the dimension ranges it reads (nil: all;
// none: no cell).
type partition struct {
	ranges dimRanges
	none   bool
	// layout orders the cells (index lookups promise index order).
	layout query.Layout
}

func (p partition) Key() []byte { return []byte(fmt.Sprint(p.ranges)) }

func (t *table) Partitions(*gms.Context) (gms.PartitionIter, error) {
	return gms.PartitionsToPartitionIter(partition{}), nil
}

func (t *table) PartitionRows(ctx *gms.Context, p gms.Partition) (gms.RowIter, error) {
	var ranges dimRanges
	var layout query.Layout
	if pp, ok := p.(partition); ok {
		if pp.none {
			return gms.RowsToRowIter(), nil
		}
		ranges, layout = pp.ranges, pp.layout
	}
	q, empty := t.nativeQuery(ranges, -1)
	q.Layout = layout
	if empty {
		return gms.RowsToRowIter(), nil
	}
	bs, err := t.srv.eng.Scan(ctx, q)
	if err != nil {
		return nil, err
	}
	width := len(t.Schema())
	return &rowIter{eng: t.srv.eng, stream: bs, width: width, arrayName: t.path}, nil
}

// scannedRows counts the rows scans handed to the engine or streamed as a
// whole statement's result, for the tests that prove a pushdown.
var scannedRows atomic.Int64

// rowIter turns a scan's Arrow batches into engine rows.
type rowIter struct {
	eng       tables.Engine
	stream    tables.RecordStream
	rec       arrow.RecordBatch
	conv      []func(int) any
	row       int
	width     int
	rows      int64
	arrayName string
}

func (r *rowIter) Next(ctx *gms.Context) (gms.Row, error) {
	for r.rec == nil || r.row >= int(r.rec.NumRows()) {
		if r.rec != nil {
			r.rec.Release()
			r.rec = nil
		}
		rec, err := r.stream.Next(ctx)
		if errors.Is(err, io.EOF) {
			return nil, io.EOF
		}
		if err != nil {
			return nil, err
		}
		r.rec, r.row = rec, 0
		scannedRows.Add(rec.NumRows())
		r.eng.NoteCall(ctx, "", 0, r.eng.RecordBytes(rec))
		r.conv = r.conv[:0]
		for i := 0; i < r.width && i < int(rec.NumCols()); i++ {
			r.conv = append(r.conv, toGMS(rec.Column(i)))
		}
	}
	row := make(gms.Row, r.width)
	for i, c := range r.conv {
		row[i] = c(r.row)
	}
	r.row++
	r.rows++
	return row, nil
}

func (r *rowIter) Close(*gms.Context) error {
	if r.rec != nil {
		r.rec.Release()
		r.rec = nil
	}
	return r.stream.Close()
}
