package dialect

import (
	"strings"
	"testing"
)

// FuzzRewrite: the rewrite is a parser of untrusted text: it never
// panics, its output comes back from it unchanged, and text holding none of the spellings it rewrites comes back
// unchanged.
func FuzzRewrite(f *testing.F) {
	for _, s := range []string{
		`SELECT x::double FROM t WHERE s ILIKE 'a%'`,
		`SELECT count(*) FILTER (WHERE x > 1), median(v), string_agg(s, ',' ORDER BY s) FROM t`,
		`SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY v DESC) FROM t GROUP BY k`,
		`SELECT CASE WHEN a THEN (b)::int END::text, CAST(x AS numeric(4,1)) FROM "q"."t"`,
		`SELECT 'it''s' || "x""y" FROM t /* c */ -- d`,
		`SELECT ((((`, `'`, `"`, "`", `::`, `x ILIKE`, `FILTER (`, `)))`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		out, err := Rewrite(s)
		if err != nil {
			return
		}
		// sqlsvc rewrites a statement and then parses it, rewriting it
		// again: the engine's SQL must come back as it is.
		if again, err := Rewrite(out); err != nil || again != out {
			t.Fatalf("Rewrite(%q) = %q, but Rewrite of that = %q, %v", s, out, again, err)
		}
		low := strings.ToLower(s)
		for _, w := range []string{"::", "ilike", "filter", "within", "median", "quantile", "string_agg", "percentile", "cast", "--", "#", "||"} {
			if strings.Contains(low, w) {
				return
			}
		}
		if out != s {
			t.Fatalf("Rewrite(%q) = %q; text without a spelling to rewrite must come back unchanged", s, out)
		}
	})
}
