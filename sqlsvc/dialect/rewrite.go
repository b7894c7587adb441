package dialect

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/tileflight/tileflight/errkind"
)

// The engine functions the rewrites call that sqlsvc registers.
const (
	// QuantileFunc(json_arrayagg(x), p, mode) is the p-quantile of the
	// values of a group: interpolated between the two nearest values
	// (mode 0, PostgreSQL's percentile_cont) or the first value whose
	// cumulative share reaches p (mode 1, percentile_disc); modes 2 and 3
	// are the same over the values in descending order.
	QuantileFunc = "tileflight_quantile"
	// BoolFunc(x) is x as a boolean (the engine's CAST has no BOOLEAN).
	BoolFunc = "tileflight_bool"
)

// maxDepth bounds the nesting of parentheses a statement may have.
const maxDepth = 200

// Rewrite turns a statement written with the PostgreSQL and DuckDB
// spellings this package knows into the engine's SQL. Text it has nothing
// to do with comes back unchanged (line comments become block comments);
// a construct it knows but cannot take is an InvalidArgument error that
// names it.
func Rewrite(sql string) (string, error) {
	toks := lex(sql)
	if !balanced(toks) {
		// A syntax error: the engine's parser says where.
		return sql, nil
	}
	ns, err := rewriteSeq(tree(toks), 0)
	if err != nil {
		return "", err
	}
	return render(ns), nil
}

// balanced says whether the parentheses pair up.
func balanced(toks []*node) bool {
	depth := 0
	for _, t := range toks {
		switch {
		case t.isOp("("):
			depth++
		case t.isOp(")"):
			if depth--; depth < 0 {
				return false
			}
		}
	}
	return depth == 0
}

func errorf(format string, args ...any) error {
	return errkind.Errorf(errkind.InvalidArgument, "SQL: "+format, args...)
}

// rewriteSeq rewrites a sequence of nodes (the statement, or the inside
// of one pair of parentheses). The items of a SELECT list are rewritten
// one by one, and one that changes keeps its text as its name: the
// engine names an unaliased column by the text it parsed, and
// "median(x)" says more than the call it became.
func rewriteSeq(ns []*node, depth int) ([]*node, error) {
	if depth > maxDepth {
		return nil, errorf("parentheses nested deeper than %d", maxDepth)
	}
	sel := -1
	for i, n := range ns {
		if n.is("select") {
			sel = i
			break
		}
	}
	if sel < 0 {
		return rewriteFlat(ns, depth)
	}
	start := next(ns, sel)
	for at(ns, start).is("distinct") || at(ns, start).is("all") {
		start = next(ns, start)
	}
	if start < 0 {
		return rewriteFlat(ns, depth)
	}
	head, err := rewriteFlat(ns[:start], depth)
	if err != nil {
		return nil, err
	}
	// A fresh slice: head may share ns's array, whose later nodes are
	// still to be read.
	out := append([]*node{}, head...)
	from := start
	for i := start; i <= len(ns); i++ {
		end := i == len(ns) || endsSelectList(ns[i]) && (!ns[i].is("group") || at(ns, next(ns, i)).is("by"))
		if i < len(ns) && ns[i].kind != kComma && !end {
			continue
		}
		// The rewrite changes groups in place: the original is read first.
		orig, origSig := plainText(ns[from:i]), sigText(ns[from:i])
		item, err := rewriteFlat(ns[from:i], depth)
		if err != nil {
			return nil, err
		}
		out = append(out, named(orig, origSig, item)...)
		if end {
			rest, err := rewriteSeq(ns[i:], depth)
			if err != nil {
				return nil, err
			}
			return append(out, rest...), nil
		}
		out = append(out, ns[i])
		from = i + 1
	}
	return out, nil
}

// endsSelectList: the words that end a SELECT list (GROUP when BY
// follows: WITHIN GROUP does not).
func endsSelectList(n *node) bool {
	for _, w := range []string{"from", "where", "group", "having", "order", "limit", "offset", "union", "intersect", "except", "into", "window"} {
		if n.is(w) {
			return true
		}
	}
	return n.isOp(";")
}

// named is a rewritten SELECT item with its original text as its alias,
// when the rewrite changed it and it has none.
func named(orig, origSig string, item []*node) []*node {
	if origSig == sigText(item) || hasAlias(item) {
		return item
	}
	name := strings.Join(strings.Fields(orig), " ")
	if name == "" || len(name) > 64 {
		return item
	}
	// A trailing space keeps the space before FROM.
	var tail []*node
	for len(item) > 0 && item[len(item)-1].kind == kSpace {
		tail = append([]*node{item[len(item)-1]}, tail...)
		item = item[:len(item)-1]
	}
	alias := &node{kind: kIdent, text: `"` + strings.ReplaceAll(name, `"`, `""`) + `"`}
	out := append(append([]*node{}, item...), space(), word("AS"), space(), alias)
	return append(out, tail...)
}

// plainText is the text of ns with its comments as spaces.
func plainText(ns []*node) string {
	var b strings.Builder
	var walk func(ns []*node)
	walk = func(ns []*node) {
		for _, n := range ns {
			switch n.kind {
			case kSpace:
				b.WriteByte(' ')
			case kGroup:
				b.WriteByte('(')
				walk(n.kids)
				if n.closed {
					b.WriteByte(')')
				}
			default:
				b.WriteString(n.text)
			}
		}
	}
	walk(ns)
	return b.String()
}

// sigText is the text of the tokens of ns, without white space and
// comments (inside groups too).
func sigText(ns []*node) string {
	var b strings.Builder
	var walk func(ns []*node)
	walk = func(ns []*node) {
		for _, n := range ns {
			switch n.kind {
			case kSpace:
			case kGroup:
				b.WriteString("( ")
				walk(n.kids)
				b.WriteString(") ")
			default:
				b.WriteString(n.text)
				b.WriteByte(' ')
			}
		}
	}
	walk(ns)
	return b.String()
}

// hasAlias says whether a SELECT item ends with a name for its column.
func hasAlias(ns []*node) bool {
	last := prev(ns, len(ns))
	before := prev(ns, last)
	if last < 0 || before < 0 {
		return false
	}
	if ns[before].is("as") {
		return true
	}
	l, b := ns[last], ns[before]
	return (l.kind == kIdent || l.kind == kWord && !isStop(l)) && b.kind != kOp && b.kind != kComma
}

// rewriteFlat rewrites a sequence, innermost groups first.
func rewriteFlat(ns []*node, depth int) ([]*node, error) {
	for _, n := range ns {
		if n.kind == kGroup {
			kids, err := rewriteSeq(n.kids, depth+1)
			if err != nil {
				return nil, err
			}
			n.kids = kids
		}
	}
	var err error
	if ns, err = rewriteCalls(ns); err != nil {
		return nil, err
	}
	if ns, err = rewriteCasts(ns); err != nil {
		return nil, err
	}
	if ns, err = rewriteConcat(ns); err != nil {
		return nil, err
	}
	return rewriteILike(ns)
}

// next is the index of the first significant node after i (-1: none).
func next(ns []*node, i int) int {
	for j := i + 1; j < len(ns); j++ {
		if ns[j].kind != kSpace {
			return j
		}
	}
	return -1
}

// prev is the index of the last significant node before i (-1: none).
func prev(ns []*node, i int) int {
	for j := i - 1; j >= 0; j-- {
		if ns[j].kind != kSpace {
			return j
		}
	}
	return -1
}

func at(ns []*node, i int) *node {
	if i < 0 || i >= len(ns) {
		return nil
	}
	return ns[i]
}

func word(s string) *node   { return &node{kind: kWord, text: s} }
func space() *node          { return &node{kind: kSpace, text: " "} }
func comma() *node          { return &node{kind: kComma, text: ","} }
func number(s string) *node { return &node{kind: kNumber, text: s} }
func group(kids ...*node) *node {
	return &node{kind: kGroup, kids: kids, closed: true}
}

// trim drops the white space at both ends of a sequence.
func trim(ns []*node) []*node {
	for len(ns) > 0 && ns[0].kind == kSpace {
		ns = ns[1:]
	}
	for len(ns) > 0 && ns[len(ns)-1].kind == kSpace {
		ns = ns[:len(ns)-1]
	}
	return ns
}

// splitArgs splits a group's inside at its commas.
func splitArgs(ns []*node) [][]*node {
	var out [][]*node
	start := 0
	for i, n := range ns {
		if n.kind == kComma {
			out = append(out, trim(ns[start:i]))
			start = i + 1
		}
	}
	if rest := trim(ns[start:]); len(rest) > 0 || len(out) > 0 {
		out = append(out, rest)
	}
	return out
}

func joinArgs(args [][]*node) []*node {
	var out []*node
	for i, a := range args {
		if i > 0 {
			out = append(out, comma(), space())
		}
		out = append(out, a...)
	}
	return out
}

func text(ns []*node) string { return strings.TrimSpace(render(ns)) }

// replace is ns with ns[from:to+1] replaced by with.
func replace(ns []*node, from, to int, with ...*node) []*node {
	out := make([]*node, 0, len(ns)-(to-from+1)+len(with))
	out = append(out, ns[:from]...)
	out = append(out, with...)
	return append(out, ns[to+1:]...)
}

// keywords that end an operand and never name a function.
var stopWords = map[string]bool{}

func init() {
	for _, w := range strings.Fields(`select from where group by having order limit offset
		union intersect except all distinct as on using join inner outer cross natural full
		and or not xor is in like ilike rlike regexp similar between escape case when then
		else end asc desc nulls with window over partition rows range filter within into
		separator collate any some exists interval binary div`) {
		stopWords[w] = true
	}
}

func isStop(n *node) bool { return n != nil && n.kind == kWord && stopWords[strings.ToLower(n.text)] }

// aggregates FILTER may follow.
var aggregates = map[string]bool{}

func init() {
	for _, w := range strings.Fields(`count sum avg min max median quantile_cont quantile_disc quantile
		string_agg group_concat any_value first last stddev stddev_pop stddev_samp std variance
		var_pop var_samp bit_and bit_or bit_xor json_arrayagg json_objectagg`) {
		aggregates[w] = true
	}
}

// rewriteCalls rewrites the function calls of a sequence: WITHIN GROUP,
// FILTER, and the aggregates and casts the engine spells otherwise.
func rewriteCalls(ns []*node) ([]*node, error) {
	for i := 0; i < len(ns); i++ {
		n := ns[i]
		j := next(ns, i)
		g := at(ns, j)
		if n.kind != kWord || g == nil || g.kind != kGroup || isStop(n) || at(ns, prev(ns, i)).isOp(".") {
			continue
		}
		name := strings.ToLower(n.text)
		// f(p) WITHIN GROUP (ORDER BY x)
		if k := next(ns, j); at(ns, k).is("within") {
			l := next(ns, k)
			og := at(ns, next(ns, l))
			if !at(ns, l).is("group") || og == nil || og.kind != kGroup {
				return nil, errorf("WITHIN must be followed by GROUP (ORDER BY expression), after %s(...)", name)
			}
			if name != "percentile_cont" && name != "percentile_disc" {
				return nil, errorf("%s(...) WITHIN GROUP (ORDER BY ...) is not supported: WITHIN GROUP is supported after percentile_cont and percentile_disc", name)
			}
			x, desc, err := orderByOne(og.kids, name)
			if err != nil {
				return nil, err
			}
			args := splitArgs(g.kids)
			if len(args) != 1 || len(args[0]) == 0 {
				return nil, errorf("%s takes one fraction, e.g. %s(0.5) WITHIN GROUP (ORDER BY x)", name, name)
			}
			n.text = "quantile_" + strings.TrimPrefix(name, "percentile_")
			name = n.text
			if desc {
				name += " desc"
			}
			g.kids = joinArgs([][]*node{x, args[0]})
			ns = replace(ns, j+1, next(ns, l), nil...)
		}
		// agg(x) FILTER (WHERE c)
		if k := next(ns, j); at(ns, k).is("filter") {
			fg := at(ns, next(ns, k))
			if fg == nil || fg.kind != kGroup || !at(fg.kids, next(fg.kids, -1)).is("where") {
				return nil, errorf("FILTER must be followed by (WHERE condition), after %s(...)", name)
			}
			if !aggregates[name] {
				return nil, errorf("FILTER (WHERE ...) follows aggregate functions, not %s(...)", name)
			}
			cond := trim(fg.kids[next(fg.kids, -1)+1:])
			if len(cond) == 0 {
				return nil, errorf("FILTER (WHERE) has no condition, after %s(...)", name)
			}
			if err := filterArgs(g, name, cond); err != nil {
				return nil, err
			}
			ns = replace(ns, j+1, next(ns, k), nil...)
		}
		var err error
		switch name {
		case "median", "quantile_cont", "quantile_disc", "quantile", "quantile_cont desc", "quantile_disc desc":
			err = quantile(ns, i, g, name)
		case "string_agg":
			err = stringAgg(n, g)
		case "percentile_cont", "percentile_disc":
			err = errorf("%s(p) needs WITHIN GROUP (ORDER BY x), or write quantile_%s(x, p)", name, strings.TrimPrefix(name, "percentile_"))
		case "cast":
			ns, err = castCall(ns, i, g)
		case "try_cast":
			err = errorf("TRY_CAST is not supported: use CAST(x AS type) or x::type")
		}
		if err != nil {
			return nil, err
		}
	}
	return ns, nil
}

// orderByOne reads "ORDER BY x [ASC|DESC]" (WITHIN GROUP's).
func orderByOne(ns []*node, name string) (x []*node, desc bool, err error) {
	o := next(ns, -1)
	b := next(ns, o)
	if !at(ns, o).is("order") || !at(ns, b).is("by") {
		return nil, false, errorf("%s(...) WITHIN GROUP needs (ORDER BY expression)", name)
	}
	x = trim(ns[b+1:])
	if l := len(x) - 1; l >= 0 && (x[l].is("asc") || x[l].is("desc")) {
		desc = x[l].is("desc")
		x = trim(x[:l])
	}
	if len(x) == 0 || len(splitArgs(x)) != 1 {
		return nil, false, errorf("%s(...) WITHIN GROUP (ORDER BY ...) takes one expression to order by", name)
	}
	return x, desc, nil
}

// filterArgs makes agg(x) FILTER (WHERE c) agg(CASE WHEN c THEN x END):
// the rows that fail c give the aggregate a NULL, which it skips
// (count(*) counts CASE WHEN c THEN 1 END).
func filterArgs(g *node, name string, cond []*node) error {
	args := splitArgs(g.kids)
	if len(args) == 0 || len(args[0]) == 0 {
		return errorf("%s() FILTER: the aggregate has no argument", name)
	}
	x := args[0]
	var pre, post []*node
	if x[0].is("distinct") || x[0].is("all") {
		pre = []*node{x[0], space()}
		x = trim(x[1:])
	}
	// group_concat(x ORDER BY y SEPARATOR s), string_agg(x, s ORDER BY y):
	// the condition wraps x alone.
	for i, n := range x {
		if n.is("order") || n.is("separator") {
			post = append([]*node{space()}, x[i:]...)
			x = trim(x[:i])
			break
		}
	}
	if len(x) == 1 && x[0].isOp("*") {
		if name != "count" {
			return errorf("%s(*) FILTER: only count takes *", name)
		}
		x = []*node{number("1")}
	}
	if len(x) == 0 {
		return errorf("%s(...) FILTER: the aggregate has no argument", name)
	}
	wrapped := []*node{word("CASE"), space(), word("WHEN"), space(), group(cond...), space(), word("THEN"), space()}
	wrapped = append(wrapped, x...)
	wrapped = append(wrapped, space(), word("END"))
	args[0] = append(append(pre, wrapped...), post...)
	g.kids = joinArgs(args)
	return nil
}

// quantile rewrites median(x), quantile_cont(x, p), quantile_disc(x, p)
// and quantile(x, p) (DuckDB's quantile_disc) as QuantileFunc over the
// group's values.
func quantile(ns []*node, i int, g *node, name string) error {
	if k := next(ns, next(ns, i)); at(ns, k).is("over") {
		return errorf("%s(...) OVER (...) is not supported: %s is an aggregate here, not a window function", name, name)
	}
	args := splitArgs(g.kids)
	want := 2
	if name == "median" {
		want = 1
	}
	if len(args) != want || len(args[0]) == 0 || len(args[want-1]) == 0 {
		if name == "median" {
			return errorf("median takes one argument: median(x)")
		}
		return errorf("%s takes two arguments: %s(x, fraction)", name, name)
	}
	if args[0][0].is("distinct") {
		return errorf("%s(DISTINCT ...) is not supported", name)
	}
	p := []*node{number("0.5")}
	if name != "median" {
		p = args[1]
	}
	mode := 0
	if strings.HasPrefix(name, "quantile_disc") || name == "quantile" {
		mode = 1
	}
	if strings.HasSuffix(name, " desc") {
		mode += 2
	}
	disc := strconv.Itoa(mode)
	ns[i].text = QuantileFunc
	g.kids = joinArgs([][]*node{{word("json_arrayagg"), group(args[0]...)}, p, {number(disc)}})
	return nil
}

// stringAgg makes string_agg(x [, sep] [ORDER BY y]) the engine's
// group_concat(x [ORDER BY y] SEPARATOR sep).
func stringAgg(n, g *node) error {
	args := splitArgs(g.kids)
	if len(args) < 1 || len(args) > 2 || len(args[0]) == 0 {
		return errorf("string_agg takes a value and a separator: string_agg(x, ', ')")
	}
	var order []*node
	cut := func(a []*node) []*node {
		for i, t := range a {
			if t.is("order") {
				order = trim(a[i:])
				return trim(a[:i])
			}
		}
		return a
	}
	x := cut(args[0])
	sep := []*node{{kind: kString, text: "','"}}
	if len(args) == 2 {
		sep = cut(args[1])
		if len(sep) != 1 || sep[0].kind != kString {
			return errorf("string_agg: the separator must be a string literal, got %q", text(sep))
		}
	}
	if len(x) == 0 {
		return errorf("string_agg takes a value and a separator: string_agg(x, ', ')")
	}
	n.text = "group_concat"
	kids := append([]*node{}, x...)
	if order != nil {
		kids = append(append(kids, space()), order...)
	}
	g.kids = append(kids, space(), word("SEPARATOR"), space(), sep[0])
	return nil
}

// castCall maps the type of CAST(x AS type) to the engine's.
func castCall(ns []*node, i int, g *node) ([]*node, error) {
	as := -1
	for k, n := range g.kids {
		if n.is("as") {
			as = k
		}
	}
	if as < 0 {
		return nil, errorf("CAST needs AS: CAST(x AS type)")
	}
	x := trim(g.kids[:as])
	typ, end, err := readType(g.kids, next(g.kids, as))
	if err != nil {
		return nil, err
	}
	if rest := trim(g.kids[end+1:]); len(rest) > 0 {
		// CAST(x AS CHAR CHARACTER SET ...): the engine's own spelling.
		return ns, nil
	}
	if len(x) == 0 {
		return nil, errorf("CAST needs a value: CAST(x AS type)")
	}
	return replace(ns, i, next(ns, i), castTo(x, typ)...), nil
}

// castTo is the engine's cast of x to a mapped type.
func castTo(x []*node, typ string) []*node {
	if typ == BoolFunc {
		return []*node{word(BoolFunc), group(x...)}
	}
	kids := append(append([]*node{}, x...), space(), word("AS"), space(), word(typ))
	return []*node{word("CAST"), group(kids...)}
}

// rewriteCasts makes x::type CAST(x AS type), left to right (so that
// x::a::b casts twice).
func rewriteCasts(ns []*node) ([]*node, error) {
	for c := 0; c < len(ns); c++ {
		if !ns[c].isOp("::") {
			continue
		}
		p := prev(ns, c)
		s := primaryStart(ns, p)
		if s < 0 {
			return nil, errorf("'::' must follow a value, column or parenthesized expression (x::type), found %q before it", text(ns[max(p, 0):c]))
		}
		typ, end, err := readType(ns, next(ns, c))
		if err != nil {
			return nil, err
		}
		x := trim(ns[s : p+1])
		ns = replace(ns, s, end, castTo(x, typ)...)
		c = s
	}
	return ns, nil
}

// types maps PostgreSQL and DuckDB type names to the engine's CAST
// targets.
var types = map[string]string{
	"double": "DOUBLE", "double precision": "DOUBLE", "float8": "DOUBLE",
	"float": "FLOAT", "float4": "FLOAT", "real": "FLOAT",
	"int": "SIGNED", "integer": "SIGNED", "int4": "SIGNED", "int32": "SIGNED",
	"bigint": "SIGNED", "int8": "SIGNED", "int64": "SIGNED", "long": "SIGNED",
	"smallint": "SIGNED", "int2": "SIGNED", "int16": "SIGNED", "short": "SIGNED",
	"tinyint": "SIGNED", "int1": "SIGNED", "hugeint": "SIGNED", "signed": "SIGNED",
	"ubigint": "UNSIGNED", "uinteger": "UNSIGNED", "usmallint": "UNSIGNED", "utinyint": "UNSIGNED", "unsigned": "UNSIGNED",
	"varchar": "CHAR", "text": "CHAR", "string": "CHAR", "char": "CHAR", "bpchar": "CHAR",
	"character": "CHAR", "character varying": "CHAR", "nchar": "CHAR",
	"date":      "DATE",
	"timestamp": "DATETIME(6)", "datetime": "DATETIME(6)", "timestamp without time zone": "DATETIME(6)",
	"time": "TIME(6)", "time without time zone": "TIME(6)",
	"boolean": BoolFunc, "bool": BoolFunc, "logical": BoolFunc,
	"json": "JSON", "year": "YEAR",
	"blob": "BINARY", "bytea": "BINARY", "binary": "BINARY", "varbinary": "BINARY",
	"decimal": "DECIMAL", "numeric": "DECIMAL",
}

// typeNames are the names a cast takes, for the error of one it does not.
const typeNames = "DOUBLE, FLOAT, REAL, INTEGER, BIGINT, SMALLINT, TINYINT, UBIGINT, VARCHAR, TEXT, DATE, TIMESTAMP, TIME, BOOLEAN, DECIMAL(p,s), NUMERIC(p,s), JSON, BLOB"

// multiword type names: the words that may follow a first word.
var typeTails = map[string][]string{
	"double":    {"precision"},
	"character": {"varying"},
	"timestamp": {"without time zone", "with time zone"},
	"time":      {"without time zone", "with time zone"},
	"signed":    {"integer"},
	"unsigned":  {"integer"},
}

// readType reads a type name starting at ns[i]: its engine spelling and
// the index of its last node.
func readType(ns []*node, i int) (string, int, error) {
	n := at(ns, i)
	if n == nil || n.kind != kWord && n.kind != kIdent || isStop(n) {
		return "", 0, errorf("a type name must follow '::' or AS (%s)", typeNames)
	}
	name := strings.ToLower(strings.Trim(n.text, "\"`"))
	end := i
	for _, tail := range typeTails[name] {
		words := strings.Fields(tail)
		k, ok := end, true
		for _, w := range words {
			k = next(ns, k)
			if !at(ns, k).is(w) {
				ok = false
				break
			}
		}
		if ok {
			name += " " + tail
			end = k
			break
		}
	}
	if strings.HasSuffix(name, "with time zone") || name == "timestamptz" || name == "timetz" {
		return "", 0, errorf("cast to %s is not supported: timestamps here have no time zone (they are UTC); cast to TIMESTAMP", strings.ToUpper(name))
	}
	typ, ok := types[name]
	if !ok {
		return "", 0, errorf("cast to type %q is not supported; supported: %s", name, typeNames)
	}
	// Type arguments: DECIMAL(p,s) keeps them; a length of VARCHAR(n) or
	// a precision of TIMESTAMP(p) is dropped (the engine's CHAR is as long
	// as its value, its DATETIME(6) keeps microseconds).
	if k := next(ns, end); at(ns, k) != nil && at(ns, k).kind == kGroup {
		end = k
		if typ == "DECIMAL" {
			args := splitArgs(ns[k].kids)
			if len(args) < 1 || len(args) > 2 {
				return "", 0, errorf("%s takes (precision[, scale])", strings.ToUpper(name))
			}
			var ps []string
			for _, a := range args {
				if len(a) != 1 || a[0].kind != kNumber {
					return "", 0, errorf("%s(%s): precision and scale are numbers", strings.ToUpper(name), text(ns[k].kids))
				}
				ps = append(ps, a[0].text)
			}
			if len(ps) == 1 {
				ps = append(ps, "0")
			}
			typ = fmt.Sprintf("DECIMAL(%s,%s)", ps[0], ps[1])
		}
	} else if typ == "DECIMAL" {
		// DuckDB's DECIMAL without arguments.
		typ = "DECIMAL(18,3)"
	}
	if k := next(ns, end); at(ns, k).isOp("[") {
		return "", 0, errorf("cast to an array type (%s[]) is not supported", strings.ToUpper(name))
	}
	return typ, end, nil
}

// primaryStart is the index of the first node of the value that ends at
// ns[i] (a literal, a column, a function call, a parenthesized
// expression, CASE ... END), -1 if ns[i] cannot end one.
func primaryStart(ns []*node, i int) int {
	n := at(ns, i)
	if n == nil {
		return -1
	}
	s := i
	switch {
	case n.kind == kGroup:
		p := prev(ns, i)
		switch pn := at(ns, p); {
		case pn.is("over"):
			// f(x) OVER (...)
			if q := primaryStart(ns, prev(ns, p)); q >= 0 {
				return q
			}
		case pn.is("exists"):
			return p
		case pn != nil && (pn.kind == kWord && !isStop(pn) || pn.kind == kIdent):
			s = chainStart(ns, p)
		}
		return s
	case n.is("end"):
		depth := 0
		for k := i; k >= 0; k-- {
			switch {
			case ns[k].is("end"):
				depth++
			case ns[k].is("case"):
				depth--
				if depth == 0 {
					return k
				}
			}
		}
		return -1
	case n.kind == kString:
		if p := prev(ns, i); at(ns, p).is("date") || at(ns, p).is("time") || at(ns, p).is("timestamp") {
			return p
		}
		return i
	case n.kind == kNumber, n.isOp("?"):
		return i
	case n.kind == kIdent, n.kind == kWord && !isStop(n):
		return chainStart(ns, i)
	}
	return -1
}

// chainStart extends a name back over a.b.c.
func chainStart(ns []*node, i int) int {
	for {
		d := prev(ns, i)
		p := prev(ns, d)
		if !at(ns, d).isOp(".") || at(ns, p) == nil || at(ns, p).kind != kWord && at(ns, p).kind != kIdent {
			return i
		}
		i = p
	}
}

// primaryEnd is the index of the last node of the value that starts at
// ns[i], -1 if none starts there.
func primaryEnd(ns []*node, i int) int {
	n := at(ns, i)
	if n == nil {
		return -1
	}
	switch {
	case n.is("case"):
		depth := 0
		for k := i; k < len(ns); k++ {
			switch {
			case ns[k].is("case"):
				depth++
			case ns[k].is("end"):
				depth--
				if depth == 0 {
					return k
				}
			}
		}
		return -1
	case n.is("date") || n.is("time") || n.is("timestamp"):
		if k := next(ns, i); at(ns, k) != nil && at(ns, k).kind == kString {
			return k
		}
	case n.is("exists"):
		if k := next(ns, i); at(ns, k) != nil && at(ns, k).kind == kGroup {
			return k
		}
		return -1
	case n.is("interval"):
		v := next(ns, i)
		u := next(ns, v)
		if at(ns, u) != nil && at(ns, u).kind == kWord {
			return u
		}
		return -1
	case n.kind == kGroup, n.kind == kString, n.kind == kNumber, n.isOp("?"):
		return i
	}
	if n.kind != kIdent && (n.kind != kWord || isStop(n)) {
		return -1
	}
	e := i
	for {
		d := next(ns, e)
		k := next(ns, d)
		if !at(ns, d).isOp(".") || at(ns, k) == nil || at(ns, k).kind != kWord && at(ns, k).kind != kIdent && !at(ns, k).isOp("*") {
			break
		}
		e = k
	}
	if k := next(ns, e); at(ns, k) != nil && at(ns, k).kind == kGroup {
		e = k
		if o := next(ns, e); at(ns, o).is("over") {
			if w := next(ns, o); at(ns, w) != nil && (at(ns, w).kind == kGroup || at(ns, w).kind == kWord) {
				e = w
			}
		}
	}
	return e
}

// arithmetic operators bind tighter than LIKE (and || tighter than
// LIKE, looser than the others): they are part of an ILIKE's operands.
func isArith(n *node) bool {
	if n == nil {
		return false
	}
	if n.kind == kOp {
		switch n.text {
		case "+", "-", "*", "/", "%", "||", "^", "&", "|", "<<", ">>", "~", "->", "->>":
			return true
		}
	}
	return n.is("div") || n.is("mod")
}

// isArithNotConcat: the operators that bind tighter than ||.
func isArithNotConcat(n *node) bool { return isArith(n) && !n.isOp("||") }

// operandStart is the first node of the operand of a comparison that
// ends at ns[i].
func operandStart(ns []*node, i int) int { return spanStart(ns, i, isArith) }

// operandEnd is the last node of the operand of a comparison that
// starts at ns[i].
func operandEnd(ns []*node, i int) int { return spanEnd(ns, i, isArith) }

// spanStart is the first node of the expression ending at ns[i] whose
// operators are those of arith.
func spanStart(ns []*node, i int, arith func(*node) bool) int {
	s := primaryStart(ns, i)
	for s >= 0 {
		o := prev(ns, s)
		if !arith(at(ns, o)) {
			return s
		}
		q := primaryStart(ns, prev(ns, o))
		if q < 0 {
			if ns[o].isOp("-") || ns[o].isOp("+") || ns[o].isOp("~") {
				return o // a sign
			}
			return s
		}
		s = q
	}
	return s
}

// spanEnd is the last node of the expression starting at ns[i] whose
// operators are those of arith.
func spanEnd(ns []*node, i int, arith func(*node) bool) int {
	if n := at(ns, i); n.isOp("-") || n.isOp("+") || n.isOp("~") {
		i = next(ns, i)
	}
	e := primaryEnd(ns, i)
	for e >= 0 {
		o := next(ns, e)
		if !arith(at(ns, o)) {
			return e
		}
		k := next(ns, o)
		if n := at(ns, k); n.isOp("-") || n.isOp("+") || n.isOp("~") {
			k = next(ns, k)
		}
		f := primaryEnd(ns, k)
		if f < 0 {
			return e
		}
		e = f
	}
	return e
}

// rewriteILike makes a [NOT] ILIKE b [ESCAPE c] lower(a) [NOT] LIKE
// lower(b) [ESCAPE c].
func rewriteILike(ns []*node) ([]*node, error) {
	for k := 0; k < len(ns); k++ {
		if !ns[k].is("ilike") {
			continue
		}
		le := prev(ns, k)
		not := at(ns, le).is("not")
		if not {
			le = prev(ns, le)
		}
		ls := operandStart(ns, le)
		rs := next(ns, k)
		re := operandEnd(ns, rs)
		if ls < 0 || re < 0 {
			return nil, errorf("ILIKE needs a value on each side: x ILIKE 'pattern'")
		}
		with := []*node{word("lower"), group(trim(ns[ls : le+1])...), space()}
		if not {
			with = append(with, word("NOT"), space())
		}
		with = append(with, word("LIKE"), space(), word("lower"), group(trim(ns[rs:re+1])...))
		ns = replace(ns, ls, re, with...)
		k = ls
	}
	return ns, nil
}

// rewriteConcat makes a || b || c concat(a, b, c): || concatenates in
// PostgreSQL and DuckDB (it is OR in the engine's MySQL dialect).
func rewriteConcat(ns []*node) ([]*node, error) {
	for k := 0; k < len(ns); k++ {
		if !ns[k].isOp("||") {
			continue
		}
		s := spanStart(ns, prev(ns, k), isArithNotConcat)
		if s < 0 {
			return nil, errorf("'||' needs a value on each side: a || b")
		}
		args := [][]*node{trim(ns[s:k])}
		e := k
		for ns[e].isOp("||") {
			rs := next(ns, e)
			re := spanEnd(ns, rs, isArithNotConcat)
			if re < 0 {
				return nil, errorf("'||' needs a value on each side: a || b")
			}
			args = append(args, trim(ns[rs:re+1]))
			e = re
			if o := next(ns, e); at(ns, o).isOp("||") {
				e = o
			}
		}
		ns = replace(ns, s, e, word("concat"), group(joinArgs(args)...))
		k = s
	}
	return ns, nil
}
