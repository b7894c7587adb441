package cond

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/big"

	"github.com/tileflight/tileflight/errkind"
	"github.com/tileflight/tileflight/format/commits"
	"github.com/tileflight/tileflight/format/datatype"
	"github.com/tileflight/tileflight/format/schema"
)

// Field is a field a bound condition reads.
type Field struct {
	Name       string
	Dim        bool
	Type       datatype.Datatype
	CellValNum uint32
	Nullable   bool
}

// IsVar reports a var-sized field.
func (f Field) IsVar() bool { return f.CellValNum == schema.VarNum }

// Cond is a condition bound to an array schema.
type Cond struct {
	// Text is the condition as the user wrote it.
	Text string
	// Tree selects the cells the condition accepts: value nodes under
	// n-ary AND/OR nodes, with `not` already pushed down the way TileDB's
	// negate does it (ops flipped, AND and OR swapped), so it holds no NOT
	// node.
	Tree *Node
	// Fields lists the fields the tree reads, in order of first use.
	Fields []Field
	// Enumerated is set when the condition compares an attribute that has
	// an enumeration: the tree then compares enumeration indexes, not the
	// values the user wrote.
	Enumerated bool
	// EnumMissing is set when an enumerated comparison named a value its
	// enumeration lacks (rewritten to always-false/true or a null test);
	// EnumNullTest when a null test names an enumerated attribute. TileDB
	// cannot make a delete of either (see DeleteCheck).
	EnumMissing, EnumNullTest bool
}

// DeleteCheck says why TileDB 2.30 would refuse a delete with this
// condition, nil if it would not: on enumerated attributes a delete
// stores the condition rewritten to indexes and negated, and TileDB fails
// to negate a comparison with a value the enumeration lacks ("Invalid
// negation of rewritten query", or for an `in` list of none of its
// values, an empty set) and to build a null test of an enumerated
// attribute ("value size mismatch").
func (c *Cond) DeleteCheck() error {
	switch {
	case c.EnumMissing:
		return errkind.Errorf(errkind.InvalidArgument, "filter %q: a delete cannot compare an enumerated attribute with a value its enumeration lacks (TileDB: invalid negation of rewritten query)", c.Text)
	case c.EnumNullTest:
		return errkind.Errorf(errkind.InvalidArgument, "filter %q: a delete cannot test an enumerated attribute for null (TileDB: value node condition value size mismatch)", c.Text)
	}
	return nil
}

// Keep returns the tree a delete commit stores for this condition: the
// cells to keep, i.e. TileDB's negation of the condition. It fails for a
// comparison with the empty string, which the format cannot tell from a
// null test.
func (c *Cond) Keep() (*commits.Node, error) {
	n, err := c.Tree.Commits()
	if err != nil {
		return nil, err
	}
	return n.Negated(), nil
}

// Field returns the field named name, if the condition reads it.
func (c *Cond) Field(name string) (Field, bool) {
	for _, f := range c.Fields {
		if f.Name == name {
			return f, true
		}
	}
	return Field{}, false
}

// Compile parses text and binds it to s.
func Compile(text string, s *schema.ArraySchema) (*Cond, error) {
	e, err := Parse(text)
	if err != nil {
		return nil, err
	}
	return Bind(e, text, s)
}

type binder struct {
	text   string
	s      *schema.ArraySchema
	fields []Field
	seen   map[string]bool
	// enums holds the enumeration of each enumerated attribute the
	// condition reads.
	enums map[string]*schema.Enumeration
	// enumMissing, enumNull: see Cond.
	enumMissing, enumNull bool
}

// Bind resolves a parsed condition against s: names become attributes or
// dimensions (attributes first, as TileDB-Py looks them up), constants are
// cast to the field's type as TileDB-Py casts them, `x == None` on a field
// that cannot be null becomes ALWAYS_FALSE (and `!= None` ALWAYS_TRUE), as
// TileDB rewrites it. Errors are InvalidArgument with the position.
func Bind(e Expr, text string, s *schema.ArraySchema) (*Cond, error) {
	b := &binder{text: text, s: s, seen: map[string]bool{}, enums: map[string]*schema.Enumeration{}}
	n, err := b.cond(e)
	if err != nil {
		return nil, err
	}
	if len(b.enums) > 0 {
		n = b.rewriteEnums(n)
	}
	return &Cond{Text: text, Tree: n, Fields: b.fields, Enumerated: len(b.enums) > 0,
		EnumMissing: b.enumMissing, EnumNullTest: b.enumNull}, nil
}

func (b *binder) errAt(pos int, format string, args ...any) error {
	return &SyntaxError{Text: b.text, Pos: pos, Msg: fmt.Sprintf(format, args...)}
}

// cond binds an expression that must be a condition.
func (b *binder) cond(e Expr) (*Node, error) {
	switch x := e.(type) {
	case *Logical:
		l, err := b.condOperand(x.L, x)
		if err != nil {
			return nil, err
		}
		r, err := b.condOperand(x.R, x)
		if err != nil {
			return nil, err
		}
		comb := commits.And
		if x.Op == OpOr {
			comb = commits.Or
		}
		return combine(l, r, comb), nil
	case *NotExpr:
		n, err := b.cond(x.X)
		if err != nil {
			return nil, err
		}
		return n.Negated(), nil
	case *Compare:
		return b.compare(x)
	case *Name:
		return nil, b.errAt(x.P, "%s alone is not a condition (compare it: %s == ...)", x, x)
	case *Literal:
		return nil, b.errAt(x.P, "the constant %s alone is not a condition", x)
	case *List:
		return nil, b.errAt(x.P, "a list alone is not a condition (write `field in [...]`)")
	case *Neg:
		return nil, b.errAt(x.P, "a sign applies to numbers only")
	}
	return nil, b.errAt(e.Pos(), "not a condition")
}

func (b *binder) condOperand(e Expr, parent *Logical) (*Node, error) {
	switch e.(type) {
	case *Logical, *NotExpr, *Compare:
		return b.cond(e)
	}
	if parent.Bit {
		op := "&"
		if parent.Op == OpOr {
			op = "|"
		}
		return nil, b.errAt(e.Pos(), "the operands of %s must be conditions: %s binds tighter than comparisons, so parenthesize them, e.g. (a == 1) %s (b == 2)", op, op, op)
	}
	return b.cond(e)
}

// combine joins two trees as TileDB's combine does: children of the same
// combination are flattened into one node.
func combine(l, r *Node, comb commits.Combination) *Node {
	out := &Node{Kind: commits.KindExpr, Combination: comb}
	for _, n := range []*Node{l, r} {
		if n.Kind == commits.KindExpr && n.Combination == comb {
			out.Children = append(out.Children, n.Children...)
		} else {
			out.Children = append(out.Children, n)
		}
	}
	return out
}

func (b *binder) compare(c *Compare) (*Node, error) {
	var out *Node
	for i, op := range c.Ops {
		var n *Node
		var err error
		if op == CmpIn || op == CmpNotIn {
			if len(c.Ops) > 1 {
				return nil, b.errAt(c.OpPos[i], "`%s` cannot be chained with other comparisons; parenthesize", op)
			}
			n, err = b.member(c.Operands[i], op, c.Operands[i+1], c.OpPos[i])
		} else {
			n, err = b.pair(c.Operands[i], op, c.Operands[i+1], c.OpPos[i])
		}
		if err != nil {
			return nil, err
		}
		if out == nil {
			out = n
		} else {
			out = combine(out, n, commits.And)
		}
	}
	return out, nil
}

func (b *binder) resolve(n *Name) (Field, error) {
	for i := range b.s.Attributes {
		a := &b.s.Attributes[i]
		if a.Name == n.Name && n.Kind != NameDim {
			return b.use(Field{Name: a.Name, Type: a.Type, CellValNum: a.CellValNum, Nullable: a.Nullable}, n, a.EnumerationName)
		}
	}
	for i := range b.s.Dimensions {
		d := &b.s.Dimensions[i]
		if d.Name == n.Name && n.Kind != NameAttr {
			if b.s.Type == schema.Dense {
				return Field{}, b.errAt(n.P, "%q is a dimension of a dense array; TileDB applies conditions to the dimensions of sparse arrays only (restrict a dense array's dimensions with \"subarray\")", n.Name)
			}
			return b.use(Field{Name: d.Name, Dim: true, Type: d.Type, CellValNum: d.CellValNum}, n, "")
		}
	}
	switch n.Kind {
	case NameAttr:
		return Field{}, b.errAt(n.P, "the array has no attribute %q", n.Name)
	case NameDim:
		return Field{}, b.errAt(n.P, "the array has no dimension %q", n.Name)
	}
	return Field{}, b.errAt(n.P, "the array has no attribute or dimension %q (quote it if it is a string value)", n.Name)
}

func (b *binder) use(f Field, n *Name, enum string) (Field, error) {
	if enum != "" {
		ref := b.s.EnumerationByName(enum)
		if ref == nil || ref.Enum == nil {
			return Field{}, errkind.Errorf(errkind.DataLoss, "filter: attribute %q: enumeration %q is not in the schema", f.Name, enum)
		}
		e := ref.Enum
		strs := IsString(e.Type) && e.CellValNum == schema.VarNum
		nums := (e.Type.IsInteger() || e.Type.IsFloat()) && e.CellValNum == 1
		if !strs && !nums || !f.Type.IsInteger() || f.CellValNum != 1 {
			return Field{}, errkind.Errorf(errkind.Unimplemented, "filter: position %d: attribute %q: conditions on enumerations of %s values (cell_val_num %d) are not implemented (only var-sized strings and single numbers)", n.P, f.Name, e.Type.TileDBName(), e.CellValNum)
		}
		b.enums[f.Name] = e
	}
	if !b.seen[f.Name] {
		b.seen[f.Name] = true
		b.fields = append(b.fields, f)
	}
	return f, nil
}

// checkField applies TileDB's rules on which fields a value (not a null
// test) may be compared with.
func (b *binder) checkField(f Field, pos int) error {
	str := IsString(f.Type)
	switch f.Type {
	case datatype.Any, datatype.StringUTF16, datatype.StringUTF32, datatype.StringUCS2, datatype.StringUCS4, datatype.Blob, datatype.GeomWKB, datatype.GeomWKT:
		return b.errAt(pos, "field %q: TileDB does not compare values of type %s in conditions", f.Name, f.Type.TileDBName())
	}
	if f.IsVar() && !str {
		return b.errAt(pos, "field %q: a var-sized %s field can only be tested for null (TileDB compares var-sized strings only)", f.Name, f.Type.TileDBName())
	}
	if !f.IsVar() && f.CellValNum != 1 && !str {
		return b.errAt(pos, "field %q: it holds %d values per cell; TileDB compares fields of one value per cell (or strings)", f.Name, f.CellValNum)
	}
	return nil
}

// IsString reports the types TileDB compares as strings (CHAR, STRING_ASCII,
// STRING_UTF8).
func IsString(t datatype.Datatype) bool {
	return t == datatype.Char || t == datatype.StringASCII || t == datatype.StringUTF8
}

func (b *binder) pair(lhs Expr, op CmpOp, rhs Expr, opPos int) (*Node, error) {
	name, isName := lhs.(*Name)
	lit, isLit := rhs.(*Literal)
	if !isName {
		// `5 < x` is `x > 5`.
		if n2, ok := rhs.(*Name); ok {
			if l2, ok := lhs.(*Literal); ok {
				name, lit, isName, isLit = n2, l2, true, true
				op = op.reversed()
			}
		}
	}
	if !isName || !isLit {
		switch {
		case isName:
			if _, ok := rhs.(*Name); ok {
				return nil, b.errAt(rhs.Pos(), "the right-hand side must be a constant, not the field %s (conditions compare a field with a value; quote a string value)", rhs)
			}
			return nil, b.errAt(rhs.Pos(), "cannot compare %s with %s: the right-hand side must be a constant", lhs, describeExpr(rhs))
		case isLit:
			if _, ok := lhs.(*Literal); ok {
				return nil, b.errAt(lhs.Pos(), "a comparison of two constants is not a condition; one side must be a field")
			}
		}
		if _, ok := lhs.(*Literal); ok {
			return nil, b.errAt(rhs.Pos(), "cannot compare %s with %s: one side must be a field", lhs, describeExpr(rhs))
		}
		return nil, b.errAt(lhs.Pos(), "cannot compare %s: the left-hand side must be a field or a constant", describeExpr(lhs))
	}
	f, err := b.resolve(name)
	if err != nil {
		return nil, err
	}
	cop := toCommitsOp(op)
	if lit.Kind == LitNone {
		if op != CmpEQ && op != CmpNE {
			return nil, b.errAt(opPos, "None can only be compared with == or != (a null test)")
		}
		if b.enums[f.Name] != nil {
			b.enumNull = true
		}
		if !f.Nullable {
			// TileDB rewrites null tests of fields that cannot be null.
			if op == CmpEQ {
				cop = commits.OpAlwaysFalse
			} else {
				cop = commits.OpAlwaysTrue
			}
		}
		return &Node{Kind: commits.KindValue, Field: f.Name, Op: cop, Null: true}, nil
	}
	if e := b.enums[f.Name]; e != nil {
		if op != CmpEQ && op != CmpNE && !e.Ordered {
			return nil, b.errAt(opPos, "attribute %q: its enumeration is not ordered, so only ==, !=, in and not in apply (TileDB: cannot apply an inequality operator against an unordered enumeration)", f.Name)
		}
		v, err := b.enumValue(f, lit)
		if err != nil {
			return nil, err
		}
		return &Node{Kind: commits.KindValue, Field: f.Name, Op: cop, Value: v}, nil
	}
	if err := b.checkField(f, name.P); err != nil {
		return nil, err
	}
	v, err := b.cast(f, lit)
	if err != nil {
		return nil, err
	}
	return &Node{Kind: commits.KindValue, Field: f.Name, Op: cop, Value: v}, nil
}

func describeExpr(e Expr) string {
	switch e.(type) {
	case *List:
		return "a list (lists go with `in` / `not in`)"
	case *Compare, *Logical, *NotExpr:
		return "a condition (parenthesize & and | operands: (a == 1) & (b == 2))"
	case *Neg:
		return "a signed non-number"
	}
	return e.String()
}

func (b *binder) member(lhs Expr, op CmpOp, rhs Expr, opPos int) (*Node, error) {
	name, ok := lhs.(*Name)
	if !ok {
		return nil, b.errAt(lhs.Pos(), "the left-hand side of `%s` must be a field (`field in [1, 2]`)", op)
	}
	list, ok := rhs.(*List)
	if !ok {
		return nil, b.errAt(rhs.Pos(), "`%s` takes a list: `%s %s ['l', 'i', 's', 't']`", op, name, op)
	}
	if len(list.Elems) == 0 {
		return nil, b.errAt(list.P, "at least one value must be given to the set membership")
	}
	f, err := b.resolve(name)
	if err != nil {
		return nil, err
	}
	enum := b.enums[f.Name] != nil
	if !enum {
		if err := b.checkField(f, name.P); err != nil {
			return nil, err
		}
	}
	n := &Node{Kind: commits.KindValue, Field: f.Name, Op: toCommitsOp(op)}
	for _, el := range list.Elems {
		lit, ok := el.(*Literal)
		if !ok {
			return nil, b.errAt(el.Pos(), "list members must be constants, not %s", describeExpr(el))
		}
		if lit.Kind == LitNone {
			return nil, b.errAt(el.Pos(), "None cannot be a member of a set (test nulls with `== None`)")
		}
		cast := b.cast
		if enum {
			cast = b.enumValue
		}
		v, err := cast(f, lit)
		if err != nil {
			return nil, err
		}
		n.Members = append(n.Members, v)
	}
	return n, nil
}

func toCommitsOp(op CmpOp) commits.Op {
	switch op {
	case CmpLT:
		return commits.OpLT
	case CmpLE:
		return commits.OpLE
	case CmpGT:
		return commits.OpGT
	case CmpGE:
		return commits.OpGE
	case CmpEQ:
		return commits.OpEQ
	case CmpNE:
		return commits.OpNE
	case CmpIn:
		return commits.OpIn
	}
	return commits.OpNotIn
}

// cast converts a constant to the bytes of one value of f's type, the way
// TileDB-Py's cast_value_to_dtype does (numpy scalar constructors): strings
// are never turned into numbers, floats are truncated toward zero for
// integer fields, integers that do not fit are an error, booleans are 0/1.
func (b *binder) cast(f Field, lit *Literal) ([]byte, error) {
	if lit.Kind == LitNone {
		return nil, b.errAt(lit.P, "None is only allowed in a null test (`== None`, `!= None`)")
	}
	if IsString(f.Type) {
		switch lit.Kind {
		case LitStr, LitBytes:
			if len(lit.Str) == 0 && !f.IsVar() {
				return nil, b.errAt(lit.P, "field %q: an empty string cannot match a fixed-size %s cell", f.Name, f.Type.TileDBName())
			}
			return []byte(lit.Str), nil
		}
		return nil, b.errAt(lit.P, "field %q is a string (%s); compare it with a string, not %s", f.Name, f.Type.TileDBName(), lit)
	}
	if lit.Kind == LitStr || lit.Kind == LitBytes {
		return nil, b.errAt(lit.P, "cannot cast %s to %s (field %q): numeric fields take numbers", lit, typeName(f.Type), f.Name)
	}
	le := binary.LittleEndian
	switch f.Type {
	case datatype.Float32, datatype.Float64:
		var x float64
		if lit.Kind == LitFloat {
			x = lit.Float
		} else {
			x, _ = new(big.Float).SetInt(lit.Int).Float64()
		}
		if f.Type == datatype.Float32 {
			out := make([]byte, 4)
			le.PutUint32(out, math.Float32bits(float32(x)))
			return out, nil
		}
		out := make([]byte, 8)
		le.PutUint64(out, math.Float64bits(x))
		return out, nil
	}
	if !f.Type.IsInteger() {
		return nil, b.errAt(lit.P, "field %q: type %s cannot be compared", f.Name, f.Type.TileDBName())
	}
	var v *big.Int
	if lit.Kind == LitFloat {
		if math.IsNaN(lit.Float) || math.IsInf(lit.Float, 0) {
			return nil, b.errAt(lit.P, "cannot cast %s to %s (field %q)", lit.Text, typeName(f.Type), f.Name)
		}
		v, _ = new(big.Float).SetFloat64(math.Trunc(lit.Float)).Int(nil)
	} else {
		v = lit.Int
	}
	size := f.Type.Size()
	var lo, hi *big.Int
	if f.Type.IsSigned() {
		lo = new(big.Int).Neg(new(big.Int).Lsh(big.NewInt(1), uint(8*size-1)))
		hi = new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), uint(8*size-1)), big.NewInt(1))
	} else {
		lo = big.NewInt(0)
		hi = new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), uint(8*size)), big.NewInt(1))
	}
	if v.Cmp(lo) < 0 || v.Cmp(hi) > 0 {
		return nil, b.errAt(lit.P, "%s is out of bounds for %s (field %q: %s..%s)", lit.Text, typeName(f.Type), f.Name, lo, hi)
	}
	var u uint64
	if v.Sign() < 0 {
		u = uint64(v.Int64())
	} else {
		u = v.Uint64()
	}
	out := make([]byte, 8)
	le.PutUint64(out, u)
	return out[:size], nil
}

func typeName(t datatype.Datatype) string {
	if t == datatype.Bool {
		return "BOOL (uint8)"
	}
	return t.TileDBName()
}

var errInvalid = errkind.InvalidArgument

// enumValue checks a constant compared with an enumerated attribute: one of
// the enumeration's values (a string, or a number cast to the
// enumeration's type as TileDB-Py casts it: 7.5 is 7 for int32 values);
// it stays a value until rewriteEnums.
func (b *binder) enumValue(f Field, lit *Literal) ([]byte, error) {
	if e := b.enums[f.Name]; e != nil && !IsString(e.Type) {
		if lit.Kind == LitStr || lit.Kind == LitBytes {
			return nil, b.errAt(lit.P, "attribute %q has an enumeration of %s: compare it with one of its values (a number), not %s", f.Name, typeName(e.Type), lit)
		}
		return b.cast(Field{Name: f.Name, Type: e.Type, CellValNum: 1}, lit)
	}
	if lit.Kind != LitStr && lit.Kind != LitBytes {
		return nil, b.errAt(lit.P, "attribute %q has an enumeration of strings: compare it with one of its values (a string), not %s", f.Name, lit)
	}
	return []byte(lit.Str), nil
}

// rewriteEnums turns the comparisons of enumerated attributes into
// comparisons of the indexes the cells hold, after negation has been
// pushed down, as TileDB 2.30 does: a value's index replaces it (in an
// ordered enumeration, index order is value order); a value the
// enumeration lacks makes ==, <, <=, >, >= false for every cell and !=
// true for every non-null cell; in / not in keep the members it has, and
// with none left behave as == / != a missing value.
func (b *binder) rewriteEnums(n *Node) *Node {
	if n.Kind == commits.KindExpr {
		out := *n
		out.Children = make([]*Node, len(n.Children))
		for i, c := range n.Children {
			out.Children[i] = b.rewriteEnums(c)
		}
		return &out
	}
	e := b.enums[n.Field]
	if e == nil || n.Null || n.Op == commits.OpAlwaysTrue || n.Op == commits.OpAlwaysFalse {
		return n
	}
	var f Field
	for _, x := range b.fields {
		if x.Name == n.Field {
			f = x
		}
	}
	index := enumIndex(e)
	enc := func(i uint64) []byte {
		out := make([]byte, 8)
		binary.LittleEndian.PutUint64(out, i)
		return out[:f.Type.Size()]
	}
	missing := func(ne bool) *Node {
		b.enumMissing = true
		if !ne {
			return &Node{Kind: commits.KindValue, Field: n.Field, Op: commits.OpAlwaysFalse}
		}
		if f.Nullable {
			return &Node{Kind: commits.KindValue, Field: n.Field, Op: commits.OpNE, Null: true}
		}
		return &Node{Kind: commits.KindValue, Field: n.Field, Op: commits.OpAlwaysTrue}
	}
	out := *n
	switch n.Op {
	case commits.OpIn, commits.OpNotIn:
		out.Members = nil
		for _, m := range n.Members {
			if i, ok := index[string(m)]; ok {
				out.Members = append(out.Members, enc(i))
			}
		}
		if len(out.Members) == 0 {
			return missing(n.Op == commits.OpNotIn)
		}
		return &out
	}
	i, ok := index[string(n.Value)]
	if !ok {
		return missing(n.Op == commits.OpNE)
	}
	out.Value = enc(i)
	return &out
}

// enumIndex maps each value of an enumeration (its bytes, as TileDB's
// value map holds them: so -0.0 is not 0.0) to its index (the first one,
// should a value repeat).
func enumIndex(e *schema.Enumeration) map[string]uint64 {
	m := map[string]uint64{}
	if e.CellValNum != schema.VarNum {
		w := e.Type.Size() * int(e.CellValNum)
		if w <= 0 {
			return m
		}
		for i := 0; i+w <= len(e.Data); i += w {
			if _, dup := m[string(e.Data[i:i+w])]; !dup {
				m[string(e.Data[i:i+w])] = uint64(i / w)
			}
		}
		return m
	}
	n := uint64(len(e.Offsets) / 8)
	for i := uint64(0); i < n; i++ {
		s := binary.LittleEndian.Uint64(e.Offsets[8*i:])
		end := uint64(len(e.Data))
		if i+1 < n {
			end = binary.LittleEndian.Uint64(e.Offsets[8*(i+1):])
		}
		if s > end || end > uint64(len(e.Data)) {
			break // a damaged enumeration: the values past it match nothing
		}
		if _, dup := m[string(e.Data[s:end])]; !dup {
			m[string(e.Data[s:end])] = i
		}
	}
	return m
}
