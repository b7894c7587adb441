package sqlsvc

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	arr "github.com/apache/arrow-go/v18/arrow/array"
	aflight "github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/flight/flightsql"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/tileflight/tileflight/access"
	"github.com/tileflight/tileflight/flightsvc"
	"github.com/tileflight/tileflight/storage"
	"github.com/tileflight/tileflight/storage/errorfs"
)

// insertTarget adds "w/t": a sparse array without duplicates whose
// attributes cover the casts an INSERT makes (float32 from decimals,
// uint8 range checks, datetimes from strings, nullable and not), and
// "w/big": 1000 cells (k = 0..999, v = k) to insert from.
func insertArrays(t testing.TB, mk func(name, js string), c aflight.Client) {
	mk("w/t", `{"type":"sparse","dimensions":[{"name":"k","type":"int64","domain":[0,100000],"tile":100}],
		"attributes":[{"name":"f","type":"float32"},{"name":"u","type":"uint8","nullable":true},
		{"name":"ts","type":"datetime_ms","nullable":true},{"name":"s","type":"string_utf8","cell_val_num":"var","nullable":true}]}`)
	mk("w/big", `{"type":"sparse","dimensions":[{"name":"k","type":"int64","domain":[0,100000],"tile":100}],
		"attributes":[{"name":"v","type":"int64"}]}`)
	b := arr.NewRecordBuilder(memory.DefaultAllocator, arrow.NewSchema([]arrow.Field{{Name: "k", Type: arrow.PrimitiveTypes.Int64}, {Name: "v", Type: arrow.PrimitiveTypes.Int64}}, nil))
	for k := int64(0); k < 1000; k++ {
		b.Field(0).(*arr.Int64Builder).Append(k)
		b.Field(1).(*arr.Int64Builder).Append(k)
	}
	put(t, c, `{"array":"w/big"}`, b.NewRecordBatch())
}

// TestInsert: INSERT ... VALUES and INSERT ... SELECT (another array, the
// same array, column lists, omitted nullable attributes) write what a
// SELECT then reads, and return the rows written; bad statements are
// refused with the right code and nothing is written.
func TestInsert(t *testing.T) {
	cases := []struct {
		name  string
		sql   string
		n     int64  // rows written
		check string // a query whose rows, ";"-joined, must be want
		want  string
		code  codes.Code // the error, when not OK
		msg   string     // in the error's message
	}{
		{name: "values", sql: `INSERT INTO w.t VALUES (1, 0.5, 7, '2021-03-01 12:00:05', 'a'), (2, 1.25, NULL, NULL, 'b')`, n: 2,
			check: `SELECT k, f, u, ts, s FROM w.t ORDER BY k`, want: "1|0.5|7|2021-03-01T12:00:05|a;2|1.25|(null)|(null)|b"},
		{name: "column list, nullable left out", sql: `INSERT INTO w.t (f, k) VALUES (2.5, 3)`, n: 1,
			check: `SELECT * FROM w.t`, want: "3|2.5|(null)|(null)|(null)"},
		{name: "decimal to float32 rounds to nearest", sql: `INSERT INTO w.t (k, f) VALUES (4, 0.1)`, n: 1,
			check: `SELECT f = CAST(0.1 AS FLOAT) FROM w.t`, want: "true"},
		{name: "expressions and booleans", sql: `INSERT INTO w.t (k, f, u) VALUES (2 * 3, 1 + 1, TRUE)`, n: 1,
			check: `SELECT k, f, u FROM w.t`, want: "6|2|1"},
		{name: "select from another array", sql: `INSERT INTO w.t (k, f, u, s) SELECT k, k / 2, n, s FROM g.pts WHERE k < 6`, n: 6,
			check: `SELECT k, f, u, s FROM w.t ORDER BY k`, want: "0|0|0|s0;1|0.5|(null)|s1;2|1|6|s2;3|1.5|(null)|s3;4|2|12|s4;5|2.5|(null)|s5"},
		{name: "select from the same array", sql: `INSERT INTO g.pts SELECT k + 100, s, n FROM g.pts`, n: 20,
			check: `SELECT COUNT(*), MIN(k), MAX(k), SUM(n) FROM g.pts`, want: "40|0|119|540"},
		{name: "select with join, group by and order", sql: `INSERT INTO w.t (k, f, s) SELECT p.k, COUNT(*), MAX(p.s) FROM g.pts p JOIN w.big b ON b.k = p.k GROUP BY p.k ORDER BY p.k LIMIT 3`, n: 3,
			check: `SELECT k, f, s FROM w.t ORDER BY k`, want: "0|1|s0;1|1|s1;2|1|s2"},
		{name: "the dialect of docs/sql.md", sql: `INSERT INTO w.t (k, f, s) SELECT k::int + 10, k::double / 4, s || '!' FROM g.pts WHERE s ILIKE 'S1%' AND k < 12`, n: 3,
			check: `SELECT k, f, s FROM w.t ORDER BY k`, want: "11|0.25|s1!;20|2.5|s10!;21|2.75|s11!"},
		{name: "select of no rows", sql: `INSERT INTO w.t (k, f) SELECT k, v FROM w.big WHERE v < 0`, n: 0,
			check: `SELECT COUNT(*) FROM w.t`, want: "0"},
		// the engine's VALUES table would type the column int8 by its
		// first row and saturate 300 to 127
		{name: "values of growing width", sql: `INSERT INTO g.pts VALUES (500, 'a', 7), (501, 'b', 300), (502, 'c', -70000)`, n: 3,
			check: `SELECT k, n FROM g.pts WHERE k >= 500 ORDER BY k`, want: "500|7;501|300;502|-70000"},
		{name: "subquery in values", sql: `INSERT INTO w.t (k, f) VALUES ((SELECT MAX(k) FROM w.big) + 1, 1), (2, (SELECT COUNT(*) FROM g.pts))`, n: 2,
			check: `SELECT k, f FROM w.t ORDER BY k`, want: "2|20;1000|1"},
		{name: "quoted path and comment", sql: `/* c */ insert into "w/t" ("k", "f") values (9, 9)`, n: 1,
			check: `SELECT k, f FROM w.t`, want: "9|9"},

		{name: "value out of range", sql: `INSERT INTO w.t (k, f, u) VALUES (1, 1, 7), (2, 1, 256)`, code: codes.InvalidArgument, msg: `"u"`},
		{name: "fraction into an integer", sql: `INSERT INTO w.t (k, f) VALUES (1.5, 1)`, code: codes.InvalidArgument, msg: `"k"`},
		{name: "float64 not exact in float32", sql: `INSERT INTO w.t (k, f) SELECT k, v + 0.1e0 FROM w.big`, code: codes.InvalidArgument, msg: `"f"`},
		{name: "string into a number", sql: `INSERT INTO w.t (k, f) VALUES (1, 'x')`, code: codes.InvalidArgument, msg: `"f"`},
		{name: "not a datetime", sql: `INSERT INTO w.t (k, f, ts) VALUES (1, 1, 'soon')`, code: codes.InvalidArgument, msg: `"ts"`},
		{name: "null in a non-nullable attribute", sql: `INSERT INTO w.t (k, f) VALUES (1, NULL)`, code: codes.InvalidArgument, msg: `"f"`},
		{name: "outside the domain", sql: `INSERT INTO w.t (k, f) VALUES (-1, 1)`, code: codes.InvalidArgument, msg: "domain"},
		{name: "duplicate coordinates", sql: `INSERT INTO w.t (k, f) VALUES (1, 1), (1, 2)`, code: codes.InvalidArgument, msg: "duplicate"},
		{name: "missing non-nullable attribute", sql: `INSERT INTO w.t (k, u) VALUES (1, 1)`, code: codes.InvalidArgument, msg: `attribute "f" is missing`},
		{name: "missing dimension", sql: `INSERT INTO w.t (f) VALUES (1)`, code: codes.InvalidArgument, msg: `dimension "k" is missing`},
		{name: "unknown column", sql: `INSERT INTO w.t (k, f, zz) VALUES (1, 1, 1)`, code: codes.InvalidArgument, msg: `no column "zz"`},
		{name: "column twice", sql: `INSERT INTO w.t (k, f, k) VALUES (1, 1, 1)`, code: codes.InvalidArgument, msg: "twice"},
		{name: "row too short", sql: `INSERT INTO w.t (k, f) VALUES (1, 1), (2)`, code: codes.InvalidArgument, msg: "row 2"},
		{name: "select too narrow", sql: `INSERT INTO w.t (k, f) SELECT k FROM w.big`, code: codes.InvalidArgument, msg: "SELECT gives 1"},
		{name: "unknown table", sql: `INSERT INTO w.nope VALUES (1)`, code: codes.NotFound, msg: "nope"},
		{name: "select of an unknown table", sql: `INSERT INTO w.t (k, f) SELECT a, b FROM w.nope`, code: codes.NotFound, msg: "nope"},
		{name: "dense array", sql: `INSERT INTO main.dense VALUES (0, 0, 1, 1)`, code: codes.Unimplemented, msg: "DoPut and a subarray"},
		{name: "on duplicate key", sql: `INSERT INTO w.t (k, f) VALUES (1, 1) ON DUPLICATE KEY UPDATE f = 2`, code: codes.Unimplemented, msg: "DUPLICATE"},
		{name: "replace", sql: `REPLACE INTO w.t (k, f) VALUES (1, 1)`, code: codes.Unimplemented, msg: "REPLACE"},
		{name: "with insert", sql: `WITH x AS (SELECT 1 AS k) INSERT INTO w.t (k, f) SELECT k, k FROM x`, code: codes.Unimplemented, msg: "WITH"},
		{name: "insert with a CTE in its select", sql: `INSERT INTO w.t (k, f) WITH x AS (SELECT k FROM w.big WHERE k < 3) SELECT k, k FROM x`, n: 3,
			check: `SELECT k, f FROM w.t ORDER BY k`, want: "0|0;1|1;2|2"},
		{name: "explain insert", sql: `EXPLAIN INSERT INTO w.t (k, f) VALUES (1, 1)`, code: codes.Unimplemented, msg: "EXPLAIN"},
		{name: "update", sql: `UPDATE w.t SET f = 1`, code: codes.Unimplemented, msg: "UPDATE"},
		{name: "delete", sql: `DELETE FROM w.t WHERE k = 1`, code: codes.Unimplemented, msg: "DELETE"},
		{name: "a query as an update", sql: `SELECT * FROM w.t`, code: codes.InvalidArgument, msg: "not an update"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, _ := serveSQL(t, insertArrays)
			ctx := context.Background()
			n, err := c.ExecuteUpdate(ctx, tc.sql)
			if tc.code != codes.OK {
				if status.Code(err) != tc.code || !strings.Contains(err.Error(), tc.msg) {
					t.Fatalf("%s: got %v, want %v with %q", tc.sql, err, tc.code, tc.msg)
				}
				// nothing written
				got, _, err := rows(t, c, `SELECT COUNT(*) FROM w.t`)
				if err != nil || strings.Join(got, ";") != "0" {
					t.Errorf("after the refused INSERT, w.t has %v rows (%v)", got, err)
				}
				return
			}
			if err != nil || n != tc.n {
				t.Fatalf("%s: %d rows, %v; want %d", tc.sql, n, err, tc.n)
			}
			got, _, err := rows(t, c, tc.check)
			if err != nil {
				t.Fatal(err)
			}
			if g := strings.Join(got, ";"); g != tc.want {
				t.Errorf("%s\n got %s\nwant %s", tc.check, g, tc.want)
			}
		})
	}
}

// TestInsertPaths: an INSERT runs through every path a client may send
// it by: a query (GetFlightInfo: the rows written are total_records, and
// there is nothing to fetch), a prepared statement's update with
// parameter rows (one atomic write of all of them: one fragment), and a
// prepared statement whose dataset schema is empty (JDBC runs such a
// statement with executeUpdate), its parameters typed by their columns.
func TestInsertPaths(t *testing.T) {
	var st storage.Store
	c, _, _ := serveSQLWith(t, func(cfg *flightsvc.Config) { st = cfg.Store }, insertArrays)
	ctx := context.Background()
	fragments := func() int {
		es, err := st.List(ctx, "w/t/__fragments")
		if err != nil {
			return -1
		}
		return len(es)
	}

	info, err := c.Execute(ctx, `INSERT INTO w.t (k, f) VALUES (1, 1), (2, 2)`)
	if err != nil || info.TotalRecords != 2 || len(info.Endpoint) != 0 {
		t.Fatalf("INSERT as a query: %v %v", info, err)
	}

	prep, err := c.Prepare(ctx, `INSERT INTO w.t (k, f, s) VALUES (?, ?, ?)`)
	if err != nil {
		t.Fatal(err)
	}
	defer prep.Close(ctx)
	if ds := prep.DatasetSchema(); ds == nil || ds.NumFields() != 0 {
		t.Errorf("dataset schema of an INSERT: %v", ds)
	}
	ps := prep.ParameterSchema()
	if ps.NumFields() != 3 || ps.Field(0).Type.ID() != arrow.INT64 || ps.Field(1).Type.ID() != arrow.FLOAT64 || ps.Field(2).Type.ID() != arrow.STRING {
		t.Errorf("parameter schema: %v", ps)
	}
	b := arr.NewRecordBuilder(memory.DefaultAllocator, arrow.NewSchema([]arrow.Field{
		{Name: "a", Type: arrow.PrimitiveTypes.Int64}, {Name: "b", Type: arrow.PrimitiveTypes.Float64, Nullable: true}, {Name: "c", Type: arrow.BinaryTypes.String, Nullable: true}}, nil))
	for k := 10; k < 15; k++ {
		b.Field(0).(*arr.Int64Builder).Append(int64(k))
		b.Field(1).(*arr.Float64Builder).Append(float64(k) / 4)
		if k == 12 {
			b.Field(2).AppendNull()
		} else {
			b.Field(2).(*arr.StringBuilder).Append(fmt.Sprint("p", k))
		}
	}
	rec := b.NewRecordBatch()
	defer rec.Release()
	prep.SetParameters(rec)
	if n, err := prep.ExecuteUpdate(ctx); err != nil || n != 5 {
		t.Fatalf("prepared INSERT with 5 parameter rows: %d %v", n, err)
	}
	got, _, err := rows(t, c, `SELECT k, f, s FROM w.t ORDER BY k`)
	if err != nil {
		t.Fatal(err)
	}
	if g := strings.Join(got, ";"); g != "1|1|(null);2|2|(null);10|2.5|p10;11|2.75|p11;12|3|(null);13|3.25|p13;14|3.5|p14" {
		t.Errorf("rows %s", g)
	}
	if n := fragments(); n != 2 {
		t.Errorf("two INSERTs made %d fragments", n)
	}

	// a parameter inside an expression: one run per parameter row, still
	// one write
	prep2, err := c.Prepare(ctx, `INSERT INTO w.t (k, f) VALUES (? + 100, 1)`)
	if err != nil {
		t.Fatal(err)
	}
	defer prep2.Close(ctx)
	pb := arr.NewRecordBuilder(memory.DefaultAllocator, arrow.NewSchema([]arrow.Field{{Name: "a", Type: arrow.PrimitiveTypes.Int64}}, nil))
	pb.Field(0).(*arr.Int64Builder).AppendValues([]int64{1, 2, 3}, nil)
	prec := pb.NewRecordBatch()
	defer prec.Release()
	prep2.SetParameters(prec)
	if n, err := prep2.ExecuteUpdate(ctx); err != nil || n != 3 {
		t.Fatalf("prepared INSERT, parameter in an expression: %d %v", n, err)
	}
	if got, _, err := rows(t, c, `SELECT COUNT(*) FROM w.t WHERE k > 100`); err != nil || strings.Join(got, ";") != "3" {
		t.Errorf("rows %v %v", got, err)
	}
}

// TestInsertAtomic: an INSERT whose rows fail late (a value that does not
// fit, after fragments were cut) or whose commit fails in the store
// leaves nothing visible and no fragment behind.
func TestInsertAtomic(t *testing.T) {
	// armed: 1 fails the Put of the write's commit, 2 the Put of a data
	// file of the write's second fragment.
	var armed, fragPuts atomic.Int64
	inj := errorfs.InjectorFunc(func(i errorfs.Info) error {
		if i.Op != errorfs.OpPut || !strings.HasPrefix(i.Key, "w/t/") {
			return nil
		}
		switch armed.Load() {
		case 1:
			if strings.Contains(i.Key, "__commits/") {
				return fmt.Errorf("commit refused")
			}
		case 2:
			if strings.Contains(i.Key, "__fragments/") && strings.HasSuffix(i.Key, ".tdb") {
				if fragPuts.Add(1) > 6 {
					return fmt.Errorf("fragment file refused")
				}
			}
		}
		return nil
	})
	var mem storage.Store
	c, _, _ := serveSQLWith(t, func(cfg *flightsvc.Config) {
		mem = cfg.Store
		cfg.Store = errorfs.Wrap(cfg.Store, inj)
		cfg.MaxFragmentBytes = 4096 // a fragment per batch
	}, insertArrays)
	ctx := context.Background()
	fragments := func() int {
		es, err := mem.List(ctx, "w/t/__fragments")
		if err != nil {
			return -1
		}
		return len(es)
	}
	// 100000 rows of the engine (a join) stream in several batches, each
	// cutting a fragment
	const many = `SELECT a.k * 100 + b.k, a.v FROM w.big a JOIN w.big b ON b.k < 100`
	// row 90000 does not fit uint8: fragments of the first rows were
	// already written
	_, err := c.ExecuteUpdate(ctx, `INSERT INTO w.t (k, f, u) SELECT a.k * 100 + b.k, a.v, CASE WHEN a.k * 100 + b.k = 90000 THEN 256 ELSE 1 END FROM w.big a JOIN w.big b ON b.k < 100`)
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), `"u"`) {
		t.Fatalf("late bad value: %v", err)
	}
	if got, _, err := rows(t, c, `SELECT COUNT(*) FROM w.t`); err != nil || strings.Join(got, ";") != "0" {
		t.Errorf("after a late failure: %v rows (%v)", got, err)
	}
	if n := fragments(); n != 0 {
		t.Errorf("after a late failure: %d fragments left", n)
	}
	armed.Store(2)
	if _, err := c.ExecuteUpdate(ctx, `INSERT INTO w.t (k, f) `+many); err == nil || !strings.Contains(err.Error(), "fragment file refused") {
		t.Fatalf("failed fragment: %v", err)
	}
	if fragPuts.Load() <= 6 {
		t.Fatalf("the INSERT wrote %d fragment files, the test wants more", fragPuts.Load())
	}
	if got, _, err := rows(t, c, `SELECT COUNT(*) FROM w.t`); err != nil || strings.Join(got, ";") != "0" {
		t.Errorf("after a failed fragment: %v rows (%v)", got, err)
	}
	if n := fragments(); n != 0 {
		t.Errorf("after a failed fragment: %d fragments left", n)
	}
	// A failed commit shows nothing either (its fragments are kept by the
	// write core, which cannot tell whether the commit landed).
	armed.Store(1)
	if _, err := c.ExecuteUpdate(ctx, `INSERT INTO w.t (k, f) `+many); err == nil || !strings.Contains(err.Error(), "commit refused") {
		t.Fatalf("failed commit: %v", err)
	}
	armed.Store(0)
	if got, _, err := rows(t, c, `SELECT COUNT(*) FROM w.t`); err != nil || strings.Join(got, ";") != "0" {
		t.Errorf("after a failed commit: %v rows (%v)", got, err)
	}
	base := fragments()
	// and the same statement then succeeds, in several fragments, all at once
	if n, err := c.ExecuteUpdate(ctx, `INSERT INTO w.t (k, f) `+many); err != nil || n != 100000 {
		t.Fatalf("INSERT of 100000 rows: %d %v", n, err)
	}
	if n := fragments() - base; n < 2 {
		t.Errorf("100000 rows at 4 KiB a fragment made %d fragments", n)
	}
	if got, _, err := rows(t, c, `SELECT COUNT(*), CAST(SUM(f) AS SIGNED) FROM w.t`); err != nil || strings.Join(got, ";") != "100000|49950000" {
		t.Errorf("after the INSERT: %v (%v)", got, err)
	}
}

// TestInsertReadOnly: a read-only token cannot INSERT, whichever path.
func TestInsertReadOnly(t *testing.T) {
	_, _, addr := serveSQLWith(t, func(cfg *flightsvc.Config) {
		auth, err := access.NewFromText("rw rw\nro ro")
		if err != nil {
			t.Fatal(err)
		}
		cfg.Auth = auth
	}, insertArrays)
	ro, err := flightsql.NewClient(addr, nil, nil, grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithPerRPCCredentials(bearer("ro")))
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	ctx := context.Background()
	const ins = `INSERT INTO w.t (k, f) VALUES (1, 1)`
	if _, err := ro.ExecuteUpdate(ctx, ins); status.Code(err) != codes.PermissionDenied {
		t.Errorf("update: %v", err)
	}
	if _, err := ro.Execute(ctx, ins); status.Code(err) != codes.PermissionDenied {
		t.Errorf("as a query: %v", err)
	}
	if got, _, err := rows(t, ro, `SELECT COUNT(*) FROM w.t`); err != nil || strings.Join(got, ";") != "0" {
		t.Errorf("read-only INSERTs wrote %v (%v)", got, err)
	}
}
