package cond

import (
	"fmt"

	"github.com/tileflight/tileflight/format/commits"
)

// Node is one node of a bound condition. Its shape follows TileDB's
// condition tree (format/commits.Node) with two things the format blurs kept
// apart: a null test is marked as such (an empty string operand is not a
// null test), and set members are kept as a list.
type Node struct {
	Kind        commits.NodeKind
	Combination commits.Combination // And or Or; never Not
	Children    []*Node

	Field string
	Op    commits.Op
	// Null marks `field == None` / `field != None` on a nullable field.
	Null bool
	// Value is the operand as raw bytes of one value of the field's type
	// (strings as their bytes).
	Value []byte
	// Members are the operands of IN / NOT_IN.
	Members [][]byte
}

// Negated returns the condition TileDB's negate builds: ops flipped, AND
// and OR swapped (so `not (x < 5)` is `x >= 5`, and a null cell passes
// neither).
func (n *Node) Negated() *Node {
	if n.Kind == commits.KindValue {
		c := *n
		c.Op = n.Op.Negate()
		return &c
	}
	c := &Node{Kind: commits.KindExpr, Combination: commits.And}
	if n.Combination == commits.And {
		c.Combination = commits.Or
	}
	for _, ch := range n.Children {
		c.Children = append(c.Children, ch.Negated())
	}
	return c
}

// Commits converts the tree into the on-disk condition tree (the form a
// delete commit stores, before negation).
func (n *Node) Commits() (*commits.Node, error) {
	if n.Kind == commits.KindExpr {
		out := &commits.Node{Kind: commits.KindExpr, Combination: n.Combination}
		for _, ch := range n.Children {
			c, err := ch.Commits()
			if err != nil {
				return nil, err
			}
			out.Children = append(out.Children, c)
		}
		return out, nil
	}
	out := &commits.Node{Kind: commits.KindValue, Field: n.Field, Op: n.Op}
	switch {
	case n.Null || n.Op == commits.OpAlwaysTrue || n.Op == commits.OpAlwaysFalse:
	case n.Op.IsSet():
		for _, m := range n.Members {
			if len(m) == 0 {
				return nil, fmt.Errorf("%w: field %q: an empty string set member cannot be stored in a condition", errInvalid, n.Field)
			}
			out.Offsets = append(out.Offsets, uint64(len(out.Value)))
			out.Value = append(out.Value, m...)
		}
	default:
		if len(n.Value) == 0 {
			return nil, fmt.Errorf("%w: field %q: a comparison with the empty string cannot be stored in a condition (TileDB would read it back as a null test)", errInvalid, n.Field)
		}
		out.Value = append([]byte(nil), n.Value...)
	}
	return out, nil
}

// String renders the node for messages and tests.
func (n *Node) String() string {
	if n.Kind == commits.KindExpr {
		s := "(" + n.Combination.String()
		for _, c := range n.Children {
			s += " " + c.String()
		}
		return s + ")"
	}
	switch {
	case n.Null:
		return fmt.Sprintf("%s %s NULL", n.Field, n.Op)
	case n.Op == commits.OpAlwaysTrue || n.Op == commits.OpAlwaysFalse:
		return n.Op.String()
	case n.Op.IsSet():
		return fmt.Sprintf("%s %s %x", n.Field, n.Op, n.Members)
	}
	return fmt.Sprintf("%s %s %x", n.Field, n.Op, n.Value)
}
