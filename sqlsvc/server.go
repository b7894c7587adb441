// Package sqlsvc serves Arrow Flight SQL (ADBC, the Flight SQL JDBC
// driver, DBeaver, Spark's JDBC source) on the Flight service's port
// (docs/protocol.md, "Flight SQL"). It is written against the engine
// interface of package sqlsvc/tables (arrays as tables, scans, writes, and
// the service's limits, auth checks, error mapping and access log), which
// sqlsvc/native implements over the native service; package mux serves
// both on one port. It routes:
//
//   - catalog commands to the data directory: catalog "tileflight",
//     db_schema = folder ("main" for the top), table = array;
//   - statements to go-mysql-server, a pure-Go SQL engine, over tables
//     whose scans take the pushed-down projection and dimension ranges;
//     a statement that is nothing but a scan (columns, dimension ranges,
//     LIMIT) skips the engine and streams the reader's batches as a DoGet
//     would;
//   - bulk ingest (CommandStatementIngest) to the DoPut writer.
//
// Statement handles and tickets carry the SQL text (and bound parameters)
// themselves, so every ticket is valid on every daemon and nothing is kept
// between calls.
package sqlsvc

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	arr "github.com/apache/arrow-go/v18/arrow/array"
	aflight "github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/flight/flightsql"
	"github.com/apache/arrow-go/v18/arrow/flight/flightsql/schema_ref"
	"github.com/apache/arrow-go/v18/arrow/memory"
	sqle "github.com/dolthub/go-mysql-server"
	"github.com/rs/zerolog"

	"github.com/tileflight/tileflight/calls"
	"github.com/tileflight/tileflight/errkind"
	"github.com/tileflight/tileflight/sqlsvc/tables"
)

// Catalog is the one catalog name.
const Catalog = "tileflight"

// Table types.
const (
	TypeArray = "ARRAY"
	TypeB2ND  = "B2ND"
)

// Server implements flightsql.Server over an engine.
type Server struct {
	flightsql.BaseServer
	eng    tables.Engine
	engine *sqle.Engine
	log    zerolog.Logger
	mem    memory.Allocator
	// timeout bounds one statement's run (SetTimeout, -sql-timeout).
	timeout time.Duration
	// memory bounds what one statement's engine holds (SetMemory,
	// -sql-memory, memory.go).
	memory int64
	// calls is the daemon's registry of running calls (SetCalls), which
	// CancelFlightInfo stops statements through; nil: not cancellable.
	calls *calls.Registry
}

// SetTimeout bounds how long one statement may run (planning, execution
// and streaming its result): past it the statement ends with
// DEADLINE_EXCEEDED and its memory is released. 0: no bound beyond the
// client's own deadline.
func (s *Server) SetTimeout(d time.Duration) { s.timeout = d }

// errStatementTimeout is the cause of a statement stopped by -sql-timeout.
var errStatementTimeout = fmt.Errorf("the statement ran longer than the server's -sql-timeout: %w", context.DeadlineExceeded)

// timedOut names the timeout (or the cancel) when a statement's context
// ended by it, so that the client reads why (the code is the same).
func timedOut(ctx context.Context, err error) error {
	if err == nil || ctx.Err() == nil {
		return err
	}
	cause := context.Cause(ctx)
	if errors.Is(cause, errStatementTimeout) {
		return errStatementTimeout
	}
	// Stopped by cancel_query or CancelFlightInfo: say which.
	if cause != nil && cause != ctx.Err() && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) {
		return cause
	}
	return err
}

// bounded is ctx bounded by the statement timeout; cancel must be called
// once the statement is done.
func (s *Server) bounded(ctx context.Context) (context.Context, context.CancelFunc) {
	if s.timeout <= 0 {
		return context.WithCancel(ctx)
	}
	return context.WithTimeoutCause(ctx, s.timeout, errStatementTimeout)
}

// New returns the Flight SQL server, to serve beside the native service
// through package mux.
func New(eng tables.Engine, log zerolog.Logger, version string) (aflight.FlightServer, *Server, error) {
	s := &Server{eng: eng, log: log, mem: memory.DefaultAllocator, memory: DefaultMemory}
	s.engine = newEngine(s)
	for id, v := range map[flightsql.SqlInfo]any{
		flightsql.SqlInfoFlightSqlServerName:                        "tileflight",
		flightsql.SqlInfoFlightSqlServerVersion:                     version,
		flightsql.SqlInfoFlightSqlServerArrowVersion:                "18",
		flightsql.SqlInfoFlightSqlServerReadOnly:                    false,
		flightsql.SqlInfoFlightSqlServerSql:                         true,
		flightsql.SqlInfoFlightSqlServerSubstrait:                   false,
		flightsql.SqlInfoFlightSqlServerTransaction:                 int32(0), // none
		flightsql.SqlInfoFlightSqlServerCancel:                      true,
		flightsql.SqlInfoFlightSqlServerBulkIngestion:               true,
		flightsql.SqlInfoFlightSqlServerIngestTransactionsSupported: false,
		flightsql.SqlInfoDDLCatalog:                                 false,
		flightsql.SqlInfoDDLSchema:                                  false,
		flightsql.SqlInfoDDLTable:                                   false,
		flightsql.SqlInfoIdentifierQuoteChar:                        `"`,
		// Tables are written schema.table: the catalog is not part of a
		// table's name in statements (tools then leave it out).
		flightsql.SqlInfoCatalogsSupportedActions:     int32(0),
		flightsql.SqlInfoQuotedIdentifierCase:         int64(1), // case sensitive
		flightsql.SqlInfoIdentifierCase:               int64(1),
		flightsql.SqlInfoAllTablesAreASelectable:      true,
		flightsql.SqlInfoNullOrdering:                 int64(1), // nulls sorted low (at the start ascending)
		flightsql.SqlInfoSearchStringEscape:           `\`,
		flightsql.SqlInfoSchemaTerm:                   "schema",
		flightsql.SqlInfoCatalogTerm:                  "catalog",
		flightsql.SqlInfoTransactionsSupported:        false,
		flightsql.SqlInfoSupportsColumnAliasing:       true,
		flightsql.SqlInfoSupportsExpressionsInOrderBy: true,
	} {
		if err := s.RegisterSqlInfo(id, v); err != nil {
			return nil, nil, err
		}
	}
	return streamingServer{FlightServer: flightsql.NewFlightServer(s), srv: s}, s, nil
}

// entry is one table of the catalog.
type entry struct {
	schema, table, path string
	b2nd                bool
}

func (s *Server) entries(ctx context.Context) ([]entry, error) {
	es, err := s.eng.ListArrays(ctx, "")
	if err != nil {
		return nil, err
	}
	out := make([]entry, 0, len(es))
	for _, e := range es {
		db, t := schemaOf(e.Path)
		out = append(out, entry{schema: db, table: t, path: e.Path, b2nd: e.B2ND})
	}
	return out, nil
}

// schemas are the db_schema names: "main" and every folder holding an
// array.
func (s *Server) schemas(ctx context.Context) []string {
	es, err := s.entries(ctx)
	seen := map[string]bool{mainSchema: true}
	out := []string{mainSchema}
	if err != nil {
		return out
	}
	for _, e := range es {
		if !seen[e.schema] {
			seen[e.schema] = true
			out = append(out, e.schema)
		}
	}
	sort.Strings(out[1:])
	return out
}

// likePattern compiles a Flight SQL filter pattern (SQL LIKE: % any
// string, _ one character, \ escapes) to a regexp; nil pattern: all.
func likePattern(p *string) *regexp.Regexp {
	if p == nil {
		return nil
	}
	var b strings.Builder
	b.WriteString("^")
	esc := false
	for _, r := range *p {
		switch {
		case esc:
			b.WriteString(regexp.QuoteMeta(string(r)))
			esc = false
		case r == '\\':
			esc = true
		case r == '%':
			b.WriteString(".*")
		case r == '_':
			b.WriteString(".")
		default:
			b.WriteString(regexp.QuoteMeta(string(r)))
		}
	}
	b.WriteString("$")
	return regexp.MustCompile(b.String())
}

func matches(re *regexp.Regexp, s string) bool { return re == nil || re.MatchString(s) }

// catalogMatches: a filter of "" means "without a catalog", which no
// table is; nil means any.
func catalogMatches(c *string) bool { return c == nil || *c == Catalog }

func (s *Server) info(desc *aflight.FlightDescriptor, sc *arrow.Schema) *aflight.FlightInfo {
	return &aflight.FlightInfo{
		Endpoint:         []*aflight.FlightEndpoint{{Ticket: &aflight.Ticket{Ticket: desc.Cmd}}},
		FlightDescriptor: desc,
		Schema:           aflight.SerializeSchema(sc, s.mem),
		TotalRecords:     -1,
		TotalBytes:       -1,
	}
}

// rowsOf streams one record made from JSON rows of sc.
func (s *Server) rowsOf(sc *arrow.Schema, rows []map[string]any) (*arrow.Schema, <-chan aflight.StreamChunk, error) {
	if rows == nil {
		rows = []map[string]any{}
	}
	b, err := json.Marshal(rows)
	if err != nil {
		return nil, nil, err
	}
	rec, _, err := arr.RecordFromJSON(s.mem, sc, bytes.NewReader(b))
	if err != nil {
		return nil, nil, s.eng.Status(err)
	}
	ch := make(chan aflight.StreamChunk, 1)
	ch <- aflight.StreamChunk{Data: rec}
	close(ch)
	return sc, ch, nil
}

func (s *Server) GetFlightInfoCatalogs(_ context.Context, desc *aflight.FlightDescriptor) (*aflight.FlightInfo, error) {
	return s.info(desc, schema_ref.Catalogs), nil
}

func (s *Server) DoGetCatalogs(context.Context) (*arrow.Schema, <-chan aflight.StreamChunk, error) {
	return s.rowsOf(schema_ref.Catalogs, []map[string]any{{"catalog_name": Catalog}})
}

func (s *Server) GetFlightInfoSchemas(_ context.Context, _ flightsql.GetDBSchemas, desc *aflight.FlightDescriptor) (*aflight.FlightInfo, error) {
	return s.info(desc, schema_ref.DBSchemas), nil
}

func (s *Server) DoGetDBSchemas(ctx context.Context, cmd flightsql.GetDBSchemas) (*arrow.Schema, <-chan aflight.StreamChunk, error) {
	var rows []map[string]any
	if catalogMatches(cmd.GetCatalog()) {
		re := likePattern(cmd.GetDBSchemaFilterPattern())
		for _, db := range s.schemas(ctx) {
			if matches(re, db) {
				rows = append(rows, map[string]any{"catalog_name": Catalog, "db_schema_name": db})
			}
		}
	}
	return s.rowsOf(schema_ref.DBSchemas, rows)
}

func (s *Server) GetFlightInfoTables(_ context.Context, cmd flightsql.GetTables, desc *aflight.FlightDescriptor) (*aflight.FlightInfo, error) {
	if cmd.GetIncludeSchema() {
		return s.info(desc, schema_ref.TablesWithIncludedSchema), nil
	}
	return s.info(desc, schema_ref.Tables), nil
}

func (s *Server) DoGetTables(ctx context.Context, cmd flightsql.GetTables) (*arrow.Schema, <-chan aflight.StreamChunk, error) {
	sc := schema_ref.Tables
	if cmd.GetIncludeSchema() {
		sc = schema_ref.TablesWithIncludedSchema
	}
	var rows []map[string]any
	if catalogMatches(cmd.GetCatalog()) {
		es, err := s.entries(ctx)
		if err != nil {
			return nil, nil, s.eng.Status(err)
		}
		dbRe, tRe := likePattern(cmd.GetDBSchemaFilterPattern()), likePattern(cmd.GetTableNameFilterPattern())
		wantType := map[string]bool{}
		for _, t := range cmd.GetTableTypes() {
			wantType[strings.ToUpper(t)] = true
		}
		for _, e := range es {
			typ := TypeArray
			if e.b2nd {
				typ = TypeB2ND
			}
			if !matches(dbRe, e.schema) || !matches(tRe, e.table) || (len(wantType) > 0 && !wantType[typ]) {
				continue
			}
			row := map[string]any{"catalog_name": Catalog, "db_schema_name": e.schema, "table_name": e.table, "table_type": typ}
			if cmd.GetIncludeSchema() {
				tsc, err := s.tableSchema(ctx, e)
				if err != nil {
					// One array that does not open must not hide the others.
					s.log.Warn().Str("array", e.path).Err(err).Msg("GetTables: an array that does not open is listed without a schema")
					tsc = arrow.NewSchema(nil, nil)
				}
				row["table_schema"] = aflight.SerializeSchema(tsc, s.mem)
			}
			rows = append(rows, row)
		}
	}
	return s.rowsOf(sc, rows)
}

// tableSchema is the Arrow schema of a table's columns, with the column
// metadata JDBC clients read.
func (s *Server) tableSchema(ctx context.Context, e entry) (*arrow.Schema, error) {
	a, err := s.eng.Describe(ctx, e.path)
	if err != nil {
		return nil, err
	}
	sc := a.Arrow
	fields := make([]arrow.Field, sc.NumFields())
	for i, f := range sc.Fields() {
		md := flightsql.NewColumnMetadataBuilder().CatalogName(Catalog).SchemaName(e.schema).TableName(e.table).
			TypeName(sqlTypeName(f.Type)).IsReadOnly(isDimension(f)).Metadata()
		keys := append(append([]string{}, f.Metadata.Keys()...), md.Keys()...)
		vals := append(append([]string{}, f.Metadata.Values()...), md.Values()...)
		f.Metadata = arrow.NewMetadata(keys, vals)
		fields[i] = f
	}
	return arrow.NewSchema(fields, nil), nil
}

func (s *Server) GetFlightInfoTableTypes(_ context.Context, desc *aflight.FlightDescriptor) (*aflight.FlightInfo, error) {
	return s.info(desc, schema_ref.TableTypes), nil
}

func (s *Server) DoGetTableTypes(context.Context) (*arrow.Schema, <-chan aflight.StreamChunk, error) {
	return s.rowsOf(schema_ref.TableTypes, []map[string]any{{"table_type": TypeArray}, {"table_type": TypeB2ND}})
}

func (s *Server) GetFlightInfoPrimaryKeys(_ context.Context, _ flightsql.TableRef, desc *aflight.FlightDescriptor) (*aflight.FlightInfo, error) {
	return s.info(desc, schema_ref.PrimaryKeys), nil
}

// DoGetPrimaryKeys lists a table's dimensions: they identify a cell (of a
// sparse array without duplicates) as a primary key does a row.
func (s *Server) DoGetPrimaryKeys(ctx context.Context, ref flightsql.TableRef) (*arrow.Schema, <-chan aflight.StreamChunk, error) {
	var rows []map[string]any
	if ref.Catalog == nil || *ref.Catalog == Catalog {
		db := mainSchema
		if ref.DBSchema != nil && *ref.DBSchema != "" {
			db = *ref.DBSchema
		}
		path := ref.Table
		if f := folderOf(db); f != "" && !strings.Contains(ref.Table, "/") {
			path = f + "/" + ref.Table
		}
		a, err := s.eng.Describe(ctx, path)
		if err != nil {
			return nil, nil, s.eng.Status(err)
		}
		pdb, ptable := schemaOf(path)
		for i, d := range a.Dims {
			rows = append(rows, map[string]any{"catalog_name": Catalog, "db_schema_name": pdb, "table_name": ptable,
				"column_name": d.Name, "key_sequence": i + 1, "key_name": "dimensions"})
		}
	}
	return s.rowsOf(schema_ref.PrimaryKeys, rows)
}

func (s *Server) GetFlightInfoXdbcTypeInfo(_ context.Context, _ flightsql.GetXdbcTypeInfo, desc *aflight.FlightDescriptor) (*aflight.FlightInfo, error) {
	return s.info(desc, schema_ref.XdbcTypeInfo), nil
}

func (s *Server) DoGetXdbcTypeInfo(_ context.Context, cmd flightsql.GetXdbcTypeInfo) (*arrow.Schema, <-chan aflight.StreamChunk, error) {
	var rows []map[string]any
	for _, t := range xdbcTypes {
		if dt := cmd.GetDataType(); dt != nil && *dt != t.code {
			continue
		}
		row := map[string]any{
			"type_name": t.name, "data_type": t.code, "column_size": t.size,
			"nullable": 1, "case_sensitive": t.quoted, "searchable": 3,
			"unsigned_attribute": t.unsigned, "fixed_prec_scale": false, "auto_increment": false,
			"local_type_name": t.name, "sql_data_type": t.code, "num_prec_radix": nil,
			"create_params": []string{},
		}
		if t.quoted {
			row["literal_prefix"], row["literal_suffix"] = "'", "'"
		}
		if t.radix > 0 {
			row["num_prec_radix"] = t.radix
		}
		rows = append(rows, row)
	}
	return s.rowsOf(schema_ref.XdbcTypeInfo, rows)
}

// xdbcType is one SQL type the engine holds array columns as (JDBC
// java.sql.Types codes).
type xdbcType struct {
	name     string
	code     int32
	size     int32
	radix    int32
	quoted   bool
	unsigned bool
}

var xdbcTypes = []xdbcType{
	{name: "BOOLEAN", code: 16, size: 1},
	{name: "TINYINT", code: -6, size: 3, radix: 10},
	{name: "SMALLINT", code: 5, size: 5, radix: 10},
	{name: "INTEGER", code: 4, size: 10, radix: 10},
	{name: "BIGINT", code: -5, size: 19, radix: 10},
	{name: "TINYINT UNSIGNED", code: -6, size: 3, radix: 10, unsigned: true},
	{name: "SMALLINT UNSIGNED", code: 5, size: 5, radix: 10, unsigned: true},
	{name: "INTEGER UNSIGNED", code: 4, size: 10, radix: 10, unsigned: true},
	{name: "BIGINT UNSIGNED", code: -5, size: 20, radix: 10, unsigned: true},
	{name: "FLOAT", code: 6, size: 7, radix: 2},
	{name: "DOUBLE", code: 8, size: 15, radix: 2},
	{name: "DECIMAL", code: 3, size: 38, radix: 10},
	{name: "VARCHAR", code: 12, size: 1 << 30, quoted: true},
	{name: "VARBINARY", code: -3, size: 1 << 30, quoted: true},
	{name: "DATE", code: 91, size: 10, quoted: true},
	{name: "TIMESTAMP", code: 93, size: 26, quoted: true},
}

// sqlTypeName is the SQL type name of an Arrow column type, for the
// ARROW:FLIGHT:SQL:TYPE_NAME metadata.
func sqlTypeName(t arrow.DataType) string {
	switch t.ID() {
	case arrow.BOOL:
		return "BOOLEAN"
	case arrow.INT8:
		return "TINYINT"
	case arrow.INT16:
		return "SMALLINT"
	case arrow.INT32:
		return "INTEGER"
	case arrow.INT64:
		return "BIGINT"
	case arrow.UINT8:
		return "TINYINT UNSIGNED"
	case arrow.UINT16:
		return "SMALLINT UNSIGNED"
	case arrow.UINT32:
		return "INTEGER UNSIGNED"
	case arrow.UINT64:
		return "BIGINT UNSIGNED"
	case arrow.FLOAT16, arrow.FLOAT32:
		return "FLOAT"
	case arrow.FLOAT64:
		return "DOUBLE"
	case arrow.STRING, arrow.LARGE_STRING, arrow.STRING_VIEW:
		return "VARCHAR"
	case arrow.BINARY, arrow.LARGE_BINARY, arrow.FIXED_SIZE_BINARY:
		return "VARBINARY"
	case arrow.TIMESTAMP:
		return "TIMESTAMP"
	case arrow.DATE32, arrow.DATE64:
		return "DATE"
	case arrow.DICTIONARY:
		return sqlTypeName(t.(*arrow.DictionaryType).ValueType)
	}
	return "VARCHAR"
}

// notFoundTable is the error of a table that is not in the catalog.
func notFoundTable(name string) error {
	return errkind.Errorf(errkind.NotFound, "no table %q in catalog %q (list them with GetTables; a table is written schema.table, or as a quoted array path such as \"climate/temp\")", name, Catalog)
}
