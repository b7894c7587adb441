package sqlsvc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	arr "github.com/apache/arrow-go/v18/arrow/array"
	aflight "github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/flight/flightsql"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/rs/zerolog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/tileflight/tileflight/flightsvc"
	"github.com/tileflight/tileflight/format/schema"
	"github.com/tileflight/tileflight/mux"
	"github.com/tileflight/tileflight/sqlsvc/native"
	"github.com/tileflight/tileflight/storage"
	"github.com/tileflight/tileflight/writer"
)

// fixture: a 10x10 dense array "dense" (v = 10*x + y, w = x*y as float32)
// and a sparse array "g/pts" (k in 0..19 step 1, s = "s<k>", n nullable:
// null for odd k).
func serveSQL(t testing.TB, extra ...func(t testing.TB, mk func(name, js string), c aflight.Client)) (*flightsql.Client, aflight.Client) {
	t.Helper()
	sc, c, _ := serveSQLWith(t, nil, extra...)
	return sc, c
}

// bearer sends a token with every call (over plain TCP: tests only).
type bearer string

func (b bearer) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer " + string(b)}, nil
}

func (bearer) RequireTransportSecurity() bool { return false }

// testMemory, when set, is the -sql-memory of the servers serveSQLWith
// starts (the default otherwise).
var testMemory *int64

// serveSQLWith is serveSQL over a configuration that cfg may change (its
// Store wraps the in-memory store; with Tokens, the clients use the
// token "rw", which cfg must make read-write). It also returns the
// server's address.
func serveSQLWith(t testing.TB, cfg func(*flightsvc.Config), extra ...func(t testing.TB, mk func(name, js string), c aflight.Client)) (*flightsql.Client, aflight.Client, string) {
	t.Helper()
	ctx := context.Background()
	conf := flightsvc.Config{Store: storage.NewMem(), Log: zerolog.Nop()}
	if cfg != nil {
		cfg(&conf)
	}
	st := conf.Store
	mk := func(name, js string) {
		s, err := schema.FromJSON([]byte(js))
		if err != nil {
			t.Fatal(err)
		}
		if err := writer.CreateArray(ctx, st, name, s); err != nil {
			t.Fatal(err)
		}
	}
	mk("dense", `{"type":"dense","dimensions":[{"name":"x","type":"int32","domain":[0,9],"tile":5},{"name":"y","type":"int32","domain":[0,9],"tile":5}],
		"attributes":[{"name":"v","type":"float64"},{"name":"w","type":"float32"}]}`)
	mk("g/pts", `{"type":"sparse","dimensions":[{"name":"k","type":"int64","domain":[0,1000],"tile":10}],
		"attributes":[{"name":"s","type":"string_utf8","cell_val_num":"var"},{"name":"n","type":"int32","nullable":true}]}`)
	svc := flightsvc.NewService(conf)
	h, impl, err := New(native.New(svc), zerolog.Nop(), "test")
	if err != nil {
		t.Fatal(err)
	}
	if testMemory != nil {
		impl.SetMemory(*testMemory)
	}
	ul, sl := flightsvc.AccessLog(zerolog.Nop())
	ua, sa := flightsvc.AuthInterceptors(conf.Auth)
	srv := grpc.NewServer(grpc.ChainUnaryInterceptor(ul, ua), grpc.ChainStreamInterceptor(sl, sa))
	aflight.RegisterFlightServiceServer(srv, mux.New(svc, h))
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(lis)
	t.Cleanup(srv.Stop)
	opts := []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}
	if conf.Auth.Enabled() {
		opts = append(opts, grpc.WithPerRPCCredentials(bearer("rw")))
	}
	c, err := aflight.NewClientWithMiddleware(lis.Addr().String(), nil, nil, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	sc, err := flightsql.NewClient(lis.Addr().String(), nil, nil, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sc.Close() })

	// data through the JSON protocol's DoPut
	mem := memory.DefaultAllocator
	b := arr.NewRecordBuilder(mem, arrow.NewSchema([]arrow.Field{{Name: "v", Type: arrow.PrimitiveTypes.Float64}, {Name: "w", Type: arrow.PrimitiveTypes.Float32}}, nil))
	for x := 0; x < 10; x++ {
		for y := 0; y < 10; y++ {
			b.Field(0).(*arr.Float64Builder).Append(float64(10*x + y))
			b.Field(1).(*arr.Float32Builder).Append(float32(x * y))
		}
	}
	put(t, c, `{"array":"dense"}`, b.NewRecordBatch())
	b = arr.NewRecordBuilder(mem, arrow.NewSchema([]arrow.Field{{Name: "k", Type: arrow.PrimitiveTypes.Int64}, {Name: "s", Type: arrow.BinaryTypes.String}, {Name: "n", Type: arrow.PrimitiveTypes.Int32, Nullable: true}}, nil))
	for k := 0; k < 20; k++ {
		b.Field(0).(*arr.Int64Builder).Append(int64(k))
		b.Field(1).(*arr.StringBuilder).Append(fmt.Sprintf("s%d", k))
		if k%2 == 1 {
			b.Field(2).AppendNull()
		} else {
			b.Field(2).(*arr.Int32Builder).Append(int32(k * 3))
		}
	}
	put(t, c, `{"array":"g/pts"}`, b.NewRecordBatch())

	for _, x := range extra {
		x(t, mk, c)
	}
	return sc, c, lis.Addr().String()
}

func put(t testing.TB, c aflight.Client, cmd string, rec arrow.RecordBatch) {
	t.Helper()
	defer rec.Release()
	stream, err := c.DoPut(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	w := aflight.NewRecordWriter(stream)
	w.SetFlightDescriptor(&aflight.FlightDescriptor{Type: aflight.DescriptorCMD, Cmd: []byte(cmd)})
	if err := w.Write(rec); err != nil {
		t.Fatal(err)
	}
	w.Close()
	stream.CloseSend()
	if _, err := stream.Recv(); err != nil {
		t.Fatal(err)
	}
}

// rows runs a statement and renders its rows as strings, "|"-joined.
func rows(t testing.TB, c *flightsql.Client, q string) ([]string, *arrow.Schema, error) {
	t.Helper()
	ctx := context.Background()
	info, err := c.Execute(ctx, q)
	if err != nil {
		return nil, nil, err
	}
	var out []string
	var sc *arrow.Schema
	for _, ep := range info.Endpoint {
		rd, err := c.DoGet(ctx, ep.Ticket)
		if err != nil {
			return nil, nil, err
		}
		sc = rd.Schema()
		for rd.Next() {
			rec := rd.RecordBatch()
			for i := 0; i < int(rec.NumRows()); i++ {
				var cells []string
				for _, col := range rec.Columns() {
					cells = append(cells, col.ValueStr(i))
				}
				out = append(out, strings.Join(cells, "|"))
			}
		}
		if err := rd.Err(); err != nil && !errors.Is(err, io.EOF) {
			rd.Release()
			return nil, nil, err
		}
		rd.Release()
	}
	return out, sc, nil
}

func TestStatements(t *testing.T) {
	c, _ := serveSQL(t)
	cases := []struct {
		q      string
		want   string // rows joined by ";", sorted unless ordered
		sorted bool
	}{
		{q: `SELECT v FROM dense WHERE x = 3 AND y = 4`, want: "34"},
		{q: `SELECT x, y, v FROM main.dense WHERE x BETWEEN 2 AND 3 AND y IN (0, 9) ORDER BY v`, want: "2|0|20;2|9|29;3|0|30;3|9|39", sorted: true},
		{q: `SELECT count(*) FROM dense WHERE x > 7`, want: "20"},
		{q: `SELECT x, sum(v) AS s FROM dense WHERE y < 2 GROUP BY x HAVING s > 150 ORDER BY x`, want: "8|161;9|181", sorted: true},
		{q: `SELECT k, s FROM g.pts WHERE k >= 17`, want: "17|s17;18|s18;19|s19"},
		{q: `SELECT k, s FROM "g/pts" WHERE k < 2`, want: "0|s0;1|s1"},
		{q: `SELECT count(*), count(n), max(n) FROM g.pts`, want: "20|10|54"},
		{q: `SELECT k FROM g.pts WHERE n IS NULL AND k < 6`, want: "1;3;5"},
		{q: `SELECT p.k, d.v FROM g.pts p JOIN dense d ON d.x = 0 AND d.y = p.k WHERE p.k < 3`, want: "0|0;1|1;2|2"},
		{q: `SELECT x FROM dense WHERE x > 8.5 AND y = 0`, want: "9"},
		{q: `SELECT x FROM dense WHERE x = 2.5`, want: ""},
		{q: `SELECT v FROM dense WHERE x = 1 LIMIT 3`, want: "10;11;12"},
	}
	for _, tc := range cases {
		got, _, err := rows(t, c, tc.q)
		if err != nil {
			t.Errorf("%s: %v", tc.q, err)
			continue
		}
		if !tc.sorted {
			sort.Strings(got)
		}
		if g := strings.Join(got, ";"); g != tc.want {
			t.Errorf("%s:\n got %s\nwant %s", tc.q, g, tc.want)
		}
	}
}

func TestStatementErrors(t *testing.T) {
	c, _ := serveSQL(t)
	cases := []struct {
		q    string
		code codes.Code
		msg  string
	}{
		{`SELEC x FROM dense`, codes.InvalidArgument, "position"},
		{`SELECT x FROM dense WHERE`, codes.InvalidArgument, "position"},
		{`DELETE FROM dense`, codes.Unimplemented, "supported: one SELECT"},
		{`INSERT INTO dense VALUES (1)`, codes.Unimplemented, "bulk ingest"},
		{`CREATE TABLE t (a int)`, codes.Unimplemented, "supported"},
		{`SELECT * FROM nosuch`, codes.NotFound, "nosuch"},
		{`SELECT nosuch FROM dense`, codes.InvalidArgument, "nosuch"},
	}
	for _, tc := range cases {
		_, _, err := rows(t, c, tc.q)
		if status.Code(err) != tc.code || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("%s: %v, want %v with %q", tc.q, err, tc.code, tc.msg)
		}
	}
}

// EXPLAIN says what was pushed down into each scan.
func TestExplain(t *testing.T) {
	c, _ := serveSQL(t)
	cases := []struct{ q, want string }{
		{`EXPLAIN SELECT v FROM dense WHERE x = 3 LIMIT 2`, `whole statement is one native scan|scan {"array":"dense","columns":["v"],"subarray":{"x":[[3,3]]},"layout":"row-major","limit":2}`},
		{`EXPLAIN SELECT x, sum(v) FROM dense WHERE y BETWEEN 1 AND 2 AND v > 3 GROUP BY x`, `"subarray":{"y":[[1,2]]}`},
		{`EXPLAIN SELECT x FROM dense WHERE y > 7`, `"subarray":{"y":[[8,9]]}`},
		{`EXPLAIN SELECT x FROM dense WHERE x = 1 OR x = 5`, `"subarray":{"x":[[1,1],[5,5]]}`},
		{`EXPLAIN SELECT x FROM dense WHERE x > 8.5`, `"subarray":{"x":[[9,9]]}`},
		{`EXPLAIN SELECT k FROM g.pts WHERE k IN (3, 1, 2) AND n IS NULL`, `"subarray":{"k":[[1,3]]}`},
		{`EXPLAIN SELECT x FROM dense WHERE (x = 1 AND y = 2) OR (x = 3 AND y = 4)`, `"subarray":{"x":[[3,3]],"y":[[4,4]]}`},
		{`EXPLAIN SELECT x FROM dense WHERE x > 100`, `no cell`},
	}
	for _, tc := range cases {
		got, _, err := rows(t, c, tc.q)
		if err != nil {
			t.Fatal(err)
		}
		txt := strings.Join(got, "|")
		if !strings.Contains(txt, tc.want) {
			t.Errorf("%s: want %s in\n%s", tc.q, tc.want, strings.Join(got, "\n"))
		}
	}
}

// readAll reads every endpoint of info into rows of strings.
func readAll(t *testing.T, c *flightsql.Client, info *aflight.FlightInfo) []string {
	t.Helper()
	var out []string
	for _, ep := range info.Endpoint {
		rd, err := c.DoGet(context.Background(), ep.Ticket)
		if err != nil {
			t.Fatal(err)
		}
		for rd.Next() {
			rec := rd.RecordBatch()
			for i := 0; i < int(rec.NumRows()); i++ {
				var cells []string
				for _, col := range rec.Columns() {
					cells = append(cells, col.ValueStr(i))
				}
				out = append(out, strings.Join(cells, "|"))
			}
		}
		rd.Release()
	}
	return out
}

func TestCatalogCommands(t *testing.T) {
	c, _ := serveSQL(t)
	ctx := context.Background()
	info, err := c.GetCatalogs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, c, info); strings.Join(got, ";") != "tileflight" {
		t.Errorf("catalogs %v", got)
	}
	info, err = c.GetDBSchemas(ctx, &flightsql.GetDBSchemasOpts{})
	if err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, c, info); strings.Join(got, ";") != "tileflight|main;tileflight|g" {
		t.Errorf("schemas %v", got)
	}
	pat := "p%"
	info, err = c.GetTables(ctx, &flightsql.GetTablesOpts{TableNameFilterPattern: &pat, IncludeSchema: true})
	if err != nil {
		t.Fatal(err)
	}
	got := readAll(t, c, info)
	if len(got) != 1 || !strings.HasPrefix(got[0], "tileflight|g|pts|ARRAY|") {
		t.Errorf("tables %v", got)
	}
	info, err = c.GetTableTypes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, c, info); strings.Join(got, ";") != "ARRAY;B2ND" {
		t.Errorf("table types %v", got)
	}
	main := "main"
	info, err = c.GetPrimaryKeys(ctx, flightsql.TableRef{DBSchema: &main, Table: "dense"})
	if err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, c, info); strings.Join(got, ";") != "tileflight|main|dense|x|1|dimensions;tileflight|main|dense|y|2|dimensions" {
		t.Errorf("primary keys %v", got)
	}
	info, err = c.GetXdbcTypeInfo(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, c, info); len(got) != len(xdbcTypes) {
		t.Errorf("type info %v", got)
	}
	info, err = c.GetSqlInfo(ctx, []flightsql.SqlInfo{flightsql.SqlInfoFlightSqlServerName, flightsql.SqlInfoIdentifierQuoteChar})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(readAll(t, c, info), ";"); !strings.Contains(got, "tileflight") || !strings.Contains(got, `"`) {
		t.Errorf("sql info %v", got)
	}
}

func TestPreparedWithParameters(t *testing.T) {
	c, _ := serveSQL(t)
	ctx := context.Background()
	ps, err := c.Prepare(ctx, `SELECT k, s FROM g.pts WHERE k > ? AND s <> ?`)
	if err != nil {
		t.Fatal(err)
	}
	defer ps.Close(ctx)
	if n := ps.ParameterSchema().NumFields(); n != 2 {
		t.Fatalf("parameter schema %v", ps.ParameterSchema())
	}
	b := arr.NewRecordBuilder(memory.DefaultAllocator, arrow.NewSchema([]arrow.Field{
		{Name: "p1", Type: arrow.PrimitiveTypes.Int64}, {Name: "p2", Type: arrow.BinaryTypes.String}}, nil))
	b.Field(0).(*arr.Int64Builder).Append(16)
	b.Field(1).(*arr.StringBuilder).Append("s18")
	rec := b.NewRecordBatch()
	defer rec.Release()
	ps.SetParameters(rec)
	info, err := ps.Execute(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := readAll(t, c, info)
	sort.Strings(got)
	if strings.Join(got, ";") != "17|s17;19|s19" {
		t.Errorf("got %v", got)
	}
}

func TestIngest(t *testing.T) {
	c, _ := serveSQL(t)
	ctx := context.Background()
	main := "g"
	b := arr.NewRecordBuilder(memory.DefaultAllocator, arrow.NewSchema([]arrow.Field{
		{Name: "k", Type: arrow.PrimitiveTypes.Int64}, {Name: "s", Type: arrow.BinaryTypes.String}, {Name: "n", Type: arrow.PrimitiveTypes.Int32, Nullable: true}}, nil))
	b.Field(0).(*arr.Int64Builder).AppendValues([]int64{100, 101}, nil)
	b.Field(1).(*arr.StringBuilder).AppendValues([]string{"a", "b"}, nil)
	b.Field(2).(*arr.Int32Builder).AppendValues([]int32{1, 2}, nil)
	rec := b.NewRecordBatch()
	defer rec.Release()
	rdr, err := arr.NewRecordReader(rec.Schema(), []arrow.RecordBatch{rec})
	if err != nil {
		t.Fatal(err)
	}
	n, err := c.ExecuteIngest(ctx, rdr, &flightsql.ExecuteIngestOpts{
		TableDefinitionOptions: &flightsql.TableDefinitionOptions{
			IfNotExist: flightsql.TableDefinitionOptionsTableNotExistOptionFail,
			IfExists:   flightsql.TableDefinitionOptionsTableExistsOptionAppend},
		Table: "pts", Schema: &main})
	if err != nil || n != 2 {
		t.Fatalf("ingest: %d %v", n, err)
	}
	got, _, err := rows(t, c, `SELECT k, s FROM g.pts WHERE k >= 100`)
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(got)
	if strings.Join(got, ";") != "100|a;101|b" {
		t.Errorf("got %v", got)
	}
	rdr, _ = arr.NewRecordReader(rec.Schema(), []arrow.RecordBatch{rec})
	_, err = c.ExecuteIngest(ctx, rdr, &flightsql.ExecuteIngestOpts{Table: "nosuch", Schema: &main,
		TableDefinitionOptions: &flightsql.TableDefinitionOptions{IfNotExist: flightsql.TableDefinitionOptionsTableNotExistOptionFail}})
	if status.Code(err) != codes.NotFound {
		t.Errorf("ingest into a missing array: %v", err)
	}
}

// A statement that is a pure scan of a large result gets one endpoint per
// part, as the native GetFlightInfo splits it (4 Mi rows each); their
// results together are the scan's. Statements the engine runs, and scans
// with a LIMIT, keep one endpoint. A ticket whose part is not part of its
// statement's scan is refused.
func TestStatementEndpointsSplitScans(t *testing.T) {
	const cells = 8 << 20
	sc, c := serveSQL(t, func(t testing.TB, mk func(name, js string), c aflight.Client) {
		mk("big", fmt.Sprintf(`{"type":"dense","dimensions":[{"name":"x","type":"int64","domain":[0,%d],"tile":1048576}],
			"attributes":[{"name":"v","type":"int8"}]}`, cells-1))
		stream, err := c.DoPut(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		w := aflight.NewRecordWriter(stream, ipc.WithSchema(arrow.NewSchema([]arrow.Field{{Name: "v", Type: arrow.PrimitiveTypes.Int8}}, nil)))
		w.SetFlightDescriptor(&aflight.FlightDescriptor{Type: aflight.DescriptorCMD, Cmd: []byte(`{"array":"big"}`)})
		for part := 0; part < 8; part++ {
			b := arr.NewInt8Builder(memory.DefaultAllocator)
			for i := 0; i < cells/8; i++ {
				b.Append(int8((part*cells/8 + i) % 7))
			}
			a := b.NewArray()
			rec := arr.NewRecordBatch(arrow.NewSchema([]arrow.Field{{Name: "v", Type: arrow.PrimitiveTypes.Int8}}, nil), []arrow.Array{a}, int64(a.Len()))
			if err := w.Write(rec); err != nil {
				t.Fatal(err)
			}
			rec.Release()
			a.Release()
		}
		w.Close()
		stream.CloseSend()
		if _, err := stream.Recv(); err != nil {
			t.Fatal(err)
		}
	})
	ctx := context.Background()
	wantSum := int64(0)
	for i := 0; i < cells; i++ {
		wantSum += int64(i % 7)
	}
	for _, tc := range []struct {
		sql       string
		endpoints int
		rows      int64
	}{
		{"SELECT v FROM big", 2, cells},
		{"SELECT x AS pos, v FROM big", 2, cells},
		{"SELECT v FROM big LIMIT 5", 1, 5},
		{"SELECT v FROM big WHERE x < 1000", 1, 1000},
		{"SELECT v + 1 AS w FROM big WHERE x < 10", 1, 10},
	} {
		info, err := sc.Execute(ctx, tc.sql)
		if err != nil {
			t.Fatalf("%s: %v", tc.sql, err)
		}
		if len(info.Endpoint) != tc.endpoints {
			t.Fatalf("%s: %d endpoints, want %d", tc.sql, len(info.Endpoint), tc.endpoints)
		}
		var n, sum int64
		for _, ep := range info.Endpoint {
			rd, err := sc.DoGet(ctx, ep.Ticket)
			if err != nil {
				t.Fatalf("%s: %v", tc.sql, err)
			}
			for rd.Next() {
				rec := rd.RecordBatch()
				n += rec.NumRows()
				col := rec.Column(int(rec.NumCols()) - 1)
				if v, ok := col.(*arr.Int8); ok {
					for i := 0; i < v.Len(); i++ {
						sum += int64(v.Value(i))
					}
				}
			}
			if err := rd.Err(); err != nil {
				t.Fatalf("%s: %v", tc.sql, err)
			}
			rd.Release()
		}
		if n != tc.rows {
			t.Fatalf("%s: %d rows, want %d", tc.sql, n, tc.rows)
		}
		if tc.rows == cells && sum != wantSum {
			t.Fatalf("%s: sum %d, want %d", tc.sql, sum, wantSum)
		}
	}

	// A ticket whose part reads another array, or other columns.
	for _, part := range []string{`{"array":"dense"}`, `{"array":"big","columns":["x"]}`} {
		h := &handle{SQL: "SELECT v FROM big", Part: []byte(part)}
		tk, err := flightsql.CreateStatementQueryTicket(h.encode())
		if err != nil {
			t.Fatal(err)
		}
		rd, err := sc.DoGet(ctx, &aflight.Ticket{Ticket: tk})
		if err == nil {
			for rd.Next() {
			}
			err = rd.Err()
			rd.Release()
		}
		if status.Code(err) != codes.InvalidArgument {
			t.Fatalf("part %s: %v, want InvalidArgument", part, err)
		}
	}
	_ = c
}

type statementQuery string

func (q statementQuery) GetQuery() string         { return string(q) }
func (q statementQuery) GetTransactionId() []byte { return nil }

// In a cluster, a statement's endpoints name the nodes that can serve them,
// as the native GetFlightInfo's do.
func TestStatementEndpointsHaveClusterLocations(t *testing.T) {
	ctx := context.Background()
	st := storage.NewMem()
	s, err := schema.FromJSON([]byte(`{"type":"sparse","dimensions":[{"name":"k","type":"int64","domain":[0,1000],"tile":10}],
		"attributes":[{"name":"n","type":"int32"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if err := writer.CreateArray(ctx, st, "pts", s); err != nil {
		t.Fatal(err)
	}
	self := "grpc://127.0.0.1:1"
	cl, err := flightsvc.NewCluster(self, nil, time.Second, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	svc := flightsvc.NewService(flightsvc.Config{Store: st, Log: zerolog.Nop(), Cluster: cl})
	_, h, err := New(native.New(svc), zerolog.Nop(), "test")
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{"SELECT k, n FROM pts", "SELECT count(*) FROM pts GROUP BY n"} {
		info, err := h.GetFlightInfoStatement(ctx, statementQuery(q), &aflight.FlightDescriptor{Type: aflight.DescriptorCMD})
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		for _, ep := range info.Endpoint {
			if len(ep.Location) != 1 || ep.Location[0].Uri != self {
				t.Fatalf("%s: endpoint locations %v, want [%s]", q, ep.Location, self)
			}
		}
	}
}
