package commits

import (
	"fmt"

	"github.com/tileflight/tileflight/format/gentile"
	"github.com/tileflight/tileflight/format/wire"
)

// Op is a comparison of a value node, with TileDB's on-disk codes.
type Op uint8

const (
	OpLT          Op = 0
	OpLE          Op = 1
	OpGT          Op = 2
	OpGE          Op = 3
	OpEQ          Op = 4
	OpNE          Op = 5
	OpIn          Op = 6
	OpNotIn       Op = 7
	OpAlwaysTrue  Op = 253
	OpAlwaysFalse Op = 254
)

var opNames = map[Op]string{
	OpLT: "LT", OpLE: "LE", OpGT: "GT", OpGE: "GE", OpEQ: "EQ", OpNE: "NE",
	OpIn: "IN", OpNotIn: "NOT_IN", OpAlwaysTrue: "ALWAYS_TRUE", OpAlwaysFalse: "ALWAYS_FALSE",
}

func (o Op) String() string {
	if s, ok := opNames[o]; ok {
		return s
	}
	return fmt.Sprintf("Op(%d)", uint8(o))
}

// Valid reports whether TileDB accepts the op.
func (o Op) Valid() bool { _, ok := opNames[o]; return ok }

// IsSet reports whether the op tests set membership (its node has offsets).
func (o Op) IsSet() bool { return o == OpIn || o == OpNotIn }

// Negate returns the complementary op (LT<->GE, EQ<->NE, IN<->NOT_IN...).
// ALWAYS_TRUE/FALSE have none in TileDB; they are swapped here.
func (o Op) Negate() Op {
	switch o {
	case OpLT:
		return OpGE
	case OpGE:
		return OpLT
	case OpGT:
		return OpLE
	case OpLE:
		return OpGT
	case OpEQ:
		return OpNE
	case OpNE:
		return OpEQ
	case OpIn:
		return OpNotIn
	case OpNotIn:
		return OpIn
	case OpAlwaysTrue:
		return OpAlwaysFalse
	case OpAlwaysFalse:
		return OpAlwaysTrue
	}
	return o
}

// Combination joins the children of an expression node.
type Combination uint8

const (
	And Combination = 0
	Or  Combination = 1
	Not Combination = 2
)

func (c Combination) String() string {
	switch c {
	case And:
		return "AND"
	case Or:
		return "OR"
	case Not:
		return "NOT"
	}
	return fmt.Sprintf("Combination(%d)", uint8(c))
}

// NodeKind tells expression nodes from value nodes (on-disk codes).
type NodeKind uint8

const (
	KindExpr  NodeKind = 0
	KindValue NodeKind = 1
)

// Node is one node of a serialized query condition tree.
//
// A value node compares Field with Value under Op. Value holds the raw
// bytes of the operand in the field's type (strings as their bytes). An
// empty Value with EQ or NE is a null test (IS NULL / IS NOT NULL). Set ops
// (IN, NOT_IN) hold the members concatenated in Value and each member's
// start in Offsets.
//
// An expression node joins Children with Combination.
//
// What is stored in a delete commit is the negation of the condition the
// user submitted: the tree selects the cells to keep. The use-enumeration
// flag of TileDB's in-memory tree is not part of the format.
type Node struct {
	Kind        NodeKind
	Combination Combination
	Children    []*Node

	Field   string
	Op      Op
	Value   []byte
	Offsets []uint64
}

// IsNullTest reports whether a value node tests for null.
func (n *Node) IsNullTest() bool {
	return n.Kind == KindValue && len(n.Value) == 0 && (n.Op == OpEQ || n.Op == OpNE)
}

// Members splits a set node's Value into its members.
func (n *Node) Members() [][]byte {
	out := make([][]byte, len(n.Offsets))
	for i, o := range n.Offsets {
		end := uint64(len(n.Value))
		if i+1 < len(n.Offsets) {
			end = n.Offsets[i+1]
		}
		if o > end || end > uint64(len(n.Value)) {
			return nil
		}
		out[i] = n.Value[o:end]
	}
	return out
}

// MaxConditionDepth bounds the nesting of a decoded condition tree so that
// a crafted file cannot exhaust the stack.
const MaxConditionDepth = 128

// smallest serialized nodes: an expression with no children is 10 bytes, a
// value node 14; every child announced by a count needs at least this.
const minNodeSize = 10

// DecodeCondition reads a serialized condition tree that fills b exactly.
func DecodeCondition(b []byte) (*Node, error) {
	r := wire.NewReader(b)
	n := decodeNode(r, 0)
	if err := r.Err(); err != nil {
		return nil, fmt.Errorf("condition: %w", err)
	}
	if r.Len() != 0 {
		return nil, fmt.Errorf("condition: %w: %d bytes after the tree", wire.ErrCorrupt, r.Len())
	}
	return n, nil
}

func decodeNode(r *wire.Reader, depth int) *Node {
	if depth > MaxConditionDepth {
		r.Failf("condition nested deeper than %d", MaxConditionDepth)
		return nil
	}
	kind := NodeKind(r.Uint8("condition: node type"))
	if r.Err() != nil {
		return nil
	}
	switch kind {
	case KindValue:
		n := &Node{Kind: KindValue}
		n.Op = Op(r.Uint8("condition: op"))
		if r.Err() == nil && !n.Op.Valid() {
			r.Failf("condition: unknown op %d", uint8(n.Op))
			return nil
		}
		fl := r.Uint32("condition: field name size")
		n.Field = string(r.BytesU64(uint64(fl), "condition: field name"))
		vl := r.Uint64("condition: value size")
		if v := r.BytesU64(vl, "condition: value"); len(v) > 0 {
			n.Value = append([]byte(nil), v...)
		}
		if n.Op.IsSet() {
			ol := r.Uint64("condition: offsets size")
			ob := r.BytesU64(ol, "condition: offsets")
			if r.Err() != nil {
				return nil
			}
			if len(ob)%8 != 0 {
				r.Failf("condition: field %q: offsets size %d is not a multiple of 8", n.Field, len(ob))
				return nil
			}
			or := wire.NewReader(ob)
			n.Offsets = make([]uint64, len(ob)/8)
			for i := range n.Offsets {
				n.Offsets[i] = or.Uint64("condition: offset")
				if n.Offsets[i] > uint64(len(n.Value)) || (i > 0 && n.Offsets[i] < n.Offsets[i-1]) {
					r.Failf("condition: field %q: set offset %d (%d) is out of order or past the %d value bytes", n.Field, i, n.Offsets[i], len(n.Value))
					return nil
				}
			}
			if len(n.Value) > 0 && len(n.Offsets) == 0 {
				r.Failf("condition: field %q: set of %d bytes without offsets", n.Field, len(n.Value))
				return nil
			}
		}
		return n
	case KindExpr:
		n := &Node{Kind: KindExpr}
		n.Combination = Combination(r.Uint8("condition: combination op"))
		if r.Err() == nil && n.Combination > Not {
			r.Failf("condition: unknown combination op %d", uint8(n.Combination))
			return nil
		}
		cnt := r.Count(8, minNodeSize, "condition: children")
		if r.Err() != nil {
			return nil
		}
		n.Children = make([]*Node, 0, cnt)
		for i := 0; i < cnt; i++ {
			c := decodeNode(r, depth+1)
			if r.Err() != nil {
				return nil
			}
			n.Children = append(n.Children, c)
		}
		return n
	}
	r.Failf("condition: unknown node type %d", uint8(kind))
	return nil
}

// EncodeCondition serializes a condition tree exactly as TileDB does.
func EncodeCondition(n *Node) ([]byte, error) {
	w := wire.NewWriter(nil)
	if err := encodeNode(w, n, 0); err != nil {
		return nil, err
	}
	return w.Bytes(), nil
}

func encodeNode(w *wire.Writer, n *Node, depth int) error {
	if n == nil {
		return fmt.Errorf("condition: nil node")
	}
	if depth > MaxConditionDepth {
		return fmt.Errorf("condition: nested deeper than %d", MaxConditionDepth)
	}
	switch n.Kind {
	case KindValue:
		if !n.Op.Valid() {
			return fmt.Errorf("condition: field %q: unknown op %d", n.Field, uint8(n.Op))
		}
		w.Uint8(uint8(KindValue))
		w.Uint8(uint8(n.Op))
		w.Uint32(uint32(len(n.Field)))
		w.String(n.Field)
		w.Uint64(uint64(len(n.Value)))
		w.Write(n.Value)
		if n.Op.IsSet() {
			w.Uint64(uint64(8 * len(n.Offsets)))
			for _, o := range n.Offsets {
				w.Uint64(o)
			}
		}
	case KindExpr:
		if n.Combination > Not {
			return fmt.Errorf("condition: unknown combination op %d", uint8(n.Combination))
		}
		w.Uint8(uint8(KindExpr))
		w.Uint8(uint8(n.Combination))
		w.Uint64(uint64(len(n.Children)))
		for _, c := range n.Children {
			if err := encodeNode(w, c, depth+1); err != nil {
				return err
			}
		}
	default:
		return fmt.Errorf("condition: unknown node kind %d", uint8(n.Kind))
	}
	return nil
}

// DecodeDelete reads a delete commit file (.del): a generic tile holding a
// serialized condition. The condition selects the cells to keep.
func DecodeDelete(file []byte) (*Node, error) { return DecodeDeleteWith(file, nil) }

// DecodeDeleteWith is DecodeDelete for arrays whose generic tiles need u
// (encrypted arrays: their delete commits are encrypted too); nil u is
// DecodeDelete.
func DecodeDeleteWith(file []byte, u gentile.Unfilterer) (*Node, error) {
	payload, err := tilePayloadWith(file, u)
	if err != nil {
		return nil, fmt.Errorf("delete commit: %w", err)
	}
	n, err := DecodeCondition(payload)
	if err != nil {
		return nil, fmt.Errorf("delete commit: %w", err)
	}
	return n, nil
}

// EncodeDelete writes a delete commit file for the condition of cells to
// keep (the negation of what is deleted), at the given format version.
func EncodeDelete(keep *Node, version uint32) ([]byte, error) {
	p, err := EncodeCondition(keep)
	if err != nil {
		return nil, fmt.Errorf("delete commit: %w", err)
	}
	return gentile.Encode(p, version, nil)
}

func tilePayload(file []byte) ([]byte, error) { return tilePayloadWith(file, nil) }

func tilePayloadWith(file []byte, u gentile.Unfilterer) ([]byte, error) {
	_, payload, n, err := gentile.Decode(file, u)
	if err != nil {
		return nil, err
	}
	if n != len(file) {
		return nil, fmt.Errorf("%w: %d bytes after the generic tile", wire.ErrCorrupt, len(file)-n)
	}
	return payload, nil
}

// Negated returns the condition that selects exactly the cells n does not,
// built as TileDB builds the tree it stores for a delete: ops flipped, AND
// and OR swapped. TileDB never stores NOT nodes; one is unwrapped here (or
// added around n when it has several children).
func (n *Node) Negated() *Node {
	if n == nil {
		return nil
	}
	if n.Kind == KindValue {
		c := *n
		c.Op = n.Op.Negate()
		return &c
	}
	if n.Combination == Not {
		if len(n.Children) == 1 {
			return n.Children[0]
		}
		return &Node{Kind: KindExpr, Combination: Not, Children: []*Node{n}}
	}
	c := &Node{Kind: KindExpr, Combination: And}
	if n.Combination == And {
		c.Combination = Or
	}
	for _, ch := range n.Children {
		c.Children = append(c.Children, ch.Negated())
	}
	return c
}
