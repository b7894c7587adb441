// Package groupagg owns the Flight SQL layer's grouped aggregation over
// Arrow record batches: GROUP BY key columns (integers, floats, strings,
// booleans; a NULL key is a group of its own, as in SQL) with COUNT(*),
// COUNT(col), SUM, AVG, MIN and MAX, computed a column at a time over each
// batch rather than a row at a time. A Table holds one partial state;
// several Tables fed from different batches Merge into one. The values a
// Table gives are the ones the SQL engine's own aggregation buffers give
// for the same rows (COUNT as int64, SUM and AVG as float64 sums of the
// values converted to float64, NULL when a group has no value; MIN and MAX
// and the keys as the column's Go values), so that a statement's result
// does not change when its GROUP BY runs here. Every group is charged to a
// Budget; past it Add and Merge fail with a RESOURCE_EXHAUSTED error
// (ErrTooManyGroups) and the caller may run the statement another way.
package groupagg

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync/atomic"

	"github.com/apache/arrow-go/v18/arrow"
	arr "github.com/apache/arrow-go/v18/arrow/array"

	"github.com/tileflight/tileflight/errkind"
)

// Op is one aggregate function.
type Op int

const (
	CountStar Op = iota // COUNT(*): rows
	Count               // COUNT(col): non-null values
	Sum                 // SUM(col) as float64
	Avg                 // AVG(col) as float64
	Min                 // MIN(col) as the column's value
	Max                 // MAX(col) as the column's value
	// Any is a column selected but not grouped by (MySQL's "any value"
	// of the group): its first non-null value seen, NULL when none.
	Any
)

func (o Op) String() string {
	switch o {
	case CountStar:
		return "count(*)"
	case Count:
		return "count"
	case Sum:
		return "sum"
	case Avg:
		return "avg"
	case Min:
		return "min"
	case Max:
		return "max"
	case Any:
		return "any"
	}
	return fmt.Sprintf("op(%d)", int(o))
}

// Agg is one aggregate over the input column Col (ignored by CountStar).
type Agg struct {
	Op  Op
	Col int
}

// ErrTooManyGroups is the error (wrapped, of kind RESOURCE_EXHAUSTED) of a
// grouping whose groups outgrow its Budget.
var ErrTooManyGroups = errors.New("GROUP BY: too many groups for the grouping memory bound")

// Budget bounds the memory the groups of one statement hold, over all of
// its Tables.
type Budget struct {
	Max  int64 // bytes; <= 0: DefaultBudget
	used atomic.Int64
}

// DefaultBudget is the bound of a Budget whose Max is not set.
const DefaultBudget = 256 << 20

// Used is what the Tables charged to b hold now.
func (b *Budget) Used() int64 { return b.used.Load() }

func (b *Budget) charge(n int64) error {
	max := b.Max
	if max <= 0 {
		max = DefaultBudget
	}
	if b.used.Add(n) > max {
		b.used.Add(-n)
		return errkind.Errorf(errkind.ResourceExhausted, "%v (%d bytes)", ErrTooManyGroups, max)
	}
	return nil
}

// kind is how a column's values are held.
type kind int

const (
	kInt kind = iota
	kUint
	kFloat
	kString
	kBool
)

func kindOf(t arrow.DataType) (kind, bool) {
	switch t.ID() {
	case arrow.INT8, arrow.INT16, arrow.INT32, arrow.INT64:
		return kInt, true
	case arrow.UINT8, arrow.UINT16, arrow.UINT32, arrow.UINT64:
		return kUint, true
	case arrow.FLOAT32, arrow.FLOAT64:
		return kFloat, true
	case arrow.STRING, arrow.LARGE_STRING, arrow.STRING_VIEW:
		return kString, true
	case arrow.BOOL:
		return kBool, true
	}
	return 0, false
}

// KeyType says whether a column of type t can be a group key.
func KeyType(t arrow.DataType) bool { _, ok := kindOf(t); return ok }

// AggType says whether op can aggregate a column of type t.
func AggType(op Op, t arrow.DataType) bool {
	k, ok := kindOf(t)
	switch op {
	case CountStar:
		return true
	case Count, Any:
		return ok
	case Sum, Avg:
		return ok && (k == kInt || k == kUint || k == kFloat)
	case Min, Max:
		return ok && k != kBool
	}
	return false
}

// aggState is one aggregate's state of every group.
type aggState struct {
	Agg
	k    kind
	typ  arrow.DataType
	cnt  []int64   // rows (CountStar), values (the others)
	sum  []float64 // Sum, Avg
	i64  []int64   // Min, Max of kInt
	u64  []uint64  // Min, Max of kUint
	f64  []float64 // Min, Max of kFloat
	strs []string  // Min, Max of kString
	anys []any     // Any
}

// Table is the partial state of one grouping.
type Table struct {
	keys   []int
	ktypes []arrow.DataType
	kkinds []kind
	aggs   []aggState
	budget *Budget
	held   int64

	// groups: the encoded key of each group and its key values
	enc  []string
	vals [][]any
	// index: encoded key -> group; ints: the one integer key's value ->
	// group (the fast path), nullGroup its NULL group (-1: none)
	index     map[string]int32
	ints      map[int64]int32
	nullGroup int32
	intKey    bool
	// direct: the groups of key values 0 .. directKeys-1 (-1: none yet)
	direct []int32

	gids []int32
	buf  []byte
}

// New returns an empty Table grouping batches of schema sc by the columns
// keys with the aggregates aggs, charging budget (nil: a Budget of its
// own).
func New(sc *arrow.Schema, keys []int, aggs []Agg, budget *Budget) (*Table, error) {
	if budget == nil {
		budget = &Budget{}
	}
	t := &Table{keys: keys, budget: budget, index: map[string]int32{}, nullGroup: -1}
	for _, c := range keys {
		if c < 0 || c >= sc.NumFields() {
			return nil, errkind.Errorf(errkind.InvalidArgument, "GROUP BY: key column %d of %d", c, sc.NumFields())
		}
		f := sc.Field(c)
		k, ok := kindOf(f.Type)
		if !ok {
			return nil, errkind.Errorf(errkind.Unimplemented, "GROUP BY: column %q of type %s cannot be a key here", f.Name, f.Type)
		}
		t.ktypes = append(t.ktypes, f.Type)
		t.kkinds = append(t.kkinds, k)
	}
	t.intKey = len(keys) == 1 && (t.kkinds[0] == kInt || t.kkinds[0] == kBool)
	if t.intKey {
		t.ints = map[int64]int32{}
	}
	for _, a := range aggs {
		st := aggState{Agg: a}
		if a.Op != CountStar {
			if a.Col < 0 || a.Col >= sc.NumFields() {
				return nil, errkind.Errorf(errkind.InvalidArgument, "GROUP BY: %s of column %d of %d", a.Op, a.Col, sc.NumFields())
			}
			f := sc.Field(a.Col)
			if !AggType(a.Op, f.Type) {
				return nil, errkind.Errorf(errkind.Unimplemented, "GROUP BY: %s(%s) of type %s is not computed here", a.Op, f.Name, f.Type)
			}
			st.typ = f.Type
			st.k, _ = kindOf(f.Type)
		}
		t.aggs = append(t.aggs, st)
	}
	return t, nil
}

// Len is the number of groups.
func (t *Table) Len() int { return len(t.enc) }

// Bytes is what the groups hold, as charged to the Budget.
func (t *Table) Bytes() int64 { return t.held }

// Release gives the Table's charge back to its Budget (the Table is not
// used after).
func (t *Table) Release() {
	t.budget.used.Add(-t.held)
	t.held = 0
}

// groupBytes is the charge of one group whose encoded key is n bytes.
func (t *Table) groupBytes(n int) int64 {
	// the key twice (index and enc), map and slice overhead, key values,
	// and the aggregate states
	return int64(2*n+64+24*len(t.keys)) + int64(len(t.aggs))*24
}

// newGroup adds a group of encoded key enc and key values vals.
func (t *Table) newGroup(enc string, vals []any) (int32, error) {
	if len(t.enc) >= math.MaxInt32 {
		return 0, errkind.Errorf(errkind.ResourceExhausted, "%v (%d groups)", ErrTooManyGroups, math.MaxInt32)
	}
	c := t.groupBytes(len(enc))
	for _, v := range vals {
		if s, ok := v.(string); ok {
			c += int64(len(s))
		}
	}
	if err := t.budget.charge(c); err != nil {
		return 0, err
	}
	t.held += c
	g := int32(len(t.enc))
	t.enc = append(t.enc, enc)
	t.vals = append(t.vals, vals)
	for i := range t.aggs {
		a := &t.aggs[i]
		a.cnt = append(a.cnt, 0)
		switch a.Op {
		case Sum, Avg:
			a.sum = append(a.sum, 0)
		case Any:
			a.anys = append(a.anys, nil)
		case Min, Max:
			switch a.k {
			case kInt:
				a.i64 = append(a.i64, 0)
			case kUint:
				a.u64 = append(a.u64, 0)
			case kFloat:
				a.f64 = append(a.f64, 0)
			case kString:
				a.strs = append(a.strs, "")
			}
		}
	}
	return g, nil
}

// Add folds one batch (of the schema New was given) into the groups.
func (t *Table) Add(rec arrow.RecordBatch) error {
	n := int(rec.NumRows())
	if n == 0 {
		return nil
	}
	if cap(t.gids) < n {
		t.gids = make([]int32, n)
	}
	gids := t.gids[:n]
	var err error
	if t.intKey {
		err = t.groupInts(rec.Column(t.keys[0]), gids)
	} else {
		err = t.groupEncoded(rec, gids)
	}
	if err != nil {
		return err
	}
	for i := range t.aggs {
		a := &t.aggs[i]
		if a.Op == CountStar {
			for _, g := range gids {
				a.cnt[g]++
			}
			continue
		}
		if err := a.add(rec.Column(a.Col), gids); err != nil {
			return err
		}
	}
	return nil
}

// directKeys is the range [0, directKeys) of integer key values whose
// groups are found by indexing a slice rather than by hashing.
const directKeys = 4096

// groupInts finds the groups of a batch grouped by one integer (or
// boolean) column.
func (t *Table) groupInts(c arrow.Array, gids []int32) error {
	switch x := c.(type) {
	case *arr.Int8:
		return groupIntVals(t, c, x.Int8Values(), gids)
	case *arr.Int16:
		return groupIntVals(t, c, x.Int16Values(), gids)
	case *arr.Int32:
		return groupIntVals(t, c, x.Int32Values(), gids)
	case *arr.Int64:
		return groupIntVals(t, c, x.Int64Values(), gids)
	case *arr.Boolean:
		vals := make([]int8, x.Len())
		for i := range vals {
			if x.Value(i) {
				vals[i] = 1
			}
		}
		return groupIntVals(t, c, vals, gids)
	}
	return errkind.Errorf(errkind.Internal, "GROUP BY: key column of type %s is not an integer", c.DataType())
}

type signed interface {
	~int8 | ~int16 | ~int32 | ~int64
}

func groupIntVals[T signed](t *Table, c arrow.Array, vals []T, gids []int32) error {
	nulls := c.NullN() > 0
	for i := range gids {
		if nulls && c.IsNull(i) {
			if t.nullGroup < 0 {
				g, err := t.newGroup(string([]byte{0}), []any{nil})
				if err != nil {
					return err
				}
				t.nullGroup = g
			}
			gids[i] = t.nullGroup
			continue
		}
		v := int64(vals[i])
		if uint64(v) < directKeys && len(t.direct) > 0 {
			if g := t.direct[v]; g >= 0 {
				gids[i] = g
				continue
			}
		}
		g, err := t.intGroup(v, c, i)
		if err != nil {
			return err
		}
		gids[i] = g
	}
	return nil
}

// intGroup finds or adds the group of integer key v (row i of c).
func (t *Table) intGroup(v int64, c arrow.Array, i int) (int32, error) {
	g, ok := t.ints[v]
	if !ok {
		var err error
		if g, err = t.newGroup(encodeInt(v), []any{value(c, i)}); err != nil {
			return 0, err
		}
		t.ints[v] = g
	}
	t.setDirect(v, g)
	return g, nil
}

func (t *Table) setDirect(v int64, g int32) {
	if uint64(v) >= directKeys {
		return
	}
	if t.direct == nil {
		t.direct = make([]int32, directKeys)
		for i := range t.direct {
			t.direct[i] = -1
		}
	}
	t.direct[v] = g
}

func encodeInt(v int64) string {
	var b [9]byte
	b[0] = 1
	binary.LittleEndian.PutUint64(b[1:], uint64(v))
	return string(b[:])
}

// groupEncoded finds the groups of a batch by encoding each row's keys.
func (t *Table) groupEncoded(rec arrow.RecordBatch, gids []int32) error {
	cols := make([]arrow.Array, len(t.keys))
	enc := make([]func([]byte, int) []byte, len(t.keys))
	for i, k := range t.keys {
		cols[i] = rec.Column(k)
		enc[i] = keyEncoder(cols[i], t.kkinds[i])
	}
	for i := range gids {
		b := t.buf[:0]
		for _, e := range enc {
			b = e(b, i)
		}
		t.buf = b
		g, ok := t.index[string(b)]
		if !ok {
			vals := make([]any, len(cols))
			for j, c := range cols {
				vals[j] = value(c, i)
			}
			var err error
			g, err = t.newGroup(string(b), vals)
			if err != nil {
				return err
			}
			t.index[t.enc[g]] = g
		}
		gids[i] = g
	}
	return nil
}

// keyEncoder appends the encoding of row i of c: a null byte, then 8
// bytes of a number or a boolean, or a string's length and bytes.
func keyEncoder(c arrow.Array, k kind) func([]byte, int) []byte {
	var val func([]byte, int) []byte
	switch x := c.(type) {
	case *arr.Int8:
		v := x.Int8Values()
		val = func(b []byte, i int) []byte { return binary.LittleEndian.AppendUint64(b, uint64(int64(v[i]))) }
	case *arr.Int16:
		v := x.Int16Values()
		val = func(b []byte, i int) []byte { return binary.LittleEndian.AppendUint64(b, uint64(int64(v[i]))) }
	case *arr.Int32:
		v := x.Int32Values()
		val = func(b []byte, i int) []byte { return binary.LittleEndian.AppendUint64(b, uint64(int64(v[i]))) }
	case *arr.Int64:
		v := x.Int64Values()
		val = func(b []byte, i int) []byte { return binary.LittleEndian.AppendUint64(b, uint64(v[i])) }
	case *arr.Boolean:
		val = func(b []byte, i int) []byte {
			var u uint64
			if x.Value(i) {
				u = 1
			}
			return binary.LittleEndian.AppendUint64(b, u)
		}
	case *arr.Float32:
		v := x.Float32Values()
		val = func(b []byte, i int) []byte {
			return binary.LittleEndian.AppendUint64(b, math.Float64bits(float64(v[i])))
		}
	case *arr.Float64:
		v := x.Float64Values()
		val = func(b []byte, i int) []byte { return binary.LittleEndian.AppendUint64(b, math.Float64bits(v[i])) }
	case *arr.String:
		val = func(b []byte, i int) []byte {
			s := x.Value(i)
			return append(binary.LittleEndian.AppendUint32(b, uint32(len(s))), s...)
		}
	case *arr.LargeString:
		val = func(b []byte, i int) []byte {
			s := x.Value(i)
			return append(binary.LittleEndian.AppendUint32(b, uint32(len(s))), s...)
		}
	default:
		val = func(b []byte, i int) []byte {
			switch k {
			case kString:
				s := stringAt(c, i)
				return append(binary.LittleEndian.AppendUint32(b, uint32(len(s))), s...)
			case kUint:
				return binary.LittleEndian.AppendUint64(b, uintAt(c, i))
			}
			return b
		}
	}
	if c.NullN() == 0 {
		return func(b []byte, i int) []byte { return val(append(b, 1), i) }
	}
	return func(b []byte, i int) []byte {
		if c.IsNull(i) {
			return append(b, 0)
		}
		return val(append(b, 1), i)
	}
}

func stringAt(c arrow.Array, i int) string {
	switch x := c.(type) {
	case *arr.String:
		return x.Value(i)
	case *arr.LargeString:
		return x.Value(i)
	case *arr.StringView:
		return x.Value(i)
	}
	return ""
}

func uintAt(c arrow.Array, i int) uint64 {
	switch x := c.(type) {
	case *arr.Uint8:
		return uint64(x.Value(i))
	case *arr.Uint16:
		return uint64(x.Value(i))
	case *arr.Uint32:
		return uint64(x.Value(i))
	case *arr.Uint64:
		return x.Value(i)
	}
	return 0
}

// value is row i of c as a Go value of the column's own type (a string
// copied out of the batch), nil for NULL.
func value(c arrow.Array, i int) any {
	if c.IsNull(i) {
		return nil
	}
	switch x := c.(type) {
	case *arr.Int8:
		return x.Value(i)
	case *arr.Int16:
		return x.Value(i)
	case *arr.Int32:
		return x.Value(i)
	case *arr.Int64:
		return x.Value(i)
	case *arr.Uint8:
		return x.Value(i)
	case *arr.Uint16:
		return x.Value(i)
	case *arr.Uint32:
		return x.Value(i)
	case *arr.Uint64:
		return x.Value(i)
	case *arr.Float32:
		return x.Value(i)
	case *arr.Float64:
		return x.Value(i)
	case *arr.Boolean:
		return x.Value(i)
	}
	return strings.Clone(stringAt(c, i))
}

// add folds column c of a batch whose rows are in groups gids.
func (a *aggState) add(c arrow.Array, gids []int32) error {
	if !arrow.TypeEqual(c.DataType(), a.typ) {
		return errkind.Errorf(errkind.Internal, "GROUP BY: %s over a column of type %s, planned for %s", a.Op, c.DataType(), a.typ)
	}
	if a.Op == Any {
		nulls := c.NullN() > 0
		for i, g := range gids {
			if a.cnt[g] == 0 && (!nulls || c.IsValid(i)) {
				a.anys[g] = value(c, i)
				a.cnt[g]++
			}
		}
		return nil
	}
	if a.Op == Count {
		nulls := c.NullN() > 0
		for i, g := range gids {
			if !nulls || c.IsValid(i) {
				a.cnt[g]++
			}
		}
		return nil
	}
	switch x := c.(type) {
	case *arr.Int8:
		addNum(a, x, x.Int8Values(), gids)
	case *arr.Int16:
		addNum(a, x, x.Int16Values(), gids)
	case *arr.Int32:
		addNum(a, x, x.Int32Values(), gids)
	case *arr.Int64:
		addNum(a, x, x.Int64Values(), gids)
	case *arr.Uint8:
		addNum(a, x, x.Uint8Values(), gids)
	case *arr.Uint16:
		addNum(a, x, x.Uint16Values(), gids)
	case *arr.Uint32:
		addNum(a, x, x.Uint32Values(), gids)
	case *arr.Uint64:
		addNum(a, x, x.Uint64Values(), gids)
	case *arr.Float32:
		addNum(a, x, x.Float32Values(), gids)
	case *arr.Float64:
		addNum(a, x, x.Float64Values(), gids)
	default:
		if a.k != kString {
			return errkind.Errorf(errkind.Internal, "GROUP BY: %s over a column of type %s", a.Op, c.DataType())
		}
		nulls := c.NullN() > 0
		for i, g := range gids {
			if nulls && c.IsNull(i) {
				continue
			}
			a.foldString(g, stringAt(c, i))
		}
	}
	return nil
}

type number interface {
	~int8 | ~int16 | ~int32 | ~int64 | ~uint8 | ~uint16 | ~uint32 | ~uint64 | ~float32 | ~float64
}

// addNum folds a numeric column's values vals.
func addNum[T number](a *aggState, c arrow.Array, vals []T, gids []int32) {
	nulls := c.NullN() > 0
	switch a.Op {
	case Sum, Avg:
		if !nulls {
			for i, g := range gids {
				a.sum[g] += float64(vals[i])
				a.cnt[g]++
			}
			return
		}
		for i, g := range gids {
			if c.IsValid(i) {
				a.sum[g] += float64(vals[i])
				a.cnt[g]++
			}
		}
	case Min, Max:
		for i, g := range gids {
			if nulls && c.IsNull(i) {
				continue
			}
			switch a.k {
			case kInt:
				a.foldInt(g, int64(vals[i]))
			case kUint:
				a.foldUint(g, uint64(vals[i]))
			case kFloat:
				a.foldFloat(g, float64(vals[i]))
			}
		}
	}
}

func (a *aggState) foldInt(g int32, v int64) {
	if a.cnt[g] == 0 || (a.Op == Min && v < a.i64[g]) || (a.Op == Max && v > a.i64[g]) {
		a.i64[g] = v
	}
	a.cnt[g]++
}

func (a *aggState) foldUint(g int32, v uint64) {
	if a.cnt[g] == 0 || (a.Op == Min && v < a.u64[g]) || (a.Op == Max && v > a.u64[g]) {
		a.u64[g] = v
	}
	a.cnt[g]++
}

func (a *aggState) foldFloat(g int32, v float64) {
	if a.cnt[g] == 0 || (a.Op == Min && v < a.f64[g]) || (a.Op == Max && v > a.f64[g]) {
		a.f64[g] = v
	}
	a.cnt[g]++
}

func (a *aggState) foldString(g int32, v string) {
	if a.cnt[g] == 0 || (a.Op == Min && v < a.strs[g]) || (a.Op == Max && v > a.strs[g]) {
		a.strs[g] = strings.Clone(v)
	}
	a.cnt[g]++
}

// lookup finds or adds the group of encoded key enc and values vals.
func (t *Table) lookup(enc string, vals []any) (int32, error) {
	if t.intKey {
		if vals[0] == nil {
			if t.nullGroup < 0 {
				g, err := t.newGroup(enc, vals)
				if err != nil {
					return 0, err
				}
				t.nullGroup = g
			}
			return t.nullGroup, nil
		}
		v := int64(binary.LittleEndian.Uint64([]byte(enc[1:])))
		g, ok := t.ints[v]
		if !ok {
			var err error
			if g, err = t.newGroup(enc, vals); err != nil {
				return 0, err
			}
			t.ints[v] = g
			t.setDirect(v, g)
		}
		return g, nil
	}
	g, ok := t.index[enc]
	if !ok {
		var err error
		if g, err = t.newGroup(enc, vals); err != nil {
			return 0, err
		}
		t.index[enc] = g
	}
	return g, nil
}

// Merge folds o (a Table of the same keys and aggregates) into t and
// releases o.
func (t *Table) Merge(o *Table) error {
	defer o.Release()
	if len(o.keys) != len(t.keys) || len(o.aggs) != len(t.aggs) {
		return errkind.Errorf(errkind.Internal, "GROUP BY: merging tables of different groupings")
	}
	for og := range o.enc {
		g, err := t.lookup(o.enc[og], o.vals[og])
		if err != nil {
			return err
		}
		for i := range t.aggs {
			a, b := &t.aggs[i], &o.aggs[i]
			n := b.cnt[og]
			switch a.Op {
			case Sum, Avg:
				a.sum[g] += b.sum[og]
			case Any:
				if a.cnt[g] == 0 && n > 0 {
					a.anys[g] = b.anys[og]
				}
			case Min, Max:
				if n > 0 {
					switch a.k {
					case kInt:
						a.foldInt(g, b.i64[og])
					case kUint:
						a.foldUint(g, b.u64[og])
					case kFloat:
						a.foldFloat(g, b.f64[og])
					case kString:
						a.foldString(g, b.strs[og])
					}
					n-- // the fold counted one
				}
			}
			a.cnt[g] += n
		}
	}
	return nil
}

// Row is group g: its key values, then its aggregates.
func (t *Table) Row(g int) []any {
	out := make([]any, 0, len(t.keys)+len(t.aggs))
	out = append(out, t.vals[g]...)
	for i := range t.aggs {
		a := &t.aggs[i]
		n := a.cnt[g]
		switch {
		case a.Op == CountStar || a.Op == Count:
			out = append(out, n)
		case n == 0:
			out = append(out, nil)
		case a.Op == Sum:
			out = append(out, a.sum[g])
		case a.Op == Avg:
			out = append(out, a.sum[g]/float64(n))
		case a.Op == Any:
			out = append(out, a.anys[g])
		default:
			out = append(out, a.minMax(g))
		}
	}
	return out
}

// minMax is a MIN or MAX of group g as a value of the column's Go type.
func (a *aggState) minMax(g int) any {
	switch a.typ.ID() {
	case arrow.INT8:
		return int8(a.i64[g])
	case arrow.INT16:
		return int16(a.i64[g])
	case arrow.INT32:
		return int32(a.i64[g])
	case arrow.INT64:
		return a.i64[g]
	case arrow.UINT8:
		return uint8(a.u64[g])
	case arrow.UINT16:
		return uint16(a.u64[g])
	case arrow.UINT32:
		return uint32(a.u64[g])
	case arrow.UINT64:
		return a.u64[g]
	case arrow.FLOAT32:
		return float32(a.f64[g])
	case arrow.FLOAT64:
		return a.f64[g]
	}
	return a.strs[g]
}
