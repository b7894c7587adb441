package dialect

import (
	"context"
	"strings"
	"testing"

	"github.com/dolthub/vitess/go/vt/sqlparser"

	"github.com/tileflight/tileflight/errkind"
)

// parses says whether the engine's parser (ANSI_QUOTES, as sqlsvc runs
// it) takes s.
func parses(s string) error {
	_, err := sqlparser.ParseWithOptions(context.Background(), s, sqlparser.ParserOptions{AnsiQuotes: true})
	return err
}

func TestRewrite(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		// Unchanged: the engine's own SQL, strings, identifiers, comments.
		{`SELECT a, b FROM main.t WHERE a > 1`, `SELECT a, b FROM main.t WHERE a > 1`},
		{`SELECT 'x::int', "y::int" FROM t`, `SELECT 'x::int', "y::int" FROM t`},
		{`SELECT 'it''s', 'a\'b' FROM t`, `SELECT 'it''s', 'a\'b' FROM t`},
		{`SELECT /* a::int ILIKE b */ 1`, `SELECT /* a::int ILIKE b */ 1`},
		{"SELECT 1 -- x::int\n", "SELECT 1 /*-- x::int*/\n"},
		{`SELECT a FROM t LIMIT 2 OFFSET 1`, `SELECT a FROM t LIMIT 2 OFFSET 1`},
		// Casts.
		{`SELECT x::double FROM t`, `SELECT CAST(x AS DOUBLE) AS "x::double" FROM t`},
		{`SELECT t.x::INTEGER + 1 FROM t`, `SELECT CAST(t.x AS SIGNED) + 1 AS "t.x::INTEGER + 1" FROM t`},
		{`SELECT "a b"::varchar FROM t`, `SELECT CAST("a b" AS CHAR) AS """a b""::varchar" FROM t`},
		{`SELECT (a + b)::bigint FROM t`, `SELECT CAST((a + b) AS SIGNED) AS "(a + b)::bigint" FROM t`},
		{`SELECT -x::int FROM t`, `SELECT -CAST(x AS SIGNED) AS "-x::int" FROM t`},
		{`SELECT x::int::text FROM t`, `SELECT CAST(CAST(x AS SIGNED) AS CHAR) AS "x::int::text" FROM t`},
		{`SELECT count(*)::double FROM t`, `SELECT CAST(count(*) AS DOUBLE) AS "count(*)::double" FROM t`},
		{`SELECT '2024-01-02'::date`, `SELECT CAST('2024-01-02' AS DATE) AS "'2024-01-02'::date"`},
		{`SELECT x::decimal(10, 2) FROM t`, `SELECT CAST(x AS DECIMAL(10,2)) AS "x::decimal(10, 2)" FROM t`},
		{`SELECT x::numeric FROM t`, `SELECT CAST(x AS DECIMAL(18,3)) AS "x::numeric" FROM t`},
		{`SELECT x::double precision FROM t`, `SELECT CAST(x AS DOUBLE) AS "x::double precision" FROM t`},
		{`SELECT x::timestamp FROM t`, `SELECT CAST(x AS DATETIME(6)) AS "x::timestamp" FROM t`},
		{`SELECT x::varchar(20) FROM t`, `SELECT CAST(x AS CHAR) AS "x::varchar(20)" FROM t`},
		{`SELECT x::boolean FROM t`, `SELECT tileflight_bool(x) AS "x::boolean" FROM t`},
		{`SELECT CASE WHEN a THEN 1 ELSE 2 END::text`, `SELECT CAST(CASE WHEN a THEN 1 ELSE 2 END AS CHAR) AS "CASE WHEN a THEN 1 ELSE 2 END::text"`},
		{`SELECT CAST(x AS INTEGER), CAST(y AS text) FROM t`, `SELECT CAST(x AS SIGNED) AS "CAST(x AS INTEGER)", CAST(y AS CHAR) AS "CAST(y AS text)" FROM t`},
		{`SELECT CAST(x AS SIGNED) FROM t`, `SELECT CAST(x AS SIGNED) FROM t`},
		{`SELECT CAST(x AS bool) FROM t`, `SELECT tileflight_bool(x) AS "CAST(x AS bool)" FROM t`},
		{`SELECT ?::int`, `SELECT CAST(? AS SIGNED) AS "?::int"`},
		// ILIKE.
		{`SELECT * FROM t WHERE s ILIKE 'a%'`, `SELECT * FROM t WHERE lower(s) LIKE lower('a%')`},
		{`SELECT * FROM t WHERE s NOT ILIKE 'a%' AND x > 1`, `SELECT * FROM t WHERE lower(s) NOT LIKE lower('a%') AND x > 1`},
		{`SELECT s ILIKE t.p || 'x' FROM t`, `SELECT lower(s) LIKE lower(concat(t.p, 'x')) AS "s ILIKE t.p || 'x'" FROM t`},
		// || concatenates.
		{`SELECT a || 'x' || b + 1, c FROM t`, `SELECT concat(a, 'x', b + 1) AS "a || 'x' || b + 1", c FROM t`},
		{`SELECT 'a' || f(x)::text = 'b'`, `SELECT concat('a', CAST(f(x) AS CHAR)) = 'b' AS "'a' || f(x)::text = 'b'"`},
		{`SELECT a = 1 AND upper(s) ILIKE 'A_' FROM t`, `SELECT a = 1 AND lower(upper(s)) LIKE lower('A_') AS "a = 1 AND upper(s) ILIKE 'A_'" FROM t`},
		// FILTER.
		{`SELECT count(*) FILTER (WHERE x > 1) FROM t`, `SELECT count(CASE WHEN (x > 1) THEN 1 END) AS "count(*) FILTER (WHERE x > 1)" FROM t`},
		{`SELECT sum(v) FILTER (WHERE k = 'a') AS s FROM t`, `SELECT sum(CASE WHEN (k = 'a') THEN v END) AS s FROM t`},
		{`SELECT count(DISTINCT v) FILTER (WHERE k) FROM t`, `SELECT count(DISTINCT CASE WHEN (k) THEN v END) AS "count(DISTINCT v) FILTER (WHERE k)" FROM t`},
		// Quantiles.
		{`SELECT median(v) FROM t`, `SELECT tileflight_quantile(json_arrayagg(v), 0.5, 0) AS "median(v)" FROM t`},
		{`SELECT quantile_cont(v, 0.9) FROM t`, `SELECT tileflight_quantile(json_arrayagg(v), 0.9, 0) AS "quantile_cont(v, 0.9)" FROM t`},
		{`SELECT quantile_disc(v, 0.9) FROM t`, `SELECT tileflight_quantile(json_arrayagg(v), 0.9, 1) AS "quantile_disc(v, 0.9)" FROM t`},
		{`SELECT percentile_cont(0.25) WITHIN GROUP (ORDER BY v) FROM t`, `SELECT tileflight_quantile(json_arrayagg(v), 0.25, 0) AS "percentile_cont(0.25) WITHIN GROUP (ORDER BY v)" FROM t`},
		{`SELECT percentile_disc(0.25) WITHIN GROUP (ORDER BY v DESC) FROM t`, `SELECT tileflight_quantile(json_arrayagg(v), 0.25, 3) AS "percentile_disc(0.25) WITHIN GROUP (ORDER BY v DESC)" FROM t`},
		{`SELECT median(v) FILTER (WHERE k > 0) FROM t`, `SELECT tileflight_quantile(json_arrayagg(CASE WHEN (k > 0) THEN v END), 0.5, 0) AS "median(v) FILTER (WHERE k > 0)" FROM t`},
		{`SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY v) FILTER (WHERE k) FROM t`, `SELECT tileflight_quantile(json_arrayagg(CASE WHEN (k) THEN v END), 0.5, 0) AS "percentile_cont(0.5) WITHIN GROUP (ORDER BY v) FILTER (WHERE k)" FROM t`},
		// string_agg.
		{`SELECT string_agg(s, ', ') FROM t`, `SELECT group_concat(s SEPARATOR ', ') AS "string_agg(s, ', ')" FROM t`},
		{`SELECT string_agg(s, '|' ORDER BY s DESC) FROM t`, `SELECT group_concat(s ORDER BY s DESC SEPARATOR '|') AS "string_agg(s, '|' ORDER BY s DESC)" FROM t`},
		{`SELECT string_agg(s) FROM t`, `SELECT group_concat(s SEPARATOR ',') AS "string_agg(s)" FROM t`},
		{`SELECT string_agg(s, '-') FILTER (WHERE k) FROM t`, `SELECT group_concat(CASE WHEN (k) THEN s END SEPARATOR '-') AS "string_agg(s, '-') FILTER (WHERE k)" FROM t`},
		// Names: a rewritten SELECT item without an alias keeps its text.
		{`SELECT x::int y, median(v) AS m, k FROM t GROUP BY k`, `SELECT CAST(x AS SIGNED) y, tileflight_quantile(json_arrayagg(v), 0.5, 0) AS m, k FROM t GROUP BY k`},
		{`SELECT DISTINCT "q""x"::int FROM t UNION SELECT median(v) FROM u ORDER BY 1`,
			`SELECT DISTINCT CAST("q""x" AS SIGNED) AS """q""""x""::int" FROM t UNION SELECT tileflight_quantile(json_arrayagg(v), 0.5, 0) AS "median(v)" FROM u ORDER BY 1`},
		{`SELECT x::int -- note` + "\n" + `FROM t`, `SELECT CAST(x AS SIGNED) AS "x::int" /*-- note*/` + "\n" + `FROM t`},
		// Nesting.
		{`SELECT x FROM (SELECT v::int AS x FROM t WHERE s ILIKE 'a') q`, `SELECT x FROM (SELECT CAST(v AS SIGNED) AS x FROM t WHERE lower(s) LIKE lower('a')) q`},
	} {
		got, err := Rewrite(tc.in)
		if err != nil {
			t.Errorf("Rewrite(%q): %v", tc.in, err)
			continue
		}
		if got != tc.want {
			t.Errorf("Rewrite(%q)\n got %q\nwant %q", tc.in, got, tc.want)
		}
		if err := parses(got); err != nil {
			t.Errorf("Rewrite(%q) = %q does not parse: %v", tc.in, got, err)
		}
		// The engine's SQL comes back as it is.
		again, err := Rewrite(got)
		if err != nil || again != got {
			t.Errorf("Rewrite(Rewrite(%q)) = %q, %v; want it unchanged", tc.in, again, err)
		}
	}
}

func TestRewriteErrors(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`SELECT x::int[] FROM t`, "array type"},
		{`SELECT x::foo FROM t`, `type "foo" is not supported`},
		{`SELECT x::timestamptz FROM t`, "TIMESTAMPTZ"},
		{`SELECT ::int`, "'::' must follow"},
		{`SELECT x:: FROM t`, "type name must follow"},
		{`SELECT mode() WITHIN GROUP (ORDER BY x) FROM t`, "WITHIN GROUP is supported after percentile_cont"},
		{`SELECT percentile_cont(0.5) FROM t`, "needs WITHIN GROUP"},
		{`SELECT percentile_cont(0.5) WITHIN GROUP (x) FROM t`, "ORDER BY"},
		{`SELECT lower(s) FILTER (WHERE x) FROM t`, "follows aggregate functions"},
		{`SELECT sum(x) FILTER (x > 1) FROM t`, "FILTER must be followed by (WHERE"},
		{`SELECT median(x, 2) FROM t`, "median takes one argument"},
		{`SELECT quantile_cont(x) FROM t`, "two arguments"},
		{`SELECT median(x) OVER () FROM t`, "window"},
		{`SELECT string_agg(s, sep) FROM t`, "separator must be a string literal"},
		{`SELECT ILIKE 'x'`, "ILIKE needs a value"},
		{`SELECT || 'x'`, "'||' needs a value"},
		{`SELECT TRY_CAST(x AS int)`, "TRY_CAST"},
		{`SELECT ` + strings.Repeat("(", 300) + "1" + strings.Repeat(")", 300), "nested"},
	} {
		_, err := Rewrite(tc.in)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Rewrite(%q) = %v; want an error saying %q", tc.in, err, tc.want)
			continue
		}
		if errkind.Of(err) != errkind.InvalidArgument {
			t.Errorf("Rewrite(%q): error kind %v, want InvalidArgument", tc.in, errkind.Of(err))
		}
	}
}

// BenchmarkRewrite: the cost the dialect adds to planning a statement.
func BenchmarkRewrite(b *testing.B) {
	for _, q := range []struct{ name, sql string }{
		{"plain", `SELECT station, count(*) AS n, avg(temp) FROM dial.readings WHERE id BETWEEN 10 AND 200 GROUP BY station ORDER BY station`},
		{"dialect", `SELECT sid, median(temp), count(*) FILTER (WHERE rain > 4), string_agg(id::varchar, ',' ORDER BY id) FROM dial.readings WHERE station ILIKE 'n%' GROUP BY sid`},
	} {
		b.Run(q.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Rewrite(q.sql); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
