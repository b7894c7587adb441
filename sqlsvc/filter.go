package sqlsvc

// WHERE terms on attributes (and, on sparse arrays, on dimensions) become
// the scan's `filter` (docs/protocol.md, "Array lifecycle", TileDB-Py's QueryCondition language), so
// that the reader drops rows before the engine sees them. A term is pushed
// only when the condition keeps exactly the rows for which SQL's WHERE is
// TRUE:
//
//   - NOT is pushed down here, the way TileDB's negate does it (operators
//     flipped, AND/OR swapped, IN <-> NOT IN, IS NULL <-> IS NOT NULL). In
//     SQL's three-valued logic NOT(x < 5) is TRUE exactly when x >= 5 is,
//     and a null x makes both unknown; TileDB's comparisons are false on
//     null cells. So the two agree on every row WHERE keeps. A NULL inside
//     a NOT IN list (never TRUE in SQL) is not pushed.
//   - Constants are turned into the field's type exactly as the engine
//     compares them (go-mysql-server: integer columns with integer
//     constants as integers, with DECIMAL constants as exact decimals, with
//     float constants as doubles; float columns with DECIMAL constants
//     through the shortest decimal of the value). Integer comparisons
//     become inclusive ranges clipped to the type (x > 2.5 is x >= 3);
//     float comparisons are pushed only when the constant is exact in the
//     column's type, so that TileDB's cast of the constant changes nothing.
//   - Strings compare as bytes in both (the engine's default collation is
//     utf8mb4_0900_bin, NO PAD). Datetimes of seconds, milliseconds,
//     microseconds and days compare as ticks of their unit (a constant
//     between two ticks becomes the range of ticks, as for integers);
//     nanosecond datetimes (the engine rounds them to microseconds),
//     enumerated attributes, binary and other columns stay in the engine.
//
// Every pushed term is compiled against the array's schema first; a term
// the condition language refuses stays in the engine.

import (
	"context"
	"math"
	"math/big"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/apache/arrow-go/v18/arrow"
	gms "github.com/dolthub/go-mysql-server/sql"
	"github.com/dolthub/go-mysql-server/sql/expression"
	"github.com/dolthub/go-mysql-server/sql/types"
	"github.com/shopspring/decimal"

	"github.com/tileflight/tileflight/format/datatype"
)

// colKind is how a column's comparisons can be pushed.
type colKind int

const (
	colNone colKind = iota
	colInt          // integers and BOOL (0/1)
	colFloat32
	colFloat64
	colString
	colTime // datetimes of a unit (ticks compared as integers)
)

// filterCol is a column a condition can name.
type filterCol struct {
	name     string // the array's name
	dim      bool
	kind     colKind
	signed   bool
	bits     int
	min, max decimal.Decimal // integer range of the type
	unit     int64           // colTime: nanoseconds per tick
}

// filterColumn is the pushable view of a table column, or false.
func (t *table) filterColumn(name string) (filterCol, bool) {
	var f arrow.Field
	found := false
	for _, af := range t.arrow.Fields() {
		if strings.EqualFold(af.Name, name) {
			f, found = af, true
			break
		}
	}
	if !found || t.arr.B2ND {
		return filterCol{}, false
	}
	s := t.arr
	var typ datatype.Datatype
	if i := s.DimIndex(f.Name); i >= 0 {
		if s.Dense {
			return filterCol{}, false // TileDB refuses dimensions in dense conditions
		}
		d := &s.Dims[i]
		if d.CellValNum != 1 && !d.Var {
			return filterCol{}, false
		}
		typ = d.Type
	} else {

		k := s.AttrIndex(f.Name)
		if k < 0 || s.Attrs[k].Enumeration != "" {
			return filterCol{}, false
		}
		at := &s.Attrs[k]
		if at.CellValNum != 1 && !at.Var {
			return filterCol{}, false
		}
		typ = at.Type
	}
	c := filterCol{name: f.Name, dim: s.DimIndex(f.Name) >= 0}
	switch f.Type.ID() {
	case arrow.BOOL:
		// the engine's BOOLEAN is a signed TINYINT
		c.kind, c.signed, c.bits, c.min, c.max = colInt, true, 8, decimal.Zero, decimal.NewFromInt(1)
	case arrow.INT8, arrow.INT16, arrow.INT32, arrow.INT64:
		if typ.IsDatetime() || typ.IsTime() {
			return filterCol{}, false
		}
		c.kind, c.signed, c.bits = colInt, true, f.Type.(arrow.FixedWidthDataType).BitWidth()
		c.min = decimal.NewFromInt(-1 << (c.bits - 1))
		c.max = decimal.NewFromInt(1<<(c.bits-1) - 1)
	case arrow.UINT8, arrow.UINT16, arrow.UINT32, arrow.UINT64:
		c.kind, c.bits = colInt, f.Type.(arrow.FixedWidthDataType).BitWidth()
		c.min = decimal.Zero
		c.max = decimal.NewFromBigInt(new(big.Int).SetUint64(math.MaxUint64>>(64-c.bits)), 0)
	case arrow.FLOAT32:
		c.kind = colFloat32
	case arrow.FLOAT64:
		c.kind = colFloat64
	case arrow.STRING, arrow.LARGE_STRING:
		c.kind = colString
	case arrow.TIMESTAMP, arrow.DATE32:
		// The engine compares DATETIMEs to the microsecond: nanosecond
		// columns would compare rounded, so they stay in the engine.
		c.kind, c.signed, c.bits = colTime, true, 64
		c.min, c.max = decimal.NewFromInt(math.MinInt64), decimal.NewFromInt(math.MaxInt64)
		if c.unit = tickUnit(typ); c.unit == 0 {
			return filterCol{}, false
		}
		return c, true
	default:
		return filterCol{}, false
	}
	if c.kind == colInt && !typ.IsInteger() && typ != datatype.Bool {
		return filterCol{}, false
	}
	return c, true
}

// pushFilter splits a WHERE expression into its conjuncts and takes the
// ones the scan can answer exactly: ranges of one dimension become
// subarray ranges (ranges), the others the condition (cond, "" when
// none); rest are left to the engine.
func (t *table) pushFilter(e gms.Expression, cols gms.ColSet) (cond_ string, ranges dimRanges, rest []gms.Expression) {
	var pushed []string
	ranges = dimRanges{}
	for _, term := range expression.SplitConjunction(e) {
		tr := &translator{t: t, cols: cols}
		if dim, rs, ok := tr.dimRanges(term); ok {
			ranges.intersect(dim, rs)
			continue
		}
		c, ok := tr.expr(term, false)
		if ok {
			if err := t.arr.CheckFilter(c); err != nil {
				ok = false
			}
		}
		if !ok {
			rest = append(rest, term)
			continue
		}
		pushed = append(pushed, c)
	}
	switch len(pushed) {
	case 0:
	case 1:
		cond_ = pushed[0]
	default:
		cond_ = "(" + strings.Join(pushed, ") and (") + ")"
	}
	return cond_, ranges, rest
}

// dimRanges turns a term that restricts one integer or float dimension
// (comparisons with constants, BETWEEN, IN, and AND/OR/NOT of those) into
// the ranges of values that pass. Dimensions hold no nulls, so NOT is the
// complement.
func (tr *translator) dimRanges(e gms.Expression) (int, []rng, bool) {
	dim := -1
	var walk func(e gms.Expression, neg bool) ([]rng, bool)
	one := func(col gms.Expression, op string, c gms.Expression, neg bool) ([]rng, bool) {
		gf, ok := col.(*expression.GetField)
		if !ok || tr.cols.Len() == 0 || !tr.cols.Contains(gf.Id()) {
			return nil, false
		}
		d := -1
		for _, i := range tr.t.pushable() {
			if strings.EqualFold(tr.t.arr.Dims[i].Name, gf.Name()) {
				d = i
			}
		}
		unit := int64(0)
		if d < 0 {
			// datetime dimensions of a unit the engine compares exactly
			for i := range tr.t.arr.Dims {
				dd := &tr.t.arr.Dims[i]
				if u := tickUnit(dd.Type); u > 0 && !dd.Var && strings.EqualFold(dd.Name, gf.Name()) {
					d, unit = i, u
				}
			}
		}
		if d < 0 || (dim >= 0 && d != dim) {
			return nil, false
		}
		l, ok := literal(c)
		if !ok || l.v == nil {
			return nil, false
		}
		var key decimal.Decimal
		if unit > 0 {
			key, ok = timeConst(filterCol{unit: unit}, l)
		} else if _, isStr := l.v.(string); isStr {
			return nil, false
		} else {
			key, ok = keyDecimal(l.v)
		}
		if !ok {
			return nil, false
		}
		dim = d
		kind := kindOf(tr.t.arr.Dims[d].Type)
		if unit > 0 {
			kind = kindInt // ticks
		}
		if neg {
			op = negOp[op]
		}
		if op == "!=" {
			a, ok1 := bound(kind, "<", key)
			b, ok2 := bound(kind, ">", key)
			return []rng{a, b}, ok1 && ok2
		}
		r, ok := bound(kind, op, key)
		return []rng{r}, ok
	}
	union := func(a, b []rng) []rng { return append(append([]rng(nil), a...), b...) }
	inter := func(a, b []rng) []rng {
		d := dimRanges{0: a}
		d.intersect(0, b)
		return nonEmpty(d[0])
	}
	walk = func(e gms.Expression, neg bool) ([]rng, bool) {
		bin := func(l, r gms.Expression, op string) ([]rng, bool) {
			if _, ok := l.(*expression.GetField); ok {
				return one(l, op, r, neg)
			}
			return one(r, flipOp[op], l, neg)
		}
		switch x := e.(type) {
		case *expression.And, *expression.Or:
			var l, r gms.Expression
			isAnd := false
			if a, ok := x.(*expression.And); ok {
				l, r, isAnd = a.LeftChild, a.RightChild, true
			} else {
				o := x.(*expression.Or)
				l, r = o.LeftChild, o.RightChild
			}
			a, ok := walk(l, neg)
			if !ok {
				return nil, false
			}
			b, ok := walk(r, neg)
			if !ok {
				return nil, false
			}
			if isAnd != neg {
				return inter(a, b), true
			}
			return union(a, b), true
		case *expression.Not:
			return walk(x.Child, !neg)
		case *expression.Between:
			a, ok1 := one(x.Val, ">=", x.Lower, false)
			b, ok2 := one(x.Val, "<=", x.Upper, false)
			if !ok1 || !ok2 {
				return nil, false
			}
			rs := inter(a, b)
			if neg {
				lo, ok1 := one(x.Val, "<", x.Lower, false)
				hi, ok2 := one(x.Val, ">", x.Upper, false)
				return union(lo, hi), ok1 && ok2
			}
			return rs, true
		case *expression.InTuple, *expression.HashInTuple:
			var l, r gms.Expression
			if it, ok := x.(*expression.InTuple); ok {
				l, r = it.Left(), it.Right()
			} else {
				h := x.(*expression.HashInTuple)
				l, r = h.Left(), h.Right()
			}
			tup, ok := r.(expression.Tuple)
			if !ok || len(tup) == 0 {
				return nil, false
			}
			var out []rng
			for _, m := range tup {
				if lm, ok := literal(m); ok && lm.v == nil {
					return nil, false // NULL members: three-valued; left to the engine
				}
				if neg {
					rs, ok := one(l, "!=", m, false)
					if !ok {
						return nil, false
					}
					if out == nil {
						out = rs
					} else {
						out = inter(out, rs)
					}
					continue
				}
				rs, ok := one(l, "=", m, false)
				if !ok {
					return nil, false
				}
				out = union(out, rs)
			}
			return out, true
		case *expression.Equals:
			return bin(x.Left(), x.Right(), "=")
		case *expression.GreaterThan:
			return bin(x.Left(), x.Right(), ">")
		case *expression.GreaterThanOrEqual:
			return bin(x.Left(), x.Right(), ">=")
		case *expression.LessThan:
			return bin(x.Left(), x.Right(), "<")
		case *expression.LessThanOrEqual:
			return bin(x.Left(), x.Right(), "<=")
		}
		return nil, false
	}
	rs, ok := walk(e, false)
	if !ok || dim < 0 {
		return 0, nil, false
	}
	kept := nonEmpty(rs)
	if len(kept) == 0 {
		// no value passes: one empty range, which selects no cell
		kept = []rng{{lo: 1, hi: 0, flo: 1, fhi: 0}}
	}
	return dim, kept, true
}

// nonEmpty drops the ranges no value is in (integer ranges keep
// flo/fhi infinite, float ranges lo/hi at the int64 extremes).
func nonEmpty(rs []rng) []rng {
	var out []rng
	for _, r := range rs {
		if r.lo <= r.hi && r.flo <= r.fhi {
			out = append(out, r)
		}
	}
	return out
}

type translator struct {
	t    *table
	cols gms.ColSet
}

// expr translates e (negated when neg) or says it cannot.
func (tr *translator) expr(e gms.Expression, neg bool) (string, bool) {
	switch x := e.(type) {
	case *expression.And:
		return tr.combine(x.LeftChild, x.RightChild, neg, "and")
	case *expression.Or:
		return tr.combine(x.LeftChild, x.RightChild, neg, "or")
	case *expression.Not:
		return tr.expr(x.Child, !neg)
	case *expression.IsNull:
		col, ok := tr.column(x.Child)
		if !ok {
			return "", false
		}
		if neg {
			return field(col) + " != None", true
		}
		return field(col) + " == None", true
	case *expression.Between:
		col, ok := tr.column(x.Val)
		if !ok {
			return "", false
		}
		lo, ok1 := literal(x.Lower)
		hi, ok2 := literal(x.Upper)
		if !ok1 || !ok2 {
			return "", false
		}
		a, ok1 := tr.compare(col, ">=", lo, neg)
		b, ok2 := tr.compare(col, "<=", hi, neg)
		if !ok1 || !ok2 {
			return "", false
		}
		if neg {
			return "(" + a + ") or (" + b + ")", true
		}
		return "(" + a + ") and (" + b + ")", true
	case *expression.InTuple:
		return tr.in(x.Left(), x.Right(), neg)
	case *expression.HashInTuple:
		return tr.in(x.Left(), x.Right(), neg)
	case *expression.Equals:
		return tr.binary(x.Left(), x.Right(), "=", neg)
	case *expression.GreaterThan:
		return tr.binary(x.Left(), x.Right(), ">", neg)
	case *expression.GreaterThanOrEqual:
		return tr.binary(x.Left(), x.Right(), ">=", neg)
	case *expression.LessThan:
		return tr.binary(x.Left(), x.Right(), "<", neg)
	case *expression.LessThanOrEqual:
		return tr.binary(x.Left(), x.Right(), "<=", neg)
	}
	return "", false
}

func (tr *translator) combine(l, r gms.Expression, neg bool, op string) (string, bool) {
	if neg {
		op = map[string]string{"and": "or", "or": "and"}[op]
	}
	a, ok := tr.expr(l, neg)
	if !ok {
		return "", false
	}
	b, ok := tr.expr(r, neg)
	if !ok {
		return "", false
	}
	return "(" + a + ") " + op + " (" + b + ")", true
}

// column is the pushable column a GetField of this scan names.
func (tr *translator) column(e gms.Expression) (filterCol, bool) {
	gf, ok := e.(*expression.GetField)
	if !ok {
		return filterCol{}, false
	}
	// A field of another scope (a correlated subquery's outer row) is not
	// this scan's.
	if tr.cols.Len() == 0 || !tr.cols.Contains(gf.Id()) {
		return filterCol{}, false
	}
	return tr.t.filterColumn(gf.Name())
}

// lit is a constant of the statement.
type lit struct {
	v   any
	typ gms.Type
}

func literal(e gms.Expression) (lit, bool) {
	l, ok := e.(*expression.Literal)
	if !ok {
		return lit{}, false
	}
	return lit{v: l.Value(), typ: l.Type()}, true
}

var flipOp = map[string]string{"=": "=", "!=": "!=", "<": ">", "<=": ">=", ">": "<", ">=": "<="}

func (tr *translator) binary(l, r gms.Expression, op string, neg bool) (string, bool) {
	col, ok := tr.column(l)
	c, ok2 := literal(r)
	if !ok || !ok2 {
		col, ok = tr.column(r)
		c, ok2 = literal(l)
		if !ok || !ok2 {
			return "", false
		}
		op = flipOp[op]
	}
	return tr.compare(col, op, c, neg)
}

var negOp = map[string]string{"=": "!=", "!=": "=", "<": ">=", "<=": ">", ">": "<=", ">=": "<"}

// compare renders `col op c` (its negation when neg).
func (tr *translator) compare(col filterCol, op string, c lit, neg bool) (string, bool) {
	if c.v == nil {
		return "", false // = NULL is never TRUE; the engine knows
	}
	if neg {
		op = negOp[op]
	}
	switch col.kind {
	case colInt:
		d, ok := intConst(col, c)
		if !ok {
			return "", false
		}
		return intCompare(col, op, d), true
	case colFloat32, colFloat64:
		v, ok := floatConst(col, c)
		if !ok {
			return "", false
		}
		if op == "=" {
			op = "=="
		}
		return field(col) + " " + op + " " + v, true
	case colTime:
		d, ok := timeConst(col, c)
		if !ok {
			return "", false
		}
		return intCompare(col, op, d), true
	case colString:
		s, ok := c.v.(string)
		if !ok || !types.IsText(c.typ) || !utf8.ValidString(s) {
			return "", false
		}
		if op == "=" {
			op = "=="
		}
		return field(col) + " " + op + " " + pyString(s), true
	}
	return "", false
}

// in renders `col IN (list)` (NOT IN when neg).
func (tr *translator) in(l, r gms.Expression, neg bool) (string, bool) {
	col, ok := tr.column(l)
	tup, ok2 := r.(expression.Tuple)
	if !ok || !ok2 || len(tup) == 0 {
		return "", false
	}
	var terms []string
	for _, m := range tup {
		c, ok := literal(m)
		if !ok {
			return "", false
		}
		if c.v == nil {
			if neg {
				return "", false // NOT IN (.., NULL) is never TRUE
			}
			continue // x IN (.., NULL) is TRUE only for the other members
		}
		s, ok := tr.compare(col, "=", c, neg)
		if !ok {
			return "", false
		}
		terms = append(terms, s)
	}
	if len(terms) == 0 {
		return "", false
	}
	// Members are compared as the engine's `=` does (TileDB's `in`
	// compares bytes: -0.0 would not be in [0.0]).
	join := ") or ("
	if neg {
		join = ") and ("
	}
	return "(" + strings.Join(terms, join) + ")", true
}

// field names a column in the condition language, whatever its name.
func field(c filterCol) string {
	if c.dim {
		return "dim(" + pyString(c.name) + ")"
	}
	return "attr(" + pyString(c.name) + ")"
}

// intConst is an integer column's constant as an exact decimal, when the
// engine compares the two exactly (or through doubles that hold both).
func intConst(col filterCol, c lit) (decimal.Decimal, bool) {
	small := col.bits <= 32 // every value is exact as a double
	switch v := c.v.(type) {
	case bool:
		if v {
			return decimal.NewFromInt(1), true
		}
		return decimal.Zero, true
	case int8, int16, int32, int64:
		d, _ := keyDecimal(v)
		// signed with signed compares as int64; with an unsigned column
		// as doubles
		return d, col.signed || small
	case uint8, uint16, uint32, uint64:
		d, _ := keyDecimal(v)
		return d, !col.signed || small
	case decimal.Decimal:
		return v, true // compared as exact decimals
	case float64:
		if !small || math.IsNaN(v) || math.IsInf(v, 0) {
			return decimal.Decimal{}, false
		}
		return decimal.NewFromFloat(v), true
	}
	return decimal.Decimal{}, false
}

// tickUnit is the length in nanoseconds of a tick of the datetime types
// whose conditions are pushed (0 for the others: nanoseconds, which the
// engine rounds to microseconds, and units it has no counterpart for).
func tickUnit(t datatype.Datatype) int64 {
	switch t {
	case datatype.DatetimeSec:
		return 1e9
	case datatype.DatetimeMs:
		return 1e6
	case datatype.DatetimeUs:
		return 1e3
	case datatype.DatetimeDay:
		return 86400e9
	}
	return 0
}

// timeConst is a datetime constant (a string or time the engine reads as
// a DATETIME) in ticks of the column's unit, exactly (a fraction when it
// falls between ticks).
func timeConst(col filterCol, c lit) (decimal.Decimal, bool) {
	switch c.v.(type) {
	case string, time.Time:
	default:
		return decimal.Decimal{}, false
	}
	v, _, err := types.DatetimeMaxPrecision.Convert(context.Background(), c.v)
	if err != nil {
		return decimal.Decimal{}, false
	}
	tm, ok := v.(time.Time)
	if !ok {
		return decimal.Decimal{}, false
	}
	tm = tm.UTC()
	ns := new(big.Int).Mul(big.NewInt(tm.Unix()), big.NewInt(1e9))
	ns.Add(ns, big.NewInt(int64(tm.Nanosecond())))
	return decimal.NewFromBigInt(ns, 0).DivRound(decimal.NewFromInt(col.unit), 20), true
}

// intCompare renders an integer comparison as the range of values that
// pass, clipped to the type.
func intCompare(col filterCol, op string, d decimal.Decimal) string {
	f := field(col)
	never := f + " < " + col.min.String() // false for every cell, null or not
	if op == "!=" {
		if d.IsInteger() && d.Cmp(col.min) >= 0 && d.Cmp(col.max) <= 0 {
			return f + " != " + d.String()
		}
		return f + " != None" // every non-null value differs
	}
	lo, hi := col.min, col.max
	switch op {
	case "=":
		if !d.IsInteger() {
			return never
		}
		lo, hi = maxDec(lo, d), minDec(hi, d)
	case ">=":
		lo = maxDec(lo, d.Ceil())
	case ">":
		lo = maxDec(lo, d.Floor().Add(decimal.NewFromInt(1)))
	case "<=":
		hi = minDec(hi, d.Floor())
	case "<":
		hi = minDec(hi, d.Ceil().Sub(decimal.NewFromInt(1)))
	}
	switch {
	case lo.Cmp(hi) > 0:
		return never
	case lo.Equal(hi):
		return f + " == " + lo.String()
	case lo.Equal(col.min) && hi.Equal(col.max):
		return f + " != None"
	case lo.Equal(col.min):
		return f + " <= " + hi.String()
	case hi.Equal(col.max):
		return f + " >= " + lo.String()
	}
	return "(" + f + " >= " + lo.String() + ") and (" + f + " <= " + hi.String() + ")"
}

func maxDec(a, b decimal.Decimal) decimal.Decimal {
	if a.Cmp(b) >= 0 {
		return a
	}
	return b
}

func minDec(a, b decimal.Decimal) decimal.Decimal {
	if a.Cmp(b) <= 0 {
		return a
	}
	return b
}

// floatConst is a float column's constant as the literal the condition
// takes, when the column's type holds it exactly and the engine's
// comparison is the same as TileDB's.
func floatConst(col filterCol, c lit) (string, bool) {
	var v float64
	switch x := c.v.(type) {
	case int8, int16, int32, int64, uint8, uint16, uint32, uint64:
		d, _ := keyDecimal(x)
		f, exact := d.Float64()
		if !exact {
			return "", false
		}
		v = f
	case float64:
		v = x
	case float32:
		v = float64(x)
	case decimal.Decimal:
		// The engine compares the column's shortest decimal with the
		// constant: that agrees with a comparison of values when the
		// constant is the shortest decimal of its nearest value.
		f, _ := x.Float64()
		if math.IsInf(f, 0) || math.IsNaN(f) {
			return "", false
		}
		if col.kind == colFloat32 {
			if !decimal.NewFromFloat32(float32(f)).Equal(x) {
				return "", false
			}
		} else if !decimal.NewFromFloat(f).Equal(x) {
			return "", false
		}
		v = f
	default:
		return "", false
	}
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return "", false
	}
	if col.kind == colFloat32 {
		// exact in float32, and (for decimals) its shortest float32
		// decimal is also its exact value, so that doubles, float32 and
		// decimals all compare it alike
		if float64(float32(v)) != v {
			return "", false
		}
		if _, isDec := c.v.(decimal.Decimal); isDec && !decimal.NewFromFloat(v).Equal(decimal.NewFromFloat32(float32(v))) {
			return "", false
		}
		return strconv.FormatFloat(v, 'g', -1, 64), true
	}
	s := strconv.FormatFloat(v, 'g', -1, 64)
	if !strings.ContainsAny(s, ".e") {
		s += ".0"
	}
	return s, true
}

// pyString is s as a Python string literal.
func pyString(s string) string {
	var b strings.Builder
	b.WriteByte('\'')
	for _, r := range s {
		switch {
		case r == '\\' || r == '\'':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r < 0x20 || r == 0x7f:
			b.WriteString(`\x`)
			b.WriteString(strconv.FormatInt(int64(r)|0x100, 16)[1:])
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('\'')
	return b.String()
}
