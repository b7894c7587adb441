package sqlsvc

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	arr "github.com/apache/arrow-go/v18/arrow/array"
	aflight "github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/flight/flightsql"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

func explain(t *testing.T, c *flightsql.Client, q string) string {
	t.Helper()
	got, _, err := rows(t, c, "EXPLAIN "+q)
	if err != nil {
		t.Fatalf("EXPLAIN %s: %v", q, err)
	}
	return strings.Join(got, "\n")
}

// TestFilterPushdown: WHERE terms on attributes reach the reader as the
// scan's filter (EXPLAIN shows the condition), the rows the scans hand
// on are only the passing ones (scannedRows), and the result is the one
// the engine alone gives. The fixture: dense v = 10x+y (float64), w = x*y
// (float32); g/pts k 0..19, s = "s<k>", n = 3k for even k, null for odd.
func TestFilterPushdown(t *testing.T) {
	c, _ := serveSQL(t)
	cases := []struct {
		q       string
		filter  string // in EXPLAIN; "" = nothing pushed
		scanned int64  // rows the scans handed on; -1: not checked
		want    string // sorted rows joined by ";"
	}{
		{`SELECT x, y FROM dense WHERE v >= 95`, `attr('v') >= 95.0`, 5, "9|5;9|6;9|7;9|8;9|9"},
		{`SELECT x, y FROM dense WHERE v > 97 AND x + y > 0`, `attr('v') > 97.0`, 2, "9|8;9|9"},
		{`SELECT x, y FROM dense WHERE NOT (v < 98)`, `attr('v') >= 98.0`, 2, "9|8;9|9"},
		{`SELECT x, y FROM dense WHERE w = 81`, `attr('w') == 81`, 1, "9|9"},
		{`SELECT x, y FROM dense WHERE w = 0.1`, "", 100, ""},
		{`SELECT x, y FROM dense WHERE v IN (1, 2.5, 33) AND x < 5`, `(attr('v') == 1.0) or (attr('v') == 2.5) or (attr('v') == 33.0)`, 2, "0|1;3|3"},
		{`SELECT x, y FROM dense WHERE v BETWEEN 10 AND 11.5`, `(attr('v') >= 10.0) and (attr('v') <= 11.5)`, 2, "1|0;1|1"},
		{`SELECT count(*) FROM dense WHERE v > 89`, `attr('v') > 89.0`, 10, "10"},
		{`SELECT k FROM g.pts WHERE n IS NULL AND k < 6`, `attr('n') == None`, 3, "1;3;5"},
		{`SELECT k FROM g.pts WHERE n != 0 AND k < 6`, `attr('n') != 0`, 2, "2;4"},
		{`SELECT k FROM g.pts WHERE NOT (n = 0) AND k < 6`, `attr('n') != 0`, 2, "2;4"},
		{`SELECT k FROM g.pts WHERE n NOT IN (0, 6) AND k < 8`, `(attr('n') != 0) and (attr('n') != 6)`, 2, "4;6"},
		{`SELECT k FROM g.pts WHERE n NOT IN (0, NULL)`, "", 20, ""},
		{`SELECT k FROM g.pts WHERE n IN (0, NULL)`, `attr('n') == 0`, 1, "0"},
		{`SELECT k FROM g.pts WHERE n > 2.5 AND n < 9`, `(attr('n') >= 3) and (attr('n') <= 8)`, 1, "2"},
		{`SELECT k FROM g.pts WHERE n = 2.5`, `attr('n') < -2147483648`, 0, ""},
		{`SELECT k FROM g.pts WHERE n < 100000000000`, `attr('n') != None`, 10, "0;10;12;14;16;18;2;4;6;8"},
		{`SELECT k FROM g.pts WHERE s = 's7' OR s >= 's19'`, `(attr('s') == 's7') or (attr('s') >= 's19')`, 9, "19;2;3;4;5;6;7;8;9"},
		{`SELECT k FROM g.pts WHERE s LIKE 's1%' AND n IS NOT NULL`, `attr('n') != None`, -1, "10;12;14;16;18"},
		{`SELECT k FROM g.pts WHERE k != 3 AND k < 5`, "", 4, "0;1;2;4"},
		// ranges on a dimension the chosen index does not cover go to the
		// subarray too (dense arrays take no dimension conditions)
		{`SELECT x, y FROM dense WHERE x BETWEEN 3 AND 4 AND y > 7`, `"y":[[8,9]]`, 4, "3|8;3|9;4|8;4|9"},
		{`SELECT y FROM dense WHERE x = 1 AND y != 5`, `"y":[[0,4],[6,9]]`, 9, "0;1;2;3;4;6;7;8;9"},
		{`SELECT y FROM dense WHERE x = 0 AND NOT (y BETWEEN 1 AND 8)`, `"y":[[0,0],[9,9]]`, 2, "0;9"},
		{`SELECT y FROM dense WHERE x = 0 AND (y IN (1, 3) OR y > 8)`, `"y":[[1,1],[3,3],[9,9]]`, 3, "1;3;9"},
		{`SELECT y FROM dense WHERE x = 0 AND y NOT IN (0, 2, 4, 6, 8) AND v > 4`, `attr('v') > 4.0`, 3, "5;7;9"},
		{`SELECT y FROM dense WHERE x = 0 AND y > 2.5 AND y < 2.7`, "", 0, ""},
		{`SELECT k FROM g.pts WHERE (k != 3 OR n = 0) AND k < 5`, `(dim('k') != 3) or (attr('n') == 0)`, 4, "0;1;2;4"},
	}
	for _, tc := range cases {
		plan := explain(t, c, tc.q)
		if tc.filter == "" {
			if strings.Contains(plan, `"filter"`) {
				t.Errorf("%s: pushed a filter:\n%s", tc.q, plan)
			}
		} else if !strings.Contains(plan, tc.filter) {
			t.Errorf("%s: EXPLAIN lacks filter %s:\n%s", tc.q, tc.filter, plan)
		}
		before := scannedRows.Load()
		got, _, err := rows(t, c, tc.q)
		if err != nil {
			t.Errorf("%s: %v", tc.q, err)
			continue
		}
		if n := scannedRows.Load() - before; tc.scanned >= 0 && n != tc.scanned {
			t.Errorf("%s: scans handed on %d rows, want %d", tc.q, n, tc.scanned)
		}
		sort.Strings(got)
		if g := strings.Join(got, ";"); g != tc.want {
			t.Errorf("%s:\n got %s\nwant %s", tc.q, g, tc.want)
		}
	}
}

// TestAggregatePushdown: whole-table aggregates are answered by the
// reader (no row reaches the engine) with the engine's types and values.
func TestAggregatePushdown(t *testing.T) {
	c, _ := serveSQL(t, fragmented)
	cases := []struct {
		q      string
		native bool
		want   string
	}{
		{`SELECT count(*), sum(v), min(v), max(v), avg(v) FROM dense`, true, "100|4950|0|99|49.5"},
		{`SELECT count(*) AS c, sum(w) AS s FROM dense WHERE x < 2`, true, "20|45"},
		{`SELECT count(*), count(n), sum(n), min(n), max(n), avg(n) FROM g.pts`, true, "20|10|270|0|54|27"},
		{`SELECT count(n), sum(n), min(n), avg(n) FROM g.pts WHERE n > 100`, true, "0|(null)|(null)|(null)"},
		{`SELECT count(*), max(k) FROM g.pts WHERE n >= 30 AND k < 15`, true, "3|14"},
		{`SELECT count(*) FROM dense WHERE v > 89`, false, "10"},
		{`SELECT count(DISTINCT n) FROM g.pts`, false, "10"},
		{`SELECT count(*) + 1 FROM dense`, true, "101"},
		// two fragments cover the domain: answered natively
		{`SELECT count(*), sum(v), min(v), max(v) FROM f.part`, true, "100|4950|0|99"},
		{`SELECT count(*), sum(v) FROM f.part WHERE x BETWEEN 3 AND 6`, true, "40|1980"},
		// unwritten rows inside the non-empty domain are fill values in
		// the table, which TileDB's dense aggregates skip: the engine
		{`SELECT count(*), min(v) FROM f.holes`, false, "100|-9223372036854775808"},
		{`SELECT count(*), sum(v) FROM f.holes WHERE x >= 5`, true, "50|3725"},
	}
	for _, tc := range cases {
		plan := explain(t, c, tc.q)
		if got := strings.Contains(plan, "answered by the reader"); got != tc.native {
			t.Errorf("%s: native aggregate %v, want %v:\n%s", tc.q, got, tc.native, plan)
		}
		before := scannedRows.Load()
		got, _, err := rows(t, c, tc.q)
		if err != nil {
			t.Errorf("%s: %v", tc.q, err)
			continue
		}
		if n := scannedRows.Load() - before; tc.native && n != 0 {
			t.Errorf("%s: scans handed on %d rows, want none", tc.q, n)
		}
		if g := strings.Join(got, ";"); g != tc.want {
			t.Errorf("%s:\n got %s\nwant %s", tc.q, g, tc.want)
		}
	}
	_ = context.Background
}

// fragmented writes f/part, whose two fragments cover the domain between
// them, and f/holes, whose rows 3-4 were never written.
func fragmented(t testing.TB, mk func(name, js string), c aflight.Client) {
	mem := memory.DefaultAllocator
	for _, name := range []string{"f/part", "f/holes"} {
		mk(name, `{"type":"dense","dimensions":[{"name":"x","type":"int32","domain":[0,9],"tile":5},{"name":"y","type":"int32","domain":[0,9],"tile":5}],
			"attributes":[{"name":"v","type":"int64"}]}`)
	}
	frag := func(name string, x0, x1 int) {
		b := arr.NewRecordBuilder(mem, arrow.NewSchema([]arrow.Field{{Name: "v", Type: arrow.PrimitiveTypes.Int64}}, nil))
		for x := x0; x <= x1; x++ {
			for y := 0; y < 10; y++ {
				b.Field(0).(*arr.Int64Builder).Append(int64(10*x + y))
			}
		}
		put(t, c, fmt.Sprintf(`{"array":%q,"subarray":{"x":[[%d,%d]],"y":[[0,9]]}}`, name, x0, x1), b.NewRecordBatch())
	}
	frag("f/part", 0, 4)
	frag("f/part", 5, 9)
	frag("f/holes", 0, 2)
	frag("f/holes", 5, 9)
}

// TestDatetimePushdown: datetime dimensions become subarray ranges in
// ticks, datetime attributes filter conditions in ticks, and the rows are
// the engine's own (compared with the pushdown off).
func TestDatetimePushdown(t *testing.T) {
	c, _ := serveSQL(t, datetimes)
	cases := []struct{ q, plan string }{
		{`SELECT t FROM f.ev WHERE t > '2021-03-04 00:00:00.0015'`, `"t":[[1614816000002,`},
		{`SELECT t FROM f.ev WHERE t BETWEEN '2021-03-02' AND '2021-03-03'`, `"t":[[1614643200000,1614729600000]]`},
		{`SELECT t, day FROM f.ev WHERE day = '2021-03-05'`, `attr('day') == 18691`},
		{`SELECT t, sec FROM f.ev WHERE sec < '2021-03-02 10:00:00.5' OR sec IS NULL`, `(attr('sec') <= 1614679200) or (attr('sec') == None)`},
		{`SELECT count(*), min(t) FROM f.ev WHERE NOT (day <> '2021-03-10')`, `attr('day') == 18696`},
	}
	for _, tc := range cases {
		if plan := explain(t, c, tc.q); !strings.Contains(plan, tc.plan) {
			t.Errorf("%s: EXPLAIN lacks %s:\n%s", tc.q, tc.plan, plan)
		}
		got, _, err := rows(t, c, tc.q)
		if err != nil {
			t.Fatalf("%s: %v", tc.q, err)
		}
		noPushdown.Store(true)
		want, _, err := rows(t, c, tc.q)
		noPushdown.Store(false)
		if err != nil {
			t.Fatalf("%s without pushdown: %v", tc.q, err)
		}
		sort.Strings(got)
		sort.Strings(want)
		if g, w := strings.Join(got, ";"), strings.Join(want, ";"); g != w || len(got) == 0 {
			t.Errorf("%s:\n got %s\nwant %s", tc.q, g, w)
		}
	}
}
