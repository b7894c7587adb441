// Package cond owns the query-condition language of the `filter` query key
// and the `delete` action (docs/protocol.md, "Array lifecycle"): TileDB-Py's QueryCondition
// syntax, which is a subset of Python expressions.
//
// Parse turns the text into an AST (a real recursive-descent grammar with
// Python's precedence; errors are InvalidArgument and carry the byte
// position). Bind resolves the AST against an array schema the way
// TileDB-Py does (names to attributes or dimensions, values cast to the
// field's type, `not` pushed down as TileDB's negate does) and yields a
// condition tree of format/commits nodes, which both the reader evaluates
// and a delete commit stores. The package does no I/O.
package cond

import (
	"fmt"
	"math/big"
	"strings"
)

// Expr is a node of the parsed, not yet bound, condition.
type Expr interface {
	// Pos is the byte offset of the node in the condition text.
	Pos() int
	String() string
}

// BoolOp joins conditions.
type BoolOp uint8

// The boolean operators: `and`/`&` and `or`/`|`.
const (
	OpAnd BoolOp = iota
	OpOr
)

// Logical is `a and b`, `a & b`, `a or b`, `a | b`.
type Logical struct {
	P    int
	Op   BoolOp
	Bit  bool // written & or | (Python's bitwise operators)
	L, R Expr
}

// NotExpr is `not x`.
type NotExpr struct {
	P int
	X Expr
}

// CmpOp is a comparison operator.
type CmpOp uint8

// Comparison operators.
const (
	CmpLT CmpOp = iota
	CmpLE
	CmpGT
	CmpGE
	CmpEQ
	CmpNE
	CmpIn
	CmpNotIn
)

var cmpText = [...]string{"<", "<=", ">", ">=", "==", "!=", "in", "not in"}

func (o CmpOp) String() string { return cmpText[o] }

// reversed is the operator with its operands swapped (5 < x == x > 5).
func (o CmpOp) reversed() CmpOp {
	switch o {
	case CmpLT:
		return CmpGT
	case CmpLE:
		return CmpGE
	case CmpGT:
		return CmpLT
	case CmpGE:
		return CmpLE
	}
	return o
}

// Compare is a (possibly chained) comparison: Operands[0] Ops[0]
// Operands[1] Ops[1] Operands[2] ...; as in Python, a chain means the AND
// of its adjacent pairs.
type Compare struct {
	P        int
	Operands []Expr
	Ops      []CmpOp
	OpPos    []int
}

// NameKind tells how a field was named.
type NameKind uint8

// Field name forms: a bare identifier, attr("..."), dim("...").
const (
	NameBare NameKind = iota
	NameAttr
	NameDim
)

// Name is a field reference.
type Name struct {
	P    int
	Kind NameKind
	Name string
}

// LitKind is the kind of a literal.
type LitKind uint8

// Literal kinds (Python constants).
const (
	LitInt LitKind = iota
	LitFloat
	LitStr
	LitBytes
	LitBool
	LitNone
)

// Literal is a constant, possibly signed or wrapped in val(...).
type Literal struct {
	P     int
	Kind  LitKind
	Int   *big.Int // LitInt; LitBool as 0/1
	Float float64  // LitFloat
	Str   string   // LitStr, LitBytes (raw bytes)
	Text  string   // as written, for messages
	Val   bool     // wrapped in val(...)
}

// List is a list display `[a, b, ...]` (only valid after in / not in).
type List struct {
	P     int
	Elems []Expr
}

// Neg is a unary minus or plus applied to something that is not a literal
// (literals fold their sign); only kept so that Bind can say why it is wrong.
type Neg struct {
	P int
	X Expr
}

func (e *Logical) Pos() int { return e.P }
func (e *NotExpr) Pos() int { return e.P }
func (e *Compare) Pos() int { return e.P }
func (e *Name) Pos() int    { return e.P }
func (e *Literal) Pos() int { return e.P }
func (e *List) Pos() int    { return e.P }
func (e *Neg) Pos() int     { return e.P }

func (e *Logical) String() string {
	op := "and"
	switch {
	case e.Op == OpAnd && e.Bit:
		op = "&"
	case e.Op == OpOr && e.Bit:
		op = "|"
	case e.Op == OpOr:
		op = "or"
	}
	return "(" + e.L.String() + " " + op + " " + e.R.String() + ")"
}

func (e *NotExpr) String() string { return "(not " + e.X.String() + ")" }

func (e *Compare) String() string {
	var b strings.Builder
	b.WriteString("(")
	for i, o := range e.Operands {
		if i > 0 {
			b.WriteString(" " + e.Ops[i-1].String() + " ")
		}
		b.WriteString(o.String())
	}
	b.WriteString(")")
	return b.String()
}

func (e *Name) String() string {
	switch e.Kind {
	case NameAttr:
		return fmt.Sprintf("attr(%q)", e.Name)
	case NameDim:
		return fmt.Sprintf("dim(%q)", e.Name)
	}
	return e.Name
}

func (e *Literal) String() string {
	s := e.Text
	switch e.Kind {
	case LitInt:
		s = e.Int.String()
	case LitStr:
		s = fmt.Sprintf("%q", e.Str)
	case LitBytes:
		s = "b" + fmt.Sprintf("%q", e.Str)
	case LitNone:
		s = "None"
	case LitBool:
		s = "False"
		if e.Int.Sign() != 0 {
			s = "True"
		}
	}
	if e.Val {
		return "val(" + s + ")"
	}
	return s
}

func (e *List) String() string {
	parts := make([]string, len(e.Elems))
	for i, x := range e.Elems {
		parts[i] = x.String()
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

func (e *Neg) String() string { return "-" + e.X.String() }
