package sqlsvc

import (
	"sort"
	"strings"
	"testing"
)

// TestGroupByPushdown: a GROUP BY of plain columns over one scan runs in
// groupagg (EXPLAIN says so) and gives the rows and the Arrow schema the
// engine alone gives (compared with the pushdown off); what it cannot
// answer stays with the engine, with the same answers. With a tiny group
// bound the statements fall back to the engine and still answer.
func TestGroupByPushdown(t *testing.T) {
	c, _ := serveSQL(t, fragmented)
	cases := []struct {
		q      string
		native bool
	}{
		{`SELECT x, count(*), sum(v), avg(v), min(v), max(v) FROM dense GROUP BY x`, true},
		{`SELECT x AS a, y, sum(w), avg(w), count(w) FROM dense WHERE v > 20 AND w < 40 GROUP BY x, y`, true},
		{`SELECT s, count(*), count(n), sum(n), avg(n), min(n), max(n) FROM g.pts GROUP BY s`, true},
		{`SELECT n, count(*), min(s), max(s), sum(k) FROM g.pts GROUP BY n`, true},
		{`SELECT n, count(*) FROM g.pts WHERE k < 12 AND n IS NULL GROUP BY n`, true},
		{`SELECT n, count(*) AS c FROM g.pts GROUP BY n HAVING count(*) > 1 ORDER BY c DESC, n`, true},
		{`SELECT x, sum(v) AS s FROM dense GROUP BY x HAVING s > 500 ORDER BY s DESC LIMIT 3`, true},
		{`SELECT x, count(1) FROM f.part WHERE x BETWEEN 2 AND 7 GROUP BY x`, true},
		{`SELECT y, avg(v), sum(v), min(v) FROM f.holes GROUP BY y`, true},
		{`SELECT count(*) FROM dense GROUP BY x`, true},
		{`SELECT k % 3, count(*) FROM g.pts GROUP BY k % 3`, false},
		{`SELECT n, count(DISTINCT k) FROM g.pts GROUP BY n`, false},
		{`SELECT x, sum(v + 1) FROM dense GROUP BY x`, false},
		// y is not grouped by: any value of the group (one batch here, so
		// the engine's first value too)
		{`SELECT x, y, count(*) FROM dense GROUP BY x`, true},
		{`SELECT x, group_concat(y) FROM dense GROUP BY x`, false},
		{`SELECT x, count(*) FROM dense WHERE x + y > 3 GROUP BY x`, false},
	}
	check := func(q string) {
		t.Helper()
		got, gsc, err := rows(t, c, q)
		if err != nil {
			t.Errorf("%s: %v", q, err)
			return
		}
		noPushdown.Store(true)
		want, wsc, err := rows(t, c, q)
		noPushdown.Store(false)
		if err != nil {
			t.Errorf("%s without pushdown: %v", q, err)
			return
		}
		if !strings.Contains(q, "ORDER BY") {
			sort.Strings(got)
			sort.Strings(want)
		}
		if g, w := strings.Join(got, ";"), strings.Join(want, ";"); g != w || len(got) == 0 {
			t.Errorf("%s:\n got %s\nwant %s", q, g, w)
		}
		if !gsc.Equal(wsc) {
			t.Errorf("%s: schema\n%s\nwant\n%s", q, gsc, wsc)
		}
	}
	for _, tc := range cases {
		plan := explain(t, c, tc.q)
		if got := strings.Contains(plan, "pushed down: GROUP BY"); got != tc.native {
			t.Errorf("%s: grouped natively %v, want %v:\n%s", tc.q, got, tc.native, plan)
		}
		check(tc.q)
	}
	// the dense fixture has 100 rows: grouped here, the scan hands on
	// each once; past the bound the grouping gives up and the engine
	// scans again
	q := `SELECT x, count(*) FROM dense GROUP BY x`
	scanned := func() int64 {
		before := scannedRows.Load()
		if _, _, err := rows(t, c, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		return scannedRows.Load() - before
	}
	if n := scanned(); n != 100 {
		t.Errorf("%s: scans handed on %d rows, want 100", q, n)
	}
	// Under -sql-memory (the default 1 GiB here) the groups count against
	// what the statement has left; the package's own bound is not used.
	old := groupByBudget
	groupByBudget = 1
	defer func() { groupByBudget = old }()
	if n := scanned(); n != 100 {
		t.Errorf("%s under -sql-memory: scans handed on %d rows, want 100", q, n)
	}
	// With no -sql-memory, past the package's bound the grouping gives up
	// and the engine scans again.
	unbounded := int64(0)
	testMemory = &unbounded
	defer func() { testMemory = nil }()
	c, _ = serveSQL(t, fragmented)
	if n := scanned(); n <= 100 {
		t.Errorf("%s past the group bound: scans handed on %d rows, want the engine's 100 after the first try's", q, n)
	}
	for _, tc := range cases[:4] {
		check(tc.q)
	}
}
