package sqlsvc

// Statements: parse (syntax errors say where), refuse what is not a
// query, bind parameters, plan with go-mysql-server, then either stream
// a pure scan straight from the reader (the whole statement pushed down)
// or run the engine's plan over the pushed-down scans.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	arr "github.com/apache/arrow-go/v18/arrow/array"
	aflight "github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/flight/flightsql"
	sqle "github.com/dolthub/go-mysql-server"
	gms "github.com/dolthub/go-mysql-server/sql"
	"github.com/dolthub/go-mysql-server/sql/expression"
	"github.com/dolthub/go-mysql-server/sql/plan"
	"github.com/dolthub/go-mysql-server/sql/transform"
	"github.com/dolthub/vitess/go/vt/sqlparser"

	"github.com/tileflight/tileflight/calls"
	"github.com/tileflight/tileflight/errkind"
	"github.com/tileflight/tileflight/query"
	"github.com/tileflight/tileflight/sqlsvc/dialect"
)

// sqlMode: double quotes quote identifiers, as in standard SQL (and as
// ADBC, JDBC tools and DuckDB users write them); strings take single
// quotes.
const sqlMode = "ANSI_QUOTES,ONLY_FULL_GROUP_BY,NO_ENGINE_SUBSTITUTION"

// Supported is what the errors of statements outside it say.
const Supported = "supported: one SELECT per statement (WHERE, GROUP BY, HAVING, ORDER BY, LIMIT/OFFSET, DISTINCT, joins, subqueries, UNION), EXPLAIN SELECT ...; INSERT INTO sparse_array [(columns)] VALUES ... | SELECT ... as an update; other writes go through bulk ingest (ADBC adbc_ingest) or DoPut"

// maxBatchRows bounds the rows of one record batch of an engine result.
const maxBatchRows = 65536

func newEngine(s *Server) *sqle.Engine {
	e := sqle.NewDefault(&provider{srv: s})
	// The engine's analyzer logs every rule it runs, at info level to
	// stderr, when DEBUG_ANALYZER is set in the environment; the daemon's
	// access log already has every statement. Nothing else the engine
	// logs is on the path of the statements run here (no server, no KILL,
	// no DDL), so its global logger is left alone.
	e.Analyzer.Debug, e.Analyzer.Verbose = false, false
	e.ReadOnly.Store(true)
	e.Analyzer.Catalog.InfoSchema = &infoSchema{srv: s}
	return e
}

// newContext is an engine context for one call.
func (s *Server) newContext(ctx context.Context) (*gms.Context, error) {
	sess := gms.NewBaseSession()
	opts := []gms.ContextOption{gms.WithSession(sess)}
	if b := budgetFrom(ctx); b != nil {
		// The engine's caches (GROUP BY groups, DISTINCT) ask the
		// statement's budget before each new entry (memory.go).
		opts = append(opts, gms.WithMemoryManager(gms.NewMemoryManager(b)))
	}
	sctx := gms.NewContext(ctx, opts...)
	sctx.SetCurrentDatabase(currentSchema(ctx))
	if err := sess.SetSessionVariable(sctx, "sql_mode", sqlMode); err != nil {
		return nil, err
	}
	// string_agg is group_concat, which MySQL cuts at 1024 bytes.
	if err := sess.SetSessionVariable(sctx, "group_concat_max_len", groupConcatMax); err != nil {
		return nil, err
	}
	return sctx, nil
}

// handle is what statement handles and tickets carry: the statement
// itself, so that any daemon can run it.
type handle struct {
	SQL string `json:"sql"`
	// Params are rows of bound parameters (prepared statements); the
	// statement runs once per row, results concatenated.
	Params [][]param `json:"params,omitempty"`
	// Part, in the ticket of one of several endpoints of a statement that
	// is a pure scan, is the native query of that endpoint's part of the
	// scan (see statementInfo).
	Part json.RawMessage `json:"part,omitempty"`
	// Schema is the db_schema unqualified table names resolve in (the
	// session's when the handle was made); empty: "main".
	Schema string `json:"schema,omitempty"`
}

// param is one bound value as an SQL literal: kind int, uint, float,
// decimal, str, bytes (hex), bool, null.
type param struct {
	Kind string `json:"k"`
	Val  string `json:"v,omitempty"`
}

func (p param) expr() sqlparser.Expr {
	switch p.Kind {
	case "int", "uint":
		return sqlparser.NewIntVal([]byte(p.Val))
	case "float", "decimal":
		return sqlparser.NewFloatVal([]byte(p.Val))
	case "str":
		return sqlparser.NewStrVal([]byte(p.Val))
	case "bytes":
		return sqlparser.NewHexVal([]byte(p.Val))
	case "bool":
		return sqlparser.BoolVal(p.Val == "true")
	}
	return &sqlparser.NullVal{}
}

func decodeHandle(b []byte) (*handle, error) {
	var h handle
	if err := json.Unmarshal(b, &h); err != nil || h.SQL == "" {
		return nil, errkind.Errorf(errkind.InvalidArgument, "statement handle is not one this server made (%d bytes)", len(b))
	}
	return &h, nil
}

func (h *handle) encode() []byte {
	b, _ := json.Marshal(h)
	return b
}

// compiled is a statement ready to run.
type compiled struct {
	sctx   *gms.Context
	schema *arrow.Schema
	// scan, when not nil, is the whole statement as a native query: its
	// batches are the result (fields renamed to names).
	scan  *query.Query
	names []string
	node  gms.Node
	// explain is the result of an EXPLAIN.
	explain []string
}

// compile parses, binds and plans a statement with one row of
// parameters (nil: none).
func (s *Server) compile(ctx context.Context, text string, params []param) (c *compiled, err error) {
	defer s.planPanic(text, &err)
	// The engine names result columns by the text it parsed: it gets the
	// rewritten statement (parseIn rewrites again, which changes nothing).
	if text, err = dialect.Rewrite(text); err != nil {
		return nil, err
	}
	sctx, stmt, err := s.parseIn(ctx, text)
	if err != nil {
		return nil, err
	}
	explain := false
	if ex, ok := stmt.(*sqlparser.Explain); ok {
		explain = true
		stmt = ex.Statement
		text = strings.TrimSpace(text)
		if i := indexFold(text, "explain"); i == 0 {
			text = strings.TrimSpace(text[len("explain"):])
		}
	}
	switch ins := stmt.(type) {
	case *sqlparser.Select, *sqlparser.SetOp, *sqlparser.ParenSelect:
	case *sqlparser.Insert:
		if ins.Action == sqlparser.ReplaceStr {
			return nil, errkind.Errorf(errkind.Unimplemented, "REPLACE is not supported: use INSERT (in a sparse array without duplicates a newer cell at the same coordinates replaces the older one); %s", Supported)
		} else if ins.With != nil {
			return nil, errkind.Errorf(errkind.Unimplemented, "WITH ... INSERT is not supported: write the common table expression inside the INSERT's SELECT; %s", Supported)
		}
		if explain {
			return nil, errkind.Errorf(errkind.Unimplemented, "EXPLAIN INSERT: explain the INSERT's SELECT instead; %s", Supported)
		}
		// Only a WITH ... INSERT gets here (isInsert looks at the first
		// word), or a caller that reads results of an update.
		return nil, errkind.Errorf(errkind.InvalidArgument, "INSERT has no result set: run it as an update (Flight SQL CommandStatementUpdate, JDBC executeUpdate, ADBC cursor.execute); %s", Supported)
	default:
		return nil, errkind.Errorf(errkind.Unimplemented, "statement %s is not supported (tileflight writes through SQL with INSERT into sparse arrays only); %s", stmtKind(stmt), Supported)
	}
	return s.plan(ctx, sctx, text, stmt, params, explain)
}

// planPanic, deferred, turns a panic while planning into the
// statement's error (Internal), never the daemon's end.
func (s *Server) planPanic(text string, err *error) {
	if p := recover(); p != nil {
		s.log.Error().Str("panic", fmt.Sprint(p)).Str("stack", string(debug.Stack())).Str("sql", text).Msg("planning an SQL statement panicked")
		*err = fmt.Errorf("internal error planning the statement (a bug, logged by the server): %v", p)
	}
}

// plan binds and plans a parsed query (a SELECT, a set operation).
func (s *Server) plan(ctx context.Context, sctx *gms.Context, text string, stmt sqlparser.Statement, params []param, explain bool) (_ *compiled, err error) {
	defer s.planPanic(text, &err)
	var bindings map[string]sqlparser.Expr
	if len(params) > 0 {
		bindings = make(map[string]sqlparser.Expr, len(params))
		for i, p := range params {
			bindings["v"+strconv.Itoa(i+1)] = p.expr()
		}
	}
	node, err := s.engine.BoundQueryPlan(sctx, text, stmt, bindings)
	if err != nil {
		return nil, engineErr(err)
	}
	if node, err = s.pushdown(sctx, node); err != nil {
		return nil, engineErr(err)
	}
	if node, err = s.metered(node, budgetFrom(ctx)); err != nil {
		return nil, engineErr(err)
	}
	c := &compiled{sctx: sctx, node: node}
	if q, names, ok := scanOnly(sctx, node); ok {
		sc, err := s.eng.ResultSchema(ctx, q)
		if err != nil {
			return nil, err
		}
		c.scan, c.names, c.schema = q, names, renamed(sc, names)
	} else {
		c.schema = resultSchema(node.Schema())
	}
	if explain {
		c.explain = explainLines(c)
		c.schema = arrow.NewSchema([]arrow.Field{{Name: "plan", Type: arrow.BinaryTypes.LargeString}}, nil)
	}
	return c, nil
}

func indexFold(s, sub string) int { return strings.Index(strings.ToLower(s), sub) }

func stmtKind(st sqlparser.Statement) string {
	t := fmt.Sprintf("%T", st)
	return strings.ToUpper(strings.TrimPrefix(t, "*sqlparser."))
}

// parseIn parses one statement, written in the dialect of
// sqlsvc/dialect, in a new engine context.
func (s *Server) parseIn(ctx context.Context, text string) (*gms.Context, sqlparser.Statement, error) {
	text, err := dialect.Rewrite(text)
	if err != nil {
		return nil, nil, err
	}
	sctx, err := s.newContext(ctx)
	if err != nil {
		return nil, nil, err
	}
	stmt, err := parse(sctx, s.engine, text)
	if err != nil {
		return nil, nil, err
	}
	return sctx, stmt, nil
}

// parse parses one statement; a syntax error is InvalidArgument and says
// at which position it failed.
func parse(sctx *gms.Context, e *sqle.Engine, text string) (stmt sqlparser.Statement, err error) {
	// The parser panics on some malformed input (`SELECT''`, found by
	// FuzzStatement): that is a syntax error too.
	defer func() {
		if p := recover(); p != nil {
			stmt, err = nil, errkind.Errorf(errkind.InvalidArgument, "SQL syntax error: the parser failed on this statement (%v): %q", p, truncate(text))
		}
	}()
	text = gms.RemoveSpaceAndDelimiter(text, ';')
	if text == "" {
		return nil, errkind.Errorf(errkind.InvalidArgument, "empty SQL statement; %s", Supported)
	}
	stmt, rest, err := e.Parser.ParseOneWithOptions(sctx, text, gms.LoadSqlMode(sctx).ParserOptions())
	if err != nil {
		if gms.ErrSyntaxError.Is(err) || strings.Contains(err.Error(), "syntax error") {
			return nil, errkind.Errorf(errkind.InvalidArgument, "SQL %s (statement: %q)", err.Error(), truncate(text))
		}
		return nil, engineErr(err)
	}
	if rest > 0 && rest < len(text) && strings.TrimSpace(strings.Trim(text[rest:], ";")) != "" {
		return nil, errkind.Errorf(errkind.InvalidArgument, "SQL: one statement per call; more text at position %d: %q", rest, truncate(text[rest:]))
	}
	return stmt, nil
}

func truncate(s string) string {
	if len(s) > 200 {
		return s[:200] + "..."
	}
	return s
}

// engineErr classifies the engine's errors: a table, schema or column
// that is not there is NotFound or InvalidArgument, a feature it lacks
// Unimplemented, anything else about the statement InvalidArgument.
// Errors of our own layers keep their kind.
func engineErr(err error) error {
	if err == nil || errkind.Of(err) != nil {
		return err
	}
	var se interface{ GRPCStatus() any }
	if errors.As(err, &se) {
		return err
	}
	switch {
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return err
	case gms.ErrTableNotFound.Is(err), gms.ErrDatabaseNotFound.Is(err):
		return errkind.Errorf(errkind.NotFound, "SQL: %v (tables are written schema.table, e.g. main.dense, or as a quoted array path such as \"climate/temp\"; GetTables lists them)", err)
	case gms.ErrUnsupportedFeature.Is(err), gms.ErrUnsupportedSyntax.Is(err):
		return errkind.Errorf(errkind.Unimplemented, "SQL: %v; %s", err, Supported)
	}
	return errkind.Errorf(errkind.InvalidArgument, "SQL: %v", err)
}

// scanOnly recognizes a plan that is nothing but a scan: plain columns
// of one table (renamed or not), WHERE terms all taken by the scan, and
// an optional LIMIT. Such a statement is the native query itself.
func scanOnly(sctx *gms.Context, n gms.Node) (*query.Query, []string, bool) {
	limit := int64(-1)
	if l, ok := n.(*plan.Limit); ok {
		if l.CalcFoundRows {
			return nil, nil, false
		}
		v, err := l.Limit.Eval(sctx, nil)
		if err != nil {
			return nil, nil, false
		}
		switch x := v.(type) {
		case int8:
			limit = int64(x)
		case int16:
			limit = int64(x)
		case int32:
			limit = int64(x)
		case int64:
			limit = x
		case uint64:
			limit = int64(x)
		default:
			return nil, nil, false
		}
		if limit < 0 {
			return nil, nil, false
		}
		n = l.Child
	}
	var projections []gms.Expression
	if p, ok := n.(*plan.Project); ok {
		projections = p.Projections
		n = p.Child
	}
	if ta, ok := n.(*plan.TableAlias); ok {
		n = ta.Child
	}
	t, ranges, layout, ok := scanOf(sctx, n)
	if !ok {
		return nil, nil, false
	}
	sch := t.Schema()
	if rt, ok := n.(*plan.ResolvedTable); ok {
		sch = rt.Schema()
	}
	var cols, names []string
	if projections == nil {
		for _, c := range sch {
			cols = append(cols, c.Name)
			names = append(names, c.Name)
		}
	} else {
		for _, e := range projections {
			name := ""
			if a, ok := e.(*expression.Alias); ok {
				name = a.Name()
				e = a.Child
			}
			gf, ok := e.(*expression.GetField)
			if !ok {
				return nil, nil, false
			}
			if name == "" {
				name = gf.Name()
			}
			col := ""
			for _, c := range t.full {
				if strings.EqualFold(c.Name, gf.Name()) {
					col = c.Name
				}
			}
			if col == "" {
				return nil, nil, false
			}
			cols = append(cols, col)
			names = append(names, name)
		}
	}
	if len(cols) == 0 {
		return nil, nil, false
	}
	seen := map[string]bool{}
	for _, c := range cols {
		if seen[c] {
			return nil, nil, false // the native query names a column once
		}
		seen[c] = true
	}
	q, empty := t.nativeQuery(ranges, limit)
	if empty {
		return nil, nil, false // the engine answers "no rows" itself
	}
	q.Columns = cols
	q.Layout = layout
	return q, names, true
}

// scanOf recognizes a node that is one scan of one of our tables: a
// whole table, or a static index lookup whose boxes make one subarray.
func scanOf(sctx *gms.Context, n gms.Node) (*table, dimRanges, query.Layout, bool) {
	switch x := n.(type) {
	case *plan.ResolvedTable:
		t, ok := gms.GetUnderlyingTable(x.Table).(*table)
		return t, nil, query.LayoutDefault, ok
	case *plan.IndexedTableAccess:
		t, ok := gms.GetUnderlyingTable(x.UnderlyingTable()).(*table)
		if !ok || !x.IsStatic() {
			return nil, nil, "", false
		}
		lookup, err := x.GetLookup(sctx, nil)
		if err != nil {
			return nil, nil, "", false
		}
		parts, err := t.lookupPartitions(lookup)
		if err != nil || len(parts) != 1 || parts[0].(partition).none {
			return nil, nil, "", false
		}
		if pt, ok := gms.GetUnderlyingTable(x.Table).(*table); ok {
			t = pt // projected
		}
		return t, parts[0].(partition).ranges, parts[0].(partition).layout, true
	}
	return nil, nil, "", false
}

func renamed(sc *arrow.Schema, names []string) *arrow.Schema {
	fs := make([]arrow.Field, sc.NumFields())
	for i, f := range sc.Fields() {
		if i < len(names) {
			f.Name = names[i]
		}
		fs[i] = f
	}
	return arrow.NewSchema(fs, nil)
}

// resultSchema is the Arrow schema of an engine result.
func resultSchema(sc gms.Schema) *arrow.Schema {
	fs := make([]arrow.Field, len(sc))
	for i, c := range sc {
		fs[i] = arrow.Field{Name: c.Name, Type: arrowType(c.Type), Nullable: true}
	}
	return arrow.NewSchema(fs, nil)
}

// explainLines says what runs where: the native queries that the scans
// run (pushed down) and the engine's plan above them.
func explainLines(c *compiled) []string {
	if c.scan != nil {
		return []string{"pushed down: the whole statement is one native scan", "scan " + queryJSON(c.scan)}
	}
	var out []string
	var walk func(n gms.Node)
	walk = func(n gms.Node) {
		if a, ok := n.(*nativeAgg); ok {
			out = append(out, "pushed down: aggregates of "+strconv.Quote(a.t.path)+" answered by the reader: "+a.describe())
		} else if a, ok := n.(*nativeGroupBy); ok {
			out = append(out, "pushed down: GROUP BY of "+strconv.Quote(a.t.path)+" computed over the scan's batches: "+a.describe())
		} else if t, ranges, layout, ok := scanOf(c.sctx, n); ok {
			out = append(out, "pushed down: "+t.describe(ranges, layout))
		} else if ita, ok := n.(*plan.IndexedTableAccess); ok {
			if t, ok := gms.GetUnderlyingTable(ita.UnderlyingTable()).(*table); ok {
				if lookup, err := ita.GetLookup(c.sctx, nil); err == nil && ita.IsStatic() {
					parts, _ := t.lookupPartitions(lookup)
					for _, p := range parts {
						if p.(partition).none {
							out = append(out, "pushed down: no cell of "+strconv.Quote(t.path)+" can match")
							continue
						}
						out = append(out, "pushed down: "+t.describe(p.(partition).ranges, p.(partition).layout))
					}
				} else {
					out = append(out, "pushed down: "+t.describe(nil, "")+", looked up per row of the join by dimension ranges")
				}
			}
		}
		for _, ch := range n.Children() {
			walk(ch)
		}
	}
	walk(c.node)
	out = append(out, "in the SQL engine:")
	for _, l := range strings.Split(strings.TrimRight(gms.DebugString(c.node), "\n"), "\n") {
		out = append(out, "  "+l)
	}
	return out
}

// sendChunk hands rec to ch, or releases it when ctx ends first.
func sendChunk(ctx context.Context, ch chan<- aflight.StreamChunk, rec arrow.RecordBatch) error {
	select {
	case ch <- aflight.StreamChunk{Data: rec}:
		return nil
	case <-ctx.Done():
		rec.Release()
		return ctx.Err()
	}
}

// run streams a compiled statement's result to ch; it closes nothing.
func (s *Server) run(ctx context.Context, c *compiled, ch chan<- aflight.StreamChunk) error {
	send := func(rec arrow.RecordBatch) error {
		s.eng.NoteCall(ctx, "", rec.NumRows(), 0)
		return sendChunk(ctx, ch, rec)
	}
	switch {
	case c.explain != nil:
		b := arr.NewRecordBuilder(s.mem, c.schema)
		defer b.Release()
		for _, l := range c.explain {
			b.Field(0).(*arr.LargeStringBuilder).Append(l)
		}
		return send(b.NewRecordBatch())
	case c.scan != nil:
		bs, err := s.eng.Scan(ctx, c.scan)
		if err != nil {
			return err
		}
		defer bs.Close()
		for {
			rec, err := bs.Next(ctx)
			if errors.Is(err, io.EOF) {
				return nil
			}
			if err != nil {
				return err
			}
			scannedRows.Add(rec.NumRows())
			out := arr.NewRecordBatch(c.schema, rec.Columns(), rec.NumRows())
			rec.Release()
			if err := send(out); err != nil {
				return err
			}
		}
	}
	b := arr.NewRecordBuilder(s.mem, c.schema)
	defer b.Release()
	apps := make([]func(any) error, len(c.schema.Fields()))
	gsch := c.node.Schema()
	for i := range apps {
		apps[i] = appender(b.Field(i), gsch[i].Type)
	}
	n := 0
	err := s.engineRows(c, func(row gms.Row) error {
		for i, a := range apps {
			if i >= len(row) {
				b.Field(i).AppendNull()
				continue
			}
			if err := a(row[i]); err != nil {
				return fmt.Errorf("SQL: column %q: %v", c.schema.Field(i).Name, err)
			}
		}
		n++
		if n == maxBatchRows {
			n = 0
			return send(b.NewRecordBatch())
		}
		return nil
	})
	if err != nil {
		return err
	}
	// Always a last batch, empty when the rows filled the batches before
	// it exactly or there were none.
	return send(b.NewRecordBatch())
}

// engineRows runs the compiled statement's plan in the SQL engine and
// calls each with every row it yields, in order.
func (s *Server) engineRows(c *compiled, each func(gms.Row) error) error {
	_, iter, _, err := s.engine.PrepQueryPlanForExecution(c.sctx, "", c.node, nil)
	if err != nil {
		return engineErr(err)
	}
	defer iter.Close(c.sctx)
	for {
		row, err := iter.Next(c.sctx)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			if b := budgetFrom(c.sctx); b != nil && gms.ErrNoMemoryAvailable.Is(err) {
				return b.errMemory("GROUP BY or DISTINCT state")
			}
			return engineErr(err)
		}
		if err := each(row); err != nil {
			return err
		}
	}
}

// stream runs the statement of h (once per parameter row) in the
// background and returns its schema and batches.
func (s *Server) stream(ctx context.Context, h *handle) (*arrow.Schema, <-chan aflight.StreamChunk, error) {
	calls.From(ctx).SetSQL(h.SQL)
	ctx, cancel := s.bounded(withBudget(withSchema(ctx, h.Schema), s.memory))
	status := func(err error) error { return s.eng.Status(timedOut(ctx, err)) }
	started := false
	defer func() {
		if !started {
			cancel()
		}
	}()
	rows := h.Params
	if len(rows) == 0 {
		rows = [][]param{nil}
	}
	first, err := s.compile(ctx, h.SQL, rows[0])
	if err != nil {
		return nil, nil, status(err)
	}
	if h.Part != nil {
		if len(rows) > 1 {
			return nil, nil, s.eng.Status(errkind.Errorf(errkind.InvalidArgument, "statement ticket names a part of a scan and %d parameter rows", len(rows)))
		}
		if err := partScan(first, h.Part); err != nil {
			return nil, nil, status(err)
		}
	}
	release, err := s.eng.AcquireStream(ctx)
	if err != nil {
		return nil, nil, status(err)
	}
	ch := make(chan aflight.StreamChunk, 2)
	started = true
	sc := first.schema // the goroutine drops first when done
	go func() {
		defer cancel()
		defer release()
		defer func() {
			// A statement stopped past -sql-memory, cancelled or timed
			// out gives back what its engine held at once (the plan too:
			// a hash join keeps its table in its node).
			first = nil
			if b := budgetFrom(ctx); ctx.Err() != nil || b != nil && b.Used() > b.limit {
				freeMemory()
			}
		}()
		s.runAll(ctx, h.SQL, rows, first, func(i int, c *compiled) error {
			if !arrow.TypeEqual(arrow.StructOf(c.schema.Fields()...), arrow.StructOf(first.schema.Fields()...)) {
				return errkind.Errorf(errkind.InvalidArgument, "SQL: parameter row %d gives a result of another schema than row 0", i)
			}
			c.schema = first.schema
			return nil
		}, s.run, status, ch)
	}()
	return sc, ch, nil
}

// runAll runs a statement once per parameter row (first: row 0 compiled
// already; check vets each later row's plan) and sends the batches to ch,
// then an error, if any, through wrap; it closes ch. A panic fails the
// statement, not the daemon (the gRPC handler's recovery does not see
// this goroutine's).
func (s *Server) runAll(ctx context.Context, sql string, rows [][]param, first *compiled, check func(i int, c *compiled) error,
	run func(context.Context, *compiled, chan<- aflight.StreamChunk) error, wrap func(error) error, ch chan<- aflight.StreamChunk) {
	defer close(ch)
	fail := func(err error) {
		select {
		case ch <- aflight.StreamChunk{Err: wrap(err)}:
		case <-ctx.Done():
			// Ended by the statement's own bound (-sql-timeout), not by
			// its client, which is still there to be told why.
			if errors.Is(context.Cause(ctx), errStatementTimeout) {
				t := time.NewTimer(5 * time.Second)
				defer t.Stop()
				select {
				case ch <- aflight.StreamChunk{Err: wrap(err)}:
				case <-t.C:
				}
			}
		}
	}
	defer func() {
		if p := recover(); p != nil {
			s.log.Error().Str("panic", fmt.Sprint(p)).Str("stack", string(debug.Stack())).Str("sql", sql).Msg("SQL statement panicked; the call fails, the daemon keeps serving")
			fail(fmt.Errorf("internal error running the statement (a bug, logged by the server): %v", p))
		}
	}()
	for i, ps := range rows {
		c := first
		if i > 0 {
			var err error
			if c, err = s.compile(ctx, sql, ps); err == nil {
				err = check(i, c)
			}
			if err != nil {
				fail(err)
				return
			}
		}
		if err := run(ctx, c, ch); err != nil {
			fail(err)
			return
		}
	}
}

// statementInfo is the FlightInfo of a statement: its schema and one
// endpoint whose ticket carries the statement.
func (s *Server) statementInfo(ctx context.Context, h *handle, desc *aflight.FlightDescriptor) (*aflight.FlightInfo, error) {
	calls.From(ctx).SetSQL(h.SQL)
	if h.Schema == "" {
		h.Schema = sessionFrom(ctx).Schema
	}
	ctx = withSchema(ctx, h.Schema)
	var ps []param
	if len(h.Params) > 0 {
		ps = h.Params[0]
	}
	c, err := s.compile(ctx, h.SQL, ps)
	if err != nil {
		return nil, s.eng.Status(err)
	}
	info := &aflight.FlightInfo{
		FlightDescriptor: desc,
		Schema:           aflight.SerializeSchema(c.schema, s.mem),
		TotalRecords:     -1,
		TotalBytes:       -1,
	}
	// A pure scan of one parameter row without LIMIT is split like the
	// native query's GetFlightInfo: an endpoint per part, spread over a
	// cluster's nodes, each ticket naming its part. Anything else runs as
	// one statement on one endpoint (any node can run it).
	handles := []*handle{h}
	if c.scan != nil && c.scan.Limit < 0 && len(h.Params) <= 1 {
		parts, ordered, err := s.eng.Partition(ctx, c.scan)
		if err != nil {
			return nil, s.eng.Status(err)
		}
		if len(parts) > 1 {
			handles = handles[:0]
			for _, p := range parts {
				pj, err := p.MarshalJSON()
				if err != nil {
					return nil, s.eng.Status(err)
				}
				handles = append(handles, &handle{SQL: h.SQL, Params: h.Params, Part: pj})
			}
			info.Ordered = ordered
		}
	}
	for _, ph := range handles {
		t, err := flightsql.CreateStatementQueryTicket(ph.encode())
		if err != nil {
			return nil, s.eng.Status(err)
		}
		info.Endpoint = append(info.Endpoint, &aflight.FlightEndpoint{Ticket: &aflight.Ticket{Ticket: t}})
	}
	s.eng.AssignLocations(info.Endpoint)
	return info, nil
}

// partScan replaces a compiled pure scan by the part a ticket names. The
// part must be a part of that scan: same array, columns and filter, no
// limit or aggregates, so that its batches have the statement's schema.
func partScan(c *compiled, part json.RawMessage) error {
	if c.scan == nil {
		return errkind.Errorf(errkind.InvalidArgument, "statement ticket names a part of a scan, but the statement is not a pure scan")
	}
	p, err := query.Parse(part)
	if err != nil {
		return errkind.Errorf(errkind.InvalidArgument, "statement ticket: its part: %v", err)
	}
	if p.Array != c.scan.Array || !slices.Equal(p.Columns, c.scan.Columns) || p.Filter != c.scan.Filter || p.Limit >= 0 || p.Aggregates != nil {
		return errkind.Errorf(errkind.InvalidArgument, "statement ticket: its part is not a part of the statement's scan of %q", c.scan.Array)
	}
	// Not a JSON key: the part keeps the statement's choice.
	p.DropFailing = c.scan.DropFailing
	c.scan = p
	return nil
}

func (s *Server) GetFlightInfoStatement(ctx context.Context, cmd flightsql.StatementQuery, desc *aflight.FlightDescriptor) (*aflight.FlightInfo, error) {
	if isInsert(cmd.GetQuery()) {
		return s.updateInfo(ctx, &handle{SQL: cmd.GetQuery()}, desc)
	}
	return s.statementInfo(ctx, &handle{SQL: cmd.GetQuery()}, desc)
}

func (s *Server) GetSchemaStatement(ctx context.Context, cmd flightsql.StatementQuery, _ *aflight.FlightDescriptor) (*aflight.SchemaResult, error) {
	if isInsert(cmd.GetQuery()) {
		return s.updateSchema(ctx, cmd.GetQuery())
	}
	c, err := s.compile(ctx, cmd.GetQuery(), nil)
	if err != nil {
		return nil, s.eng.Status(err)
	}
	return &aflight.SchemaResult{Schema: aflight.SerializeSchema(c.schema, s.mem)}, nil
}

func (s *Server) DoGetStatement(ctx context.Context, cmd flightsql.StatementQueryTicket) (*arrow.Schema, <-chan aflight.StreamChunk, error) {
	h, err := decodeHandle(cmd.GetStatementHandle())
	if err != nil {
		return nil, nil, s.eng.Status(err)
	}
	return s.stream(ctx, h)
}

// DoPutCommandStatementUpdate runs an INSERT (insert.go) and returns the
// rows it wrote.
func (s *Server) DoPutCommandStatementUpdate(ctx context.Context, cmd flightsql.StatementUpdate) (int64, error) {
	if len(cmd.GetTransactionId()) > 0 {
		return 0, s.eng.Status(errkind.Errorf(errkind.Unimplemented, "SQL updates in a transaction: tileflight has no transactions (each INSERT is atomic by itself)"))
	}
	n, err := s.update(ctx, cmd.GetQuery(), nil)
	return n, s.eng.Status(err)
}

// DoPutPreparedStatementUpdate runs a prepared INSERT with the parameter
// rows of the stream (or those bound before): all of them are one atomic
// write.
func (s *Server) DoPutPreparedStatementUpdate(ctx context.Context, cmd flightsql.PreparedStatementUpdate, rdr aflight.MessageReader) (int64, error) {
	h, err := decodeHandle(cmd.GetPreparedStatementHandle())
	if err != nil {
		return 0, s.eng.Status(err)
	}
	params, err := readParams(rdr)
	if err != nil {
		return 0, s.eng.Status(err)
	}
	if params == nil {
		params = h.Params
	}
	n, err := s.update(ctx, h.SQL, params)
	return n, s.eng.Status(err)
}

// updateInfo answers GetFlightInfo of an INSERT sent as a query (ADBC's
// cursor.execute sends every statement so): the INSERT runs now, and the
// FlightInfo has no endpoints, no columns, and the rows written as its
// total_records (ADBC's cursor.rowcount).
func (s *Server) updateInfo(ctx context.Context, h *handle, desc *aflight.FlightDescriptor) (*aflight.FlightInfo, error) {
	calls.From(ctx).SetSQL(h.SQL)
	n, err := s.update(ctx, h.SQL, h.Params)
	if err != nil {
		return nil, s.eng.Status(err)
	}
	return &aflight.FlightInfo{
		FlightDescriptor: desc,
		Schema:           aflight.SerializeSchema(arrow.NewSchema(nil, nil), s.mem),
		TotalRecords:     n,
		TotalBytes:       -1,
	}, nil
}

// updateSchema is the (empty) result schema of an INSERT, once it is
// checked against its array.
func (s *Server) updateSchema(ctx context.Context, text string) (*aflight.SchemaResult, error) {
	if _, err := s.planInsert(ctx, text); err != nil {
		return nil, s.eng.Status(err)
	}
	return &aflight.SchemaResult{Schema: aflight.SerializeSchema(arrow.NewSchema(nil, nil), s.mem)}, nil
}

// CreatePreparedStatement plans the statement once to check it and to
// report its schema; the handle is the statement itself.
func (s *Server) CreatePreparedStatement(ctx context.Context, req flightsql.ActionCreatePreparedStatementRequest) (flightsql.ActionCreatePreparedStatementResult, error) {
	var res flightsql.ActionCreatePreparedStatementResult
	h := &handle{SQL: req.GetQuery()}
	n := countParams(h.SQL)
	res.Handle = h.encode()
	if isInsert(h.SQL) {
		// An update: no result columns (JDBC then runs it with
		// executeUpdate); the parameters take the types of the columns
		// they fill.
		p, err := s.planInsert(ctx, h.SQL)
		if err != nil {
			return res, s.eng.Status(err)
		}
		res.DatasetSchema = arrow.NewSchema(nil, nil)
		res.ParameterSchema = paramSchema(n, s.insertParamSchema(ctx, p, n))
		t := true
		res.IsUpdate = &t
		return res, nil
	}
	if n == 0 {
		c, err := s.compile(ctx, h.SQL, nil)
		if err != nil {
			return res, s.eng.Status(err)
		}
		res.DatasetSchema = c.schema
	} else {
		// Check the syntax now; the result schema may depend on the
		// parameters' types, so it is given once they are bound.
		if _, _, err := s.parseIn(ctx, h.SQL); err != nil {
			return res, s.eng.Status(err)
		}
	}
	res.ParameterSchema = paramSchema(n, s.paramTypes(ctx, h.SQL))
	f := false
	res.IsUpdate = &f
	return res, nil
}

// paramSchema is the parameter schema of n placeholders typed by types
// (by bind name, v1...); an untyped one is a string.
func paramSchema(n int, types map[string]arrow.DataType) *arrow.Schema {
	fields := make([]arrow.Field, n)
	for i := range fields {
		t, ok := types["v"+strconv.Itoa(i+1)]
		if !ok {
			t = arrow.BinaryTypes.String
		}
		fields[i] = arrow.Field{Name: "parameter_" + strconv.Itoa(i+1), Type: t, Nullable: true}
	}
	return arrow.NewSchema(fields, nil)
}

// paramTypes guesses each placeholder's type from what it is compared
// with (x > ? takes x's type), so that JDBC clients, which bind values
// by the parameter schema, know what to send; a placeholder compared
// with nothing typed is a string (the engine converts it as needed).
func (s *Server) paramTypes(ctx context.Context, text string) map[string]arrow.DataType {
	out := map[string]arrow.DataType{}
	sctx, err := s.newContext(ctx)
	if err != nil {
		return out
	}
	if text, err = dialect.Rewrite(text); err != nil {
		return out
	}
	node, err := s.engine.PrepareQuery(sctx, text)
	if err != nil {
		return out
	}
	type binary interface {
		Left() gms.Expression
		Right() gms.Expression
	}
	note := func(bv, other gms.Expression) {
		b, ok := bv.(*expression.BindVar)
		if !ok || other == nil {
			return
		}
		if _, isBind := other.(*expression.BindVar); isBind {
			return
		}
		if _, seen := out[b.Name]; !seen && other.Resolved() {
			out[b.Name] = paramArrowType(other.Type())
		}
	}
	transform.InspectExpressions(node, func(e gms.Expression) bool {
		switch x := e.(type) {
		case *expression.Between:
			note(x.Lower, x.Val)
			note(x.Upper, x.Val)
		case binary:
			note(x.Left(), x.Right())
			note(x.Right(), x.Left())
			if tup, ok := x.Right().(expression.Tuple); ok {
				for _, el := range tup {
					note(el, x.Left())
				}
			}
		}
		return true
	})
	return out
}

// paramArrowType is the type a client should bind for a value compared
// with an engine type: integers as int64, floats as float64, the rest as
// strings.
func paramArrowType(t gms.Type) arrow.DataType {
	at := arrowType(t)
	switch {
	case arrow.IsInteger(at.ID()):
		return arrow.PrimitiveTypes.Int64
	case arrow.IsFloating(at.ID()), at.ID() == arrow.DECIMAL128:
		return arrow.PrimitiveTypes.Float64
	case at.ID() == arrow.BOOL:
		return arrow.FixedWidthTypes.Boolean
	}
	return arrow.BinaryTypes.String
}

// countParams counts the ? placeholders outside quotes.
func countParams(text string) int {
	n := 0
	var quote rune
	for _, r := range text {
		switch {
		case quote != 0:
			if r == quote {
				quote = 0
			}
		case r == '\'' || r == '"' || r == '`':
			quote = r
		case r == '?':
			n++
		}
	}
	return n
}

func (s *Server) ClosePreparedStatement(context.Context, flightsql.ActionClosePreparedStatementRequest) error {
	return nil // nothing is kept
}

// DoPutPreparedStatementQuery binds parameters: the new handle holds
// them.
func (s *Server) DoPutPreparedStatementQuery(_ context.Context, cmd flightsql.PreparedStatementQuery, rdr aflight.MessageReader, _ aflight.MetadataWriter) ([]byte, error) {
	h, err := decodeHandle(cmd.GetPreparedStatementHandle())
	if err != nil {
		return nil, s.eng.Status(err)
	}
	if h.Params, err = readParams(rdr); err != nil {
		return nil, s.eng.Status(err)
	}
	return h.encode(), nil
}

// maxParamRows bounds the parameter rows bound to one statement.
const maxParamRows = 10000

// readParams reads the parameter rows of a DoPut (nil when it has none).
func readParams(rdr aflight.MessageReader) ([][]param, error) {
	var out [][]param
	for rdr.Next() {
		rec := rdr.RecordBatch()
		for r := 0; r < int(rec.NumRows()); r++ {
			row := make([]param, rec.NumCols())
			for c := 0; c < int(rec.NumCols()); c++ {
				p, err := paramOf(rec.Column(c), r)
				if err != nil {
					return nil, errkind.Errorf(errkind.InvalidArgument, "SQL parameter %d: %v", c+1, err)
				}
				row[c] = p
			}
			out = append(out, row)
			if len(out) > maxParamRows {
				return nil, errkind.Errorf(errkind.ResourceExhausted, "SQL: more than %d parameter rows bound to one statement", maxParamRows)
			}
		}
	}
	if err := rdr.Err(); err != nil && !errors.Is(err, io.EOF) {
		return nil, errkind.Errorf(errkind.InvalidArgument, "SQL parameters: %v", err)
	}
	return out, nil
}

// paramOf renders one bound value as a literal.
func paramOf(a arrow.Array, i int) (param, error) {
	if a.IsNull(i) {
		return param{Kind: "null"}, nil
	}
	switch c := a.(type) {
	case *arr.Int8, *arr.Int16, *arr.Int32, *arr.Int64:
		return param{Kind: "int", Val: c.ValueStr(i)}, nil
	case *arr.Uint8, *arr.Uint16, *arr.Uint32, *arr.Uint64:
		return param{Kind: "uint", Val: c.ValueStr(i)}, nil
	case *arr.Float32:
		return param{Kind: "float", Val: floatLit(float64(c.Value(i)), 32)}, nil
	case *arr.Float64:
		return param{Kind: "float", Val: floatLit(c.Value(i), 64)}, nil
	case *arr.Boolean:
		return param{Kind: "bool", Val: strconv.FormatBool(c.Value(i))}, nil
	case *arr.String:
		return param{Kind: "str", Val: c.Value(i)}, nil
	case *arr.LargeString:
		return param{Kind: "str", Val: c.Value(i)}, nil
	case *arr.StringView:
		return param{Kind: "str", Val: c.Value(i)}, nil
	case *arr.Binary:
		return param{Kind: "bytes", Val: fmt.Sprintf("%x", c.Value(i))}, nil
	case *arr.LargeBinary:
		return param{Kind: "bytes", Val: fmt.Sprintf("%x", c.Value(i))}, nil
	case *arr.Decimal128:
		return param{Kind: "decimal", Val: c.ValueStr(i)}, nil
	case *arr.Timestamp:
		unit := c.DataType().(*arrow.TimestampType).Unit
		return param{Kind: "str", Val: c.Value(i).ToTime(unit).UTC().Format("2006-01-02 15:04:05.999999")}, nil
	case *arr.Date32:
		return param{Kind: "str", Val: c.Value(i).ToTime().Format("2006-01-02")}, nil
	case *arr.DenseUnion:
		return paramOf(c.Field(c.ChildID(i)), int(c.ValueOffset(i)))
	case *arr.SparseUnion:
		return paramOf(c.Field(c.ChildID(i)), i)
	}
	return param{}, fmt.Errorf("values of type %s cannot be bound", a.DataType())
}

func floatLit(f float64, bits int) string {
	s := strconv.FormatFloat(f, 'e', -1, bits)
	return s
}

func (s *Server) GetFlightInfoPreparedStatement(ctx context.Context, cmd flightsql.PreparedStatementQuery, desc *aflight.FlightDescriptor) (*aflight.FlightInfo, error) {
	h, err := decodeHandle(cmd.GetPreparedStatementHandle())
	if err != nil {
		return nil, s.eng.Status(err)
	}
	if isInsert(h.SQL) {
		return s.updateInfo(ctx, h, desc)
	}
	return s.statementInfo(ctx, h, desc)
}

func (s *Server) GetSchemaPreparedStatement(ctx context.Context, cmd flightsql.PreparedStatementQuery, _ *aflight.FlightDescriptor) (*aflight.SchemaResult, error) {
	h, err := decodeHandle(cmd.GetPreparedStatementHandle())
	if err != nil {
		return nil, s.eng.Status(err)
	}
	if isInsert(h.SQL) {
		return s.updateSchema(ctx, h.SQL)
	}
	var ps []param
	if len(h.Params) > 0 {
		ps = h.Params[0]
	}
	c, err := s.compile(ctx, h.SQL, ps)
	if err != nil {
		return nil, s.eng.Status(err)
	}
	return &aflight.SchemaResult{Schema: aflight.SerializeSchema(c.schema, s.mem)}, nil
}

func (s *Server) DoGetPreparedStatement(ctx context.Context, cmd flightsql.PreparedStatementQuery) (*arrow.Schema, <-chan aflight.StreamChunk, error) {
	h, err := decodeHandle(cmd.GetPreparedStatementHandle())
	if err != nil {
		return nil, nil, s.eng.Status(err)
	}
	return s.stream(ctx, h)
}
