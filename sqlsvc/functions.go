package sqlsvc

// Functions the engine lacks that the PostgreSQL and DuckDB spellings
// need (sqlsvc/dialect rewrites those spellings into calls of them):
// date_trunc, the quantiles behind median, quantile_cont, quantile_disc
// and percentile_cont/percentile_disc, and the cast to BOOLEAN. The
// provider hands them to the engine (it asks its DatabaseProvider for
// functions before its own).

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	gms "github.com/dolthub/go-mysql-server/sql"
	"github.com/dolthub/go-mysql-server/sql/types"
	"github.com/shopspring/decimal"

	"github.com/tileflight/tileflight/errkind"
	"github.com/tileflight/tileflight/sqlsvc/dialect"
)

var _ gms.FunctionProvider = (*provider)(nil)

// functions are the engine functions sqlsvc adds, by lower-case name.
var functions = map[string]gms.Function{
	"date_trunc":         gms.FunctionN{Name: "date_trunc", Fn: newFunc("date_trunc", 2, types.DatetimeMaxPrecision, dateTrunc)},
	dialect.QuantileFunc: gms.FunctionN{Name: dialect.QuantileFunc, Fn: newFunc(dialect.QuantileFunc, 3, types.Float64, quantileOf)},
	dialect.BoolFunc:     gms.FunctionN{Name: dialect.BoolFunc, Fn: newFunc(dialect.BoolFunc, 1, types.Boolean, toBool)},
}

// Function gives the engine sqlsvc's functions (its own otherwise).
func (p *provider) Function(_ *gms.Context, name string) (gms.Function, bool) {
	f, ok := functions[strings.ToLower(name)]
	return f, ok
}

// newFunc makes a function of n arguments whose value eval computes from
// the arguments' values (a NULL argument gives NULL).
func newFunc(name string, n int, typ gms.Type, eval func(ctx *gms.Context, vals []any) (any, error)) gms.CreateFuncNArgs {
	return func(args ...gms.Expression) (gms.Expression, error) {
		if len(args) != n {
			return nil, gms.ErrInvalidArgumentNumber.New(name, n, len(args))
		}
		return &funcExpr{name: name, args: args, typ: typ, eval: eval}, nil
	}
}

// funcExpr is a call of one of sqlsvc's functions.
type funcExpr struct {
	name string
	args []gms.Expression
	typ  gms.Type
	eval func(ctx *gms.Context, vals []any) (any, error)
}

var _ gms.FunctionExpression = (*funcExpr)(nil)

func (f *funcExpr) FunctionName() string { return f.name }
func (f *funcExpr) Description() string  { return "tileflight's " + f.name }
func (f *funcExpr) Type() gms.Type       { return f.typ }
func (f *funcExpr) IsNullable() bool     { return true }
func (f *funcExpr) Children() []gms.Expression {
	return f.args
}

func (f *funcExpr) Resolved() bool {
	for _, a := range f.args {
		if !a.Resolved() {
			return false
		}
	}
	return true
}

func (f *funcExpr) String() string {
	parts := make([]string, len(f.args))
	for i, a := range f.args {
		parts[i] = a.String()
	}
	return f.name + "(" + strings.Join(parts, ", ") + ")"
}

func (f *funcExpr) WithChildren(children ...gms.Expression) (gms.Expression, error) {
	if len(children) != len(f.args) {
		return nil, gms.ErrInvalidChildrenNumber.New(f, len(children), len(f.args))
	}
	n := *f
	n.args = children
	return &n, nil
}

func (f *funcExpr) Eval(ctx *gms.Context, row gms.Row) (any, error) {
	vals := make([]any, len(f.args))
	for i, a := range f.args {
		v, err := a.Eval(ctx, row)
		if err != nil {
			return nil, err
		}
		if v == nil {
			return nil, nil
		}
		vals[i] = v
	}
	return f.eval(ctx, vals)
}

// dateTrunc is date_trunc('unit', t): t cut down to the start of its
// unit (week: the Monday), a timestamp, as in DuckDB.
func dateTrunc(ctx *gms.Context, vals []any) (any, error) {
	unit, ok := vals[0].(string)
	if !ok {
		return nil, errkind.Errorf(errkind.InvalidArgument, "date_trunc: the unit is a string such as 'month', got %v", vals[0])
	}
	v, _, err := types.DatetimeMaxPrecision.Convert(ctx, vals[1])
	if err != nil {
		return nil, errkind.Errorf(errkind.InvalidArgument, "date_trunc(%q, %v): not a date or timestamp: %v", unit, vals[1], err)
	}
	t, ok := v.(time.Time)
	if !ok {
		return nil, errkind.Errorf(errkind.InvalidArgument, "date_trunc(%q, %v): not a date or timestamp", unit, vals[1])
	}
	return truncTime(unit, t.UTC())
}

// truncTime cuts t to the start of unit (DuckDB's unit names and
// abbreviations).
func truncTime(unit string, t time.Time) (time.Time, error) {
	y, m, d := t.Date()
	day := func(y int, m time.Month, d int) time.Time { return time.Date(y, m, d, 0, 0, 0, 0, time.UTC) }
	switch strings.ToLower(strings.TrimSpace(unit)) {
	case "microsecond", "microseconds", "us", "usec", "usecs", "usecond", "useconds":
		return t.Truncate(time.Microsecond), nil
	case "millisecond", "milliseconds", "ms", "msec", "msecs", "msecond", "mseconds":
		return t.Truncate(time.Millisecond), nil
	case "second", "seconds", "s", "sec", "secs":
		return t.Truncate(time.Second), nil
	case "minute", "minutes", "m", "min", "mins":
		return t.Truncate(time.Minute), nil
	case "hour", "hours", "h", "hr", "hrs":
		return t.Truncate(time.Hour), nil
	case "day", "days", "d", "dayofmonth":
		return day(y, m, d), nil
	case "week", "weeks", "w", "weekofyear":
		back := (int(t.Weekday()) + 6) % 7 // days since Monday
		return day(y, m, d-back), nil
	case "month", "months", "mon", "mons":
		return day(y, m, 1), nil
	case "quarter", "quarters":
		return day(y, time.Month((int(m)-1)/3*3+1), 1), nil
	case "year", "years", "y", "yr", "yrs":
		return day(y, 1, 1), nil
	case "decade", "decades", "dec", "decs":
		return day(floorTo(y, 10), 1, 1), nil
	case "century", "centuries", "cent", "c":
		return day(floorTo(y, 100), 1, 1), nil
	case "millennium", "millennia", "mil", "mils", "millenium":
		return day(floorTo(y, 1000), 1, 1), nil
	}
	return time.Time{}, errkind.Errorf(errkind.InvalidArgument, "date_trunc: unit %q is not one of microsecond, millisecond, second, minute, hour, day, week, month, quarter, year, decade, century, millennium", unit)
}

// floorTo rounds y down to a multiple of n.
func floorTo(y, n int) int {
	if y < 0 && y%n != 0 {
		return y/n*n - n
	}
	return y / n * n
}

// quantileOf is QuantileFunc: the quantile of a group's values (a JSON
// array from json_arrayagg; NULLs skipped) at the fraction p.
func quantileOf(ctx *gms.Context, vals []any) (any, error) {
	doc, ok := vals[0].(gms.JSONWrapper)
	if !ok {
		return nil, fmt.Errorf("quantile: internal: the values are a %T", vals[0])
	}
	raw, err := doc.ToInterface()
	if err != nil {
		return nil, err
	}
	list, _ := raw.([]any)
	pv, _, err := types.Float64.Convert(ctx, vals[1])
	if err != nil {
		return nil, errkind.Errorf(errkind.InvalidArgument, "quantile: the fraction %v is not a number", vals[1])
	}
	p := pv.(float64)
	if !(p >= 0 && p <= 1) {
		return nil, errkind.Errorf(errkind.InvalidArgument, "quantile: the fraction %v is not between 0 and 1", vals[1])
	}
	mode, err := strconv.Atoi(fmt.Sprint(vals[2]))
	if err != nil || mode < 0 || mode > 3 {
		return nil, fmt.Errorf("quantile: internal: mode %v", vals[2])
	}
	xs := make([]float64, 0, len(list))
	for _, v := range list {
		if v == nil {
			continue
		}
		f, ok := number(v)
		if !ok {
			return nil, errkind.Errorf(errkind.InvalidArgument, "median and quantiles take numbers, got %v (%T)", v, v)
		}
		xs = append(xs, f)
	}
	return quantile(xs, p, mode&1 == 1, mode&2 == 2), nil
}

// quantile is the p-quantile of xs (nil when empty): interpolated
// (PostgreSQL's percentile_cont) or discrete (percentile_disc: the first
// value whose cumulative share reaches p), over xs ascending or
// descending.
func quantile(xs []float64, p float64, disc, desc bool) any {
	if len(xs) == 0 {
		return nil
	}
	slices.Sort(xs)
	if desc {
		slices.Reverse(xs)
	}
	n := len(xs)
	if disc {
		// The tolerance keeps 0.7*10 (7.000000000000001 in binary) at 7.
		i := int(math.Ceil(p*float64(n)-1e-9)) - 1
		return xs[min(max(i, 0), n-1)]
	}
	pos := p * float64(n-1)
	lo := int(math.Floor(pos))
	if lo >= n-1 {
		return xs[n-1]
	}
	return xs[lo] + (pos-float64(lo))*(xs[lo+1]-xs[lo])
}

// number is a value of json_arrayagg as a float64.
func number(v any) (float64, bool) {
	switch x := v.(type) {
	case float64:
		return x, true
	case float32:
		return float64(x), true
	case int:
		return float64(x), true
	case int8:
		return float64(x), true
	case int16:
		return float64(x), true
	case int32:
		return float64(x), true
	case int64:
		return float64(x), true
	case uint8:
		return float64(x), true
	case uint16:
		return float64(x), true
	case uint32:
		return float64(x), true
	case uint64:
		return float64(x), true
	case decimal.Decimal:
		f, _ := x.Float64()
		return f, true
	case bool:
		if x {
			return 1, true
		}
		return 0, true
	}
	return 0, false
}

// toBool is BoolFunc, x::BOOLEAN: numbers are true unless 0; strings
// true/t/yes/y/on/1 and false/f/no/n/off/0 (any case).
func toBool(_ *gms.Context, vals []any) (any, error) {
	v := vals[0]
	if s, ok := v.(string); ok {
		switch strings.ToLower(strings.TrimSpace(s)) {
		case "true", "t", "yes", "y", "on", "1":
			return true, nil
		case "false", "f", "no", "n", "off", "0":
			return false, nil
		}
		return nil, errkind.Errorf(errkind.InvalidArgument, "cannot cast %q to BOOLEAN", s)
	}
	if f, ok := number(v); ok {
		return f != 0, nil
	}
	return nil, errkind.Errorf(errkind.InvalidArgument, "cannot cast %v (%T) to BOOLEAN", v, v)
}

// groupConcatMax is the engine's group_concat_max_len: string_agg and
// group_concat results up to 1 GiB (MySQL's default cuts them at 1 KiB).
const groupConcatMax = uint64(1 << 30)
