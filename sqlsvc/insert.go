package sqlsvc

// INSERT statements: INSERT INTO t [(columns)] VALUES (...), ... or
// INSERT INTO t [(columns)] SELECT ... writes rows into a sparse array
// through the service's write core, exactly as one DoPut of those rows
// would: the same casts (a value that does not convert exactly is
// InvalidArgument), fragments cut as the rows stream in, and one commit
// at the end, so that the whole statement is visible at once or not at
// all. The rows come from the SQL engine: VALUES is planned as a VALUES
// table, SELECT as any statement (pushed-down scans, the same array or
// others), and their batches are streamed into the writer.
//
// Every dimension must be given; an attribute left out of the column list
// is written as null when it is nullable, and is an error otherwise (a
// TileDB write sets every attribute of a cell, and a non-nullable one has
// no default). Dense arrays and .b2nd files are not written by INSERT: a
// row cannot say which subarray it fills.

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"unicode"

	"github.com/apache/arrow-go/v18/arrow"
	arr "github.com/apache/arrow-go/v18/arrow/array"
	aflight "github.com/apache/arrow-go/v18/arrow/flight"
	gms "github.com/dolthub/go-mysql-server/sql"
	"github.com/dolthub/go-mysql-server/sql/plan"
	"github.com/dolthub/go-mysql-server/sql/transform"
	"github.com/dolthub/vitess/go/vt/sqlparser"

	"github.com/tileflight/tileflight/calls"
	"github.com/tileflight/tileflight/errkind"
	"github.com/tileflight/tileflight/sqlsvc/tables"
)

// isInsert says whether a statement's first word (after comments and
// opening parentheses) is INSERT, so that it runs as an update.
func isInsert(text string) bool {
	t := text
	for {
		t = strings.TrimLeftFunc(t, func(r rune) bool { return unicode.IsSpace(r) || r == '(' })
		switch {
		case strings.HasPrefix(t, "/*"):
			i := strings.Index(t[2:], "*/")
			if i < 0 {
				return false
			}
			t = t[2+i+2:]
			continue
		case strings.HasPrefix(t, "--"), strings.HasPrefix(t, "#"):
			i := strings.IndexByte(t, '\n')
			if i < 0 {
				return false
			}
			t = t[i+1:]
			continue
		}
		break
	}
	return len(t) >= 6 && strings.EqualFold(t[:6], "insert") && (len(t) == 6 || !isWordByte(t[6]))
}

func isWordByte(b byte) bool {
	return b == '_' || b >= '0' && b <= '9' || b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z'
}

// insertPlan is an INSERT resolved against its target array.
type insertPlan struct {
	t *table
	// cols are, for each column of the source rows, the index of the
	// array column (into t.arrow) it fills.
	cols []int
	// source gives the rows: the SELECT, or a SELECT over the VALUES.
	source sqlparser.SelectStatement
	// values are the VALUES rows (nil for INSERT ... SELECT).
	values sqlparser.Values
}

// planInsert parses an INSERT and checks it against its target: the
// array exists, is sparse, and the columns name every dimension and every
// non-nullable attribute once. Nothing is read or written.
func (s *Server) planInsert(ctx context.Context, text string) (p *insertPlan, err error) {
	defer s.planPanic(text, &err)
	sctx, stmt, err := s.parseIn(ctx, text)
	if err != nil {
		return nil, err
	}
	ins, ok := stmt.(*sqlparser.Insert)
	if !ok {
		return nil, errkind.Errorf(errkind.InvalidArgument, "not an INSERT statement: %q", truncate(text))
	}
	switch {
	case ins.Action == sqlparser.ReplaceStr:
		return nil, errkind.Errorf(errkind.Unimplemented, "REPLACE is not supported: use INSERT (in a sparse array without duplicates a newer cell at the same coordinates replaces the older one); %s", Supported)
	case ins.Ignore != "":
		return nil, errkind.Errorf(errkind.Unimplemented, "INSERT IGNORE is not supported: an INSERT writes all its rows or none; %s", Supported)
	case len(ins.OnDup) > 0:
		return nil, errkind.Errorf(errkind.Unimplemented, "INSERT ... ON DUPLICATE KEY UPDATE is not supported; %s", Supported)
	case ins.With != nil:
		return nil, errkind.Errorf(errkind.Unimplemented, "WITH ... INSERT is not supported: write the common table expression inside the INSERT's SELECT; %s", Supported)
	case len(ins.Returning) > 0:
		return nil, errkind.Errorf(errkind.Unimplemented, "INSERT ... RETURNING is not supported; %s", Supported)
	case len(ins.Partitions) > 0:
		return nil, errkind.Errorf(errkind.Unimplemented, "INSERT ... PARTITION is not supported; %s", Supported)
	}
	t, err := s.insertTarget(sctx, ins.Table)
	if err != nil {
		return nil, err
	}
	if t.arr.B2ND {
		return nil, errkind.Errorf(errkind.Unimplemented, "INSERT into .b2nd table %q: an INSERT's rows cannot say which part of the NDArray they fill; write it with DoPut and a subarray", t.path)
	}
	if t.arr.Dense {
		return nil, errkind.Errorf(errkind.Unimplemented, "INSERT into dense array %q: a dense write fills a subarray, which an INSERT cannot name; write it with DoPut and a subarray, or with bulk ingest of every cell of the domain (ADBC adbc_ingest)", t.path)
	}
	p = &insertPlan{t: t}
	if p.cols, err = insertColumns(t, ins.Columns); err != nil {
		return nil, err
	}
	switch r := ins.Rows.(type) {
	case sqlparser.Values:
		p.values = r
	case *sqlparser.AliasedValues:
		p.values = r.Values
	case sqlparser.SelectStatement:
		p.source = r
	default:
		return nil, errkind.Errorf(errkind.Unimplemented, "INSERT rows given as %T; %s", ins.Rows, Supported)
	}
	if p.values != nil {
		for i, row := range p.values {
			if len(row) != len(p.cols) {
				return nil, errkind.Errorf(errkind.InvalidArgument, "INSERT into %q: row %d has %d values for %d columns", t.path, i+1, len(row), len(p.cols))
			}
		}
		p.source = valuesSelect(p.values)
	}
	return p, nil
}

// valuesSelect is SELECT * FROM (VALUES ROW(...), ...): the engine
// evaluates the expressions and gives each column one type.
func valuesSelect(rows sqlparser.Values) sqlparser.SelectStatement {
	return &sqlparser.Select{
		SelectExprs: sqlparser.SelectExprs{&sqlparser.StarExpr{}},
		From: sqlparser.TableExprs{&sqlparser.AliasedTableExpr{
			Expr: &sqlparser.ValuesStatement{Rows: rows},
			As:   sqlparser.NewTableIdent("insert_values"),
		}},
	}
}

// insertTarget finds the table an INSERT writes into, as a SELECT finds
// its tables.
func (s *Server) insertTarget(sctx *gms.Context, tn sqlparser.TableName) (*table, error) {
	db := tn.DbQualifier.String()
	if db == "" {
		db = mainSchema
	}
	name := tn.Name.String()
	d, err := (&provider{srv: s}).Database(sctx, db)
	if err != nil {
		return nil, engineErr(err)
	}
	gt, ok, err := d.GetTableInsensitive(sctx, name)
	if err != nil {
		return nil, engineErr(err)
	}
	t, isOurs := gt.(*table)
	if !ok || !isOurs {
		if db != mainSchema {
			name = db + "." + name
		}
		return nil, notFoundTable(name)
	}
	return t, nil
}

// insertColumns maps an INSERT's column list (all columns when empty) to
// the array's columns and checks that no required one is missing.
func insertColumns(t *table, list sqlparser.Columns) ([]int, error) {
	fields := t.arrow.Fields()
	var cols []int
	if len(list) == 0 {
		for k := range fields {
			cols = append(cols, k)
		}
		return cols, nil
	}
	given := make([]bool, len(fields))
	for _, c := range list {
		name := c.String()
		k := -1
		for i, f := range fields {
			if f.Name == name {
				k = i
				break
			}
			if k < 0 && strings.EqualFold(f.Name, name) {
				k = i
			}
		}
		if k < 0 {
			return nil, errkind.Errorf(errkind.InvalidArgument, "INSERT into %q: no column %q (columns: %s)", t.path, name, strings.Join(fieldNames(fields), ", "))
		}
		if given[k] {
			return nil, errkind.Errorf(errkind.InvalidArgument, "INSERT into %q: column %q is named twice", t.path, fields[k].Name)
		}
		given[k] = true
		cols = append(cols, k)
	}
	for k, f := range fields {
		switch {
		case given[k] || f.Nullable && !isDimension(f):
		case isDimension(f):
			return nil, errkind.Errorf(errkind.InvalidArgument, "INSERT into %q: dimension %q is missing: every cell of a sparse array needs all its coordinates", t.path, f.Name)
		default:
			return nil, errkind.Errorf(errkind.InvalidArgument, "INSERT into %q: attribute %q is missing and is not nullable: a TileDB write sets every attribute of a cell (only nullable attributes may be left out; they are written as null)", t.path, f.Name)
		}
	}
	return cols, nil
}

func fieldNames(fs []arrow.Field) []string {
	out := make([]string, len(fs))
	for i, f := range fs {
		out[i] = f.Name
	}
	return out
}

// insertParamSchema types an INSERT's ? placeholders for clients that
// bind by the parameter schema: a placeholder that is a value of a VALUES
// row takes its column's type; others are typed by what they are
// compared with in the SELECT, as in a query.
func (s *Server) insertParamSchema(ctx context.Context, p *insertPlan, n int) map[string]arrow.DataType {
	out := s.paramTypes(ctx, sqlparser.String(p.source))
	for _, row := range p.values {
		for j, e := range row {
			if v, ok := e.(*sqlparser.SQLVal); ok && v.Type == sqlparser.ValArg {
				out[strings.TrimPrefix(string(v.Val), ":")] = paramArrowType(p.t.full[p.cols[j]].Type)
			}
		}
	}
	return out
}

// bindValues puts parameter rows into an INSERT ... VALUES whose
// placeholders are all whole values (VALUES (?, ?)): the result is one
// VALUES list of every parameter row's rows, planned once. ok is false
// when a placeholder sits inside an expression (then the statement runs
// once per parameter row).
func bindValues(values sqlparser.Values, params [][]param) (sqlparser.Values, bool) {
	var out sqlparser.Values
	for _, ps := range params {
		for _, row := range values {
			nr := make(sqlparser.ValTuple, len(row))
			for j, e := range row {
				nr[j] = e
				if v, ok := e.(*sqlparser.SQLVal); ok && v.Type == sqlparser.ValArg {
					i, err := strconv.Atoi(strings.TrimPrefix(string(v.Val), ":v"))
					if err != nil || i < 1 || i > len(ps) {
						return nil, false
					}
					nr[j] = ps[i-1].expr()
					continue
				}
				nested := false
				_ = sqlparser.Walk(func(n sqlparser.SQLNode) (bool, error) {
					if v, ok := n.(*sqlparser.SQLVal); ok && v.Type == sqlparser.ValArg {
						nested = true
					}
					return !nested, nil
				}, e)
				if nested {
					return nil, false
				}
			}
			out = append(out, nr)
		}
	}
	return out, true
}

// update runs a statement sent as an update (CommandStatementUpdate, a
// prepared statement's update, or an INSERT sent as a query) with its
// parameter rows and returns the rows it wrote.
func (s *Server) update(ctx context.Context, text string, params [][]param) (n int64, err error) {
	calls.From(ctx).SetSQL(text)
	ctx, cancel := s.bounded(withBudget(ctx, s.memory)) // an INSERT ... SELECT sorts and joins as a query does
	defer cancel()
	defer func() { err = timedOut(ctx, err) }()
	if !isInsert(text) {
		if _, err := s.compile(ctx, text, nil); err != nil {
			return 0, err
		}
		return 0, errkind.Errorf(errkind.InvalidArgument, "a query is not an update: run it with CommandStatementQuery (JDBC executeQuery, ADBC cursor.execute); the updates supported are INSERT INTO sparse_array [(columns)] VALUES ... | SELECT ...")
	}
	if err := s.eng.RequireWrite(ctx, "INSERT"); err != nil {
		return 0, err
	}
	p, err := s.planInsert(ctx, text)
	if err != nil {
		return 0, err
	}
	release, err := s.eng.AcquireStream(ctx)
	if err != nil {
		return 0, err
	}
	defer release()
	src, err := s.insertRows(ctx, p, params)
	if err != nil {
		return 0, err
	}
	defer src.close()
	rows, err := s.eng.Write(ctx, p.t.path, src)
	if err != nil {
		return 0, fmt.Errorf("INSERT: %w", err)
	}
	return rows, nil
}

// insertSource is an INSERT's rows as the write core reads them: the
// source statement's batches, their columns named and cast for the
// array, the attributes left out added as nulls.
type insertSource struct {
	s      *Server
	p      *insertPlan
	ctx    context.Context
	cancel context.CancelFunc
	ch     <-chan aflight.StreamChunk
	sc     *arrow.Schema
	afs    []tables.Column // per array column
	cur    arrow.RecordBatch
	err    error
}

// insertRows plans the INSERT's source (once per parameter row unless
// the rows bind into one VALUES list) and starts streaming it.
func (s *Server) insertRows(ctx context.Context, p *insertPlan, params [][]param) (*insertSource, error) {
	rows := params
	source := p.source
	if len(rows) > 0 && p.values != nil {
		if vs, ok := bindValues(p.values, rows); ok {
			source, rows = valuesSelect(vs), nil
		}
	}
	if len(rows) == 0 {
		rows = [][]param{nil}
	}
	text := sqlparser.String(source)
	check := func(i int, c *compiled) error {
		if n := len(c.schema.Fields()); n != len(p.cols) {
			return errkind.Errorf(errkind.InvalidArgument, "INSERT into %q: %d columns to fill but the SELECT gives %d", p.t.path, len(p.cols), n)
		}
		return nil
	}
	first, err := s.compile(ctx, text, rows[0])
	if err == nil {
		err = check(0, first)
	}
	if err != nil {
		return nil, err
	}
	fields := p.t.arrow.Fields()
	src := &insertSource{s: s, p: p, sc: p.t.arrow, afs: make([]tables.Column, len(fields))}
	for k, f := range fields {
		src.afs[k], _ = p.t.arr.Column(f.Name)
	}
	src.ctx, src.cancel = context.WithCancel(ctx)
	ch := make(chan aflight.StreamChunk, 2)
	src.ch = ch
	run := func(ctx context.Context, c *compiled, ch chan<- aflight.StreamChunk) error {
		return s.runInsert(ctx, p, src.afs, c, ch)
	}
	go s.runAll(src.ctx, text, rows, first, check, run, func(err error) error { return err }, ch)
	return src, nil
}

// Schema is every column of the array with its own Arrow type (each
// batch may carry another type the write core converts exactly).
func (r *insertSource) Schema() *arrow.Schema { return r.sc }

func (r *insertSource) Next() bool {
	if r.cur != nil {
		r.cur.Release()
		r.cur = nil
	}
	for r.err == nil {
		var c aflight.StreamChunk
		var more bool
		select {
		case c, more = <-r.ch:
		case <-r.ctx.Done():
			r.err = r.ctx.Err()
			return false
		}
		if !more {
			return false
		}
		if c.Err != nil {
			r.err = c.Err
			return false
		}
		if c.Data.NumRows() == 0 {
			c.Data.Release()
			continue
		}
		r.cur, r.err = r.convert(c.Data)
		c.Data.Release()
		return r.err == nil
	}
	return false
}

func (r *insertSource) RecordBatch() arrow.RecordBatch { return r.cur }

func (r *insertSource) Err() error { return r.err }

// close stops the source statement and drops what it had sent.
func (r *insertSource) close() {
	if r.cur != nil {
		r.cur.Release()
		r.cur = nil
	}
	r.cancel()
	for c := range r.ch {
		if c.Data != nil {
			c.Data.Release()
		}
	}
}

// convert makes a source batch a batch of the array's columns.
func (r *insertSource) convert(rec arrow.RecordBatch) (arrow.RecordBatch, error) {
	fields := r.sc.Fields()
	n := int(rec.NumRows())
	cols := make([]arrow.Array, len(fields))
	defer func() {
		for _, c := range cols {
			if c != nil {
				c.Release()
			}
		}
	}()
	for i, k := range r.p.cols {
		cols[k] = r.s.insertColumn(rec.Column(i), fields[k].Type)
	}
	out := make([]arrow.Field, len(fields))
	for k, f := range fields {
		if cols[k] == nil {
			cols[k] = arr.MakeArrayOfNull(r.s.mem, f.Type, n)
		}
		out[k] = arrow.Field{Name: f.Name, Type: cols[k].DataType(), Nullable: f.Nullable}
	}
	return arr.NewRecordBatch(arrow.NewSchema(out, nil), cols, int64(n)), nil
}

// insertColumn is a source column as the write core takes it: a scan's
// columns have the array's own types, the engine's values were converted
// (insertvals.go); a column of nothing but NULL (a NULL literal the engine
// types as NULL) becomes nulls of the field's type.
func (s *Server) insertColumn(c arrow.Array, want arrow.DataType) arrow.Array {
	if c.DataType().ID() == arrow.NULL {
		return arr.MakeArrayOfNull(s.mem, want, c.Len())
	}
	c.Retain()
	return c
}

// runInsert runs one compiled source of an INSERT and sends its rows to
// ch: a pure scan's batches as they are, the engine's rows (or the VALUES
// expressions, evaluated one by one) converted for the array's columns.
func (s *Server) runInsert(ctx context.Context, p *insertPlan, afs []tables.Column, c *compiled, ch chan<- aflight.StreamChunk) error {
	if c.scan != nil {
		return s.run(ctx, c, ch)
	}
	fields := p.t.arrow.Fields()
	var cols []*valueColumn
	row := int64(0)
	newCols := func() error {
		cols = make([]*valueColumn, len(p.cols))
		for i, k := range p.cols {
			vc, err := newValueColumn(s.mem, afs[k])
			if err != nil {
				return fmt.Errorf("INSERT into %q: %w", p.t.path, err)
			}
			cols[i] = vc
		}
		return nil
	}
	release := func() {
		for _, vc := range cols {
			vc.b.Release()
		}
	}
	if err := newCols(); err != nil {
		return err
	}
	defer func() { release() }()
	n := 0
	flush := func() error {
		arrs := make([]arrow.Array, len(cols))
		fs := make([]arrow.Field, len(cols))
		for i, vc := range cols {
			arrs[i] = vc.b.NewArray()
			fs[i] = arrow.Field{Name: fields[p.cols[i]].Name, Type: arrs[i].DataType(), Nullable: true}
		}
		rec := arr.NewRecordBatch(arrow.NewSchema(fs, nil), arrs, int64(n))
		for _, a := range arrs {
			a.Release()
		}
		n = 0
		return sendChunk(ctx, ch, rec)
	}
	add := func(vals []any) error {
		for i, vc := range cols {
			var v any
			if i < len(vals) {
				v = vals[i]
			}
			if err := vc.add(v); err != nil {
				return errkind.Errorf(errkind.InvalidArgument, "INSERT into %q: column %q: row %d: %v", p.t.path, fields[p.cols[i]].Name, row, err)
			}
		}
		row++
		n++
		if n == maxBatchRows {
			return flush()
		}
		return nil
	}
	if vdt := valuesTable(c.node); p.values != nil && vdt != nil {
		// The VALUES table converts every value to its first row's type
		// (saturating integers): evaluate the expressions instead.
		vals := make([]any, len(p.cols))
		for _, tuple := range vdt.ExpressionTuples {
			for j, e := range tuple {
				v, err := e.Eval(c.sctx, nil)
				if err != nil {
					return engineErr(err)
				}
				vals[j] = v
			}
			if err := add(vals); err != nil {
				return err
			}
		}
	} else if err := s.engineRows(c, func(r gms.Row) error { return add(r) }); err != nil {
		return err
	}
	if n > 0 {
		return flush()
	}
	return nil
}

// valuesTable finds the VALUES table of a plan.
func valuesTable(n gms.Node) *plan.ValueDerivedTable {
	var out *plan.ValueDerivedTable
	transform.Inspect(n, func(n gms.Node) bool {
		if v, ok := n.(*plan.ValueDerivedTable); ok {
			out = v
			return false
		}
		return out == nil
	})
	return out
}
