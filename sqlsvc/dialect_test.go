package sqlsvc

import (
	"context"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	arr "github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// The PostgreSQL and DuckDB spellings run end to end: dense has
// v = 10x+y and w = x*y; g/pts has k 0..19, s "s<k>", n = 3k for even k
// and NULL for odd.
func TestDialectStatements(t *testing.T) {
	c, _ := serveSQL(t)
	cases := []struct{ q, want string }{
		{`SELECT median(v) FROM dense WHERE x = 1`, "14.5"},
		{`SELECT quantile_cont(v, 0.25) FROM dense WHERE x = 0`, "2.25"},
		{`SELECT quantile_disc(v, 0.25) FROM dense WHERE x = 0`, "2"},
		{`SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY v) FROM dense WHERE x = 0`, "4.5"},
		{`SELECT percentile_disc(0.5) WITHIN GROUP (ORDER BY v) FROM dense WHERE x = 0`, "4"},
		{`SELECT percentile_disc(0.5) WITHIN GROUP (ORDER BY v DESC) FROM dense WHERE x = 0`, "5"},
		{`SELECT x, median(v) AS m FROM dense WHERE x < 2 GROUP BY x ORDER BY x`, "0|4.5;1|14.5"},
		{`SELECT median(n) FROM g.pts`, "27"},
		{`SELECT x, median(v) FROM dense WHERE x < 2 GROUP BY x ORDER BY median(v) DESC`, "1|14.5;0|4.5"},
		{`SELECT x::double, count(*) FROM dense WHERE y = 0 GROUP BY x::double ORDER BY x::double LIMIT 2`, "0|1;1|1"},
		{`SELECT count(*) FILTER (WHERE n IS NULL), sum(n) FILTER (WHERE k < 5) FROM g.pts`, "10|18"},
		{`SELECT median(n) FILTER (WHERE k < 5) FROM g.pts`, "6"},
		{`SELECT s FROM g.pts WHERE s ILIKE 'S1%' AND k < 12 ORDER BY k`, "s1;s10;s11"},
		{`SELECT count(*) FROM g.pts WHERE s NOT ILIKE 'S1%'`, "9"},
		{`SELECT "k"::double / 4, k::varchar || '|' || s FROM g.pts WHERE "k" = 2`, "0.5|2|s2"},
		{`SELECT CAST(k AS integer) + 1 FROM "g/pts" WHERE k = 2`, "3"},
		{`SELECT string_agg(s, '-' ORDER BY k) FROM g.pts WHERE k < 3`, "s0-s1-s2"},
		{`SELECT date_trunc('month', '2024-05-17 10:11:12'::timestamp)`, "2024-05-01T00:00:00"},
		{`SELECT k FROM g.pts ORDER BY k LIMIT 2 OFFSET 3`, "3;4"},
		{`SELECT '1'::boolean, 0::bool`, "true|false"},
		{`SELECT table_schema, table_name, table_type FROM information_schema.tables ORDER BY 1, 2`, "g|pts|ARRAY;main|dense|ARRAY"},
		{`SELECT schema_name FROM information_schema.schemata ORDER BY 1`, "g;information_schema;main"},
		{`SELECT column_name, data_type, is_nullable, column_role FROM information_schema.columns WHERE table_name = 'pts' ORDER BY ordinal_position`,
			"k|BIGINT|NO|dimension;s|VARCHAR|NO|attribute;n|INTEGER|YES|attribute"},
	}
	for _, tc := range cases {
		got, _, err := rows(t, c, tc.q)
		if err != nil {
			t.Errorf("%s: %v", tc.q, err)
			continue
		}
		if g := strings.Join(got, ";"); g != tc.want {
			t.Errorf("%s:\n got %s\nwant %s", tc.q, g, tc.want)
		}
	}
	// A rewritten column is named by the text written.
	_, sc, err := rows(t, c, `SELECT median(v), x::double, x FROM dense WHERE x < 2 GROUP BY x`)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range sc.Fields() {
		names = append(names, f.Name)
	}
	if strings.Join(names, ",") != "median(v),x::double,x" {
		t.Errorf("column names %v, want median(v), x::double, x", names)
	}
}

func TestDialectErrors(t *testing.T) {
	c, _ := serveSQL(t)
	cases := []struct {
		q    string
		code codes.Code
		msg  string
	}{
		{`SELECT v::int[] FROM dense`, codes.InvalidArgument, "array type"},
		{`SELECT mode() WITHIN GROUP (ORDER BY v) FROM dense`, codes.InvalidArgument, "percentile_cont"},
		{`SELECT date_trunc('fortnight', '2024-01-01'::date)`, codes.InvalidArgument, "fortnight"},
		{`SELECT median(s) FROM g.pts`, codes.InvalidArgument, "numbers"},
		{`SELECT quantile_cont(v, 2) FROM dense`, codes.InvalidArgument, "between 0 and 1"},
		{`SELECT * FROM information_schema.innodb_tables`, codes.NotFound, "innodb_tables"},
		{`SELECT 'maybe'::boolean`, codes.InvalidArgument, "BOOLEAN"},
	}
	for _, tc := range cases {
		_, _, err := rows(t, c, tc.q)
		if status.Code(err) != tc.code || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("%s: %v, want %v with %q", tc.q, err, tc.code, tc.msg)
		}
	}
}

func TestTruncTime(t *testing.T) {
	at := time.Date(2024, 5, 17, 10, 11, 12, 123456789, time.UTC)
	for _, tc := range []struct{ unit, want string }{
		{"microseconds", "2024-05-17T10:11:12.123456Z"},
		{"ms", "2024-05-17T10:11:12.123Z"},
		{"second", "2024-05-17T10:11:12Z"},
		{"minute", "2024-05-17T10:11:00Z"},
		{"HOUR", "2024-05-17T10:00:00Z"},
		{"day", "2024-05-17T00:00:00Z"},
		{"week", "2024-05-13T00:00:00Z"},
		{"month", "2024-05-01T00:00:00Z"},
		{"quarter", "2024-04-01T00:00:00Z"},
		{"year", "2024-01-01T00:00:00Z"},
		{"decade", "2020-01-01T00:00:00Z"},
		{"century", "2000-01-01T00:00:00Z"},
		{"millennium", "2000-01-01T00:00:00Z"},
	} {
		got, err := truncTime(tc.unit, at)
		if err != nil || got.Format(time.RFC3339Nano) != tc.want {
			t.Errorf("truncTime(%q) = %v, %v; want %s", tc.unit, got.Format(time.RFC3339Nano), err, tc.want)
		}
	}
	// A Sunday's week starts on the Monday before.
	if got, _ := truncTime("week", time.Date(2024, 5, 19, 1, 0, 0, 0, time.UTC)); got.Day() != 13 {
		t.Errorf("week of Sunday 2024-05-19 starts %v, want 2024-05-13", got)
	}
}

// The quantiles of PostgreSQL (and DuckDB): percentile_cont interpolates
// at (n-1)p, percentile_disc takes the first value whose cumulative share
// reaches p.
func TestQuantile(t *testing.T) {
	ten := []float64{10, 9, 8, 7, 6, 5, 4, 3, 2, 1}
	for _, tc := range []struct {
		xs         []float64
		p          float64
		disc, desc bool
		want       any
	}{
		{nil, 0.5, false, false, nil},
		{[]float64{3}, 0.9, false, false, 3.0},
		{[]float64{4, 1, 3, 2}, 0.5, false, false, 2.5},
		{[]float64{4, 1, 3, 2}, 0.3, false, false, 1.9},
		{[]float64{4, 1, 3, 2}, 0.3, false, true, 3.1},
		{[]float64{4, 1, 3, 2}, 0.3, true, true, 3.0},
		{[]float64{4, 1, 3, 2}, 0.5, true, false, 2.0},
		{ten, 0, true, false, 1.0},
		{ten, 0.7, true, false, 7.0},
		{ten, 0.75, true, false, 8.0},
		{ten, 1, true, false, 10.0},
		{ten, 1, false, false, 10.0},
	} {
		xs := append([]float64(nil), tc.xs...)
		got := quantile(xs, tc.p, tc.disc, tc.desc)
		if g, ok := got.(float64); ok {
			got = float64(int64(g*1e9+0.5)) / 1e9
		}
		if got != tc.want {
			t.Errorf("quantile(%v, %v, disc=%v, desc=%v) = %v, want %v", tc.xs, tc.p, tc.disc, tc.desc, got, tc.want)
		}
	}
}

// A prepared statement in the dialect, with parameters (as ADBC and JDBC
// send them).
func TestDialectPrepared(t *testing.T) {
	c, _ := serveSQL(t)
	ctx := context.Background()
	ps, err := c.Prepare(ctx, `SELECT k::double / 2 AS h FROM g.pts WHERE s ILIKE ? AND "k" < ?`)
	if err != nil {
		t.Fatal(err)
	}
	defer ps.Close(ctx)
	if n := ps.ParameterSchema().NumFields(); n != 2 {
		t.Fatalf("parameter schema %v", ps.ParameterSchema())
	}
	b := arr.NewRecordBuilder(memory.DefaultAllocator, arrow.NewSchema([]arrow.Field{
		{Name: "p1", Type: arrow.BinaryTypes.String}, {Name: "p2", Type: arrow.PrimitiveTypes.Int64}}, nil))
	b.Field(0).(*arr.StringBuilder).Append("S1%")
	b.Field(1).(*arr.Int64Builder).Append(12)
	rec := b.NewRecordBatch()
	defer rec.Release()
	ps.SetParameters(rec)
	info, err := ps.Execute(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := readAll(t, c, info)
	sort.Strings(got)
	if strings.Join(got, ";") != "0.5;5;5.5" {
		t.Errorf("got %v", got)
	}
}
