package cond

import (
	"encoding/binary"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/tileflight/tileflight/errkind"
	"github.com/tileflight/tileflight/format/commits"
	"github.com/tileflight/tileflight/format/datatype"
	"github.com/tileflight/tileflight/format/schema"
)

func TestParseShapes(t *testing.T) {
	cases := []struct{ in, want string }{
		{"a > 1", "(a > 1)"},
		{"a > 1 and b < 2 or c == 3", "(((a > 1) and (b < 2)) or (c == 3))"},
		{"a > 1 and (b < 2 or c == 3)", "((a > 1) and ((b < 2) or (c == 3)))"},
		{"not a > 1", "(not (a > 1))"},
		{"not not a > 1", "(not (not (a > 1)))"},
		{"(a > 1) & (b < 2) | (c == 3)", "(((a > 1) & (b < 2)) | (c == 3))"},
		{"1 < a <= 5", "(1 < a <= 5)"},
		{"a in [1, 2, 3]", "(a in [1, 2, 3])"},
		{"a not in ['x', \"y\",]", "(a not in [\"x\", \"y\"])"},
		{"attr('b a r') == val(-1.5)", "(attr(\"b a r\") == val(-1.5))"},
		{"dim(\"d\") >= -0x10", "(dim(\"d\") >= -16)"},
		{"a == None", "(a == None)"},
		{"a != -True", "(a != -1)"},
		{"s == 'it''s'", "(s == \"its\")"},
		{"s == b'\\x00\\xff'", "(s == b\"\\x00\\xff\")"},
		{"s == 'caf\\u00e9'", "(s == \"café\")"},
		{"s == r'a\\b'", "(s == \"a\\\\b\")"},
		{"x == 1_000", "(x == 1000)"},
		{"x == 1e999", "(x == 1e999)"},
		{"x == .5 and y == 5.", "((x == .5) and (y == 5.))"},
		{"a == 1 # comment\n and b == 2", "((a == 1) and (b == 2))"},
		{"naïve == 1", "(naïve == 1)"},
		{"x == --3", "(x == 3)"},
	}
	for _, c := range cases {
		e, err := Parse(c.in)
		if err != nil {
			t.Errorf("Parse(%q): %v", c.in, err)
			continue
		}
		if got := e.String(); got != c.want {
			t.Errorf("Parse(%q) = %s, want %s", c.in, got, c.want)
		}
	}
}

func TestParseErrors(t *testing.T) {
	cases := []struct {
		in  string
		pos int
		msg string
	}{
		{"", 0, "empty"},
		{"a >", 3, "end of condition"},
		{"a > 1 and", 9, "end of condition"},
		{"(a > 1", 6, "expected \")\""},
		{"a > 1)", 5, "unexpected"},
		{"a is None", 2, "`is`"},
		{"a == 'x", 5, "unterminated"},
		{"a == 1 + 2", 7, "arithmetic"},
		{"a ^ b", 2, "`^`"},
		{"~(a == 1)", 0, "`~`"},
		{"foo(a) == 1", 0, "unknown function"},
		{"attr(a) == 1", 5, "constant"},
		{"attr(1) == 1", 5, "string"},
		{"a.b == 1", 1, "attr("},
		{"a == 017", 5, "leading zeros"},
		{"a == 1j", 5, "complex"},
		{"a in (1, 2)", 7, "tuples"},
		{"a in {1}", 5, "sets"},
		{"a == f'x'", 5, "f-strings"},
		{"a == 1 2", 7, "unexpected"},
		{"a == 'x' b'y'", 9, "join"},
		{strings.Repeat("(", 100) + "a == 1" + strings.Repeat(")", 100), 64, "nested"},
		{"a == 1\xff", 6, "UTF-8"},
	}
	for _, c := range cases {
		_, err := Parse(c.in)
		var se *SyntaxError
		if !errors.As(err, &se) {
			t.Errorf("Parse(%q): err %v, want a SyntaxError", c.in, err)
			continue
		}
		if !errors.Is(err, errkind.InvalidArgument) {
			t.Errorf("Parse(%q): %v is not InvalidArgument", c.in, err)
		}
		if se.Pos != c.pos || !strings.Contains(se.Msg, c.msg) {
			t.Errorf("Parse(%q): position %d %q, want position %d containing %q", c.in, se.Pos, se.Msg, c.pos, c.msg)
		}
	}
}

func testSchema(typ schema.ArrayType) *schema.ArraySchema {
	dom := make([]byte, 16)
	binary.LittleEndian.PutUint64(dom[8:], 100)
	return &schema.ArraySchema{
		Type: typ,
		Dimensions: []schema.Dimension{
			{Name: "d", Type: datatype.Int64, CellValNum: 1, Domain: dom},
			{Name: "s", Type: datatype.StringASCII, CellValNum: schema.VarNum},
		},
		Attributes: []schema.Attribute{
			{Name: "i8", Type: datatype.Int8, CellValNum: 1},
			{Name: "u16", Type: datatype.Uint16, CellValNum: 1, Nullable: true},
			{Name: "i64", Type: datatype.Int64, CellValNum: 1},
			{Name: "u64", Type: datatype.Uint64, CellValNum: 1},
			{Name: "f32", Type: datatype.Float32, CellValNum: 1},
			{Name: "f64", Type: datatype.Float64, CellValNum: 1, Nullable: true},
			{Name: "str", Type: datatype.StringUTF8, CellValNum: schema.VarNum, Nullable: true},
			{Name: "c3", Type: datatype.Char, CellValNum: 3},
			{Name: "b", Type: datatype.Bool, CellValNum: 1},
			{Name: "t", Type: datatype.DatetimeMs, CellValNum: 1},
			{Name: "pair", Type: datatype.Int32, CellValNum: 2},
			{Name: "vi", Type: datatype.Int32, CellValNum: schema.VarNum, Nullable: true},
			{Name: "blob", Type: datatype.Blob, CellValNum: schema.VarNum},
			{Name: "a b", Type: datatype.Int32, CellValNum: 1},
			{Name: "d", Type: datatype.Int32, CellValNum: 1}, // shadows the dimension
		},
	}
}

func le(typ datatype.Datatype, v any) []byte {
	b := make([]byte, 8)
	switch x := v.(type) {
	case int:
		binary.LittleEndian.PutUint64(b, uint64(x))
	case uint64:
		binary.LittleEndian.PutUint64(b, x)
	case float64:
		if typ == datatype.Float32 {
			binary.LittleEndian.PutUint32(b, math.Float32bits(float32(x)))
			return b[:4]
		}
		binary.LittleEndian.PutUint64(b, math.Float64bits(x))
	}
	return b[:typ.Size()]
}

func TestBind(t *testing.T) {
	s := testSchema(schema.Sparse)
	val := func(f string, op commits.Op, v []byte) *Node {
		return &Node{Kind: commits.KindValue, Field: f, Op: op, Value: v}
	}
	and := func(c ...*Node) *Node { return &Node{Kind: commits.KindExpr, Combination: commits.And, Children: c} }
	or := func(c ...*Node) *Node { return &Node{Kind: commits.KindExpr, Combination: commits.Or, Children: c} }
	cases := []struct {
		in   string
		want *Node
	}{
		{"i8 > 1", val("i8", commits.OpGT, []byte{1})},
		{"1 < i8", val("i8", commits.OpGT, []byte{1})},
		{"i8 == -3.9", val("i8", commits.OpEQ, []byte{0xfd})},
		{"i64 <= 2.5", val("i64", commits.OpLE, le(datatype.Int64, 2))},
		{"u64 == 18446744073709551615", val("u64", commits.OpEQ, le(datatype.Uint64, uint64(math.MaxUint64)))},
		{"f32 < 0.1", val("f32", commits.OpLT, le(datatype.Float32, 0.1))},
		{"f64 >= 3", val("f64", commits.OpGE, le(datatype.Float64, 3.0))},
		{"f64 < -1e999", val("f64", commits.OpLT, le(datatype.Float64, math.Inf(-1)))},
		{"b == True", val("b", commits.OpEQ, []byte{1})},
		{"t > 1600000000000", val("t", commits.OpGT, le(datatype.Int64, 1600000000000))},
		{"str == 'é'", val("str", commits.OpEQ, []byte("é"))},
		{"str == ''", val("str", commits.OpEQ, nil)},
		{"c3 < b'abc'", val("c3", commits.OpLT, []byte("abc"))},
		{"s >= 'm'", val("s", commits.OpGE, []byte("m"))},
		{"dim('d') == 7", val("d", commits.OpEQ, le(datatype.Int64, 7))},
		{"d == 7", val("d", commits.OpEQ, le(datatype.Int32, 7))},
		{"attr('a b') != 1", val("a b", commits.OpNE, le(datatype.Int32, 1))},
		{"1 <= i8 < 5", and(val("i8", commits.OpGE, []byte{1}), val("i8", commits.OpLT, []byte{5}))},
		{"not (i8 < 1 and u16 > 2)", or(val("i8", commits.OpGE, []byte{1}), val("u16", commits.OpLE, []byte{2, 0}))},
		{"i8 < 1 and u16 > 2 and i8 != 0", and(val("i8", commits.OpLT, []byte{1}), val("u16", commits.OpGT, []byte{2, 0}), val("i8", commits.OpNE, []byte{0}))},
		{"(i8 < 1) | (i8 > 2) | (i8 == 0)", or(val("i8", commits.OpLT, []byte{1}), val("i8", commits.OpGT, []byte{2}), val("i8", commits.OpEQ, []byte{0}))},
		{"u16 == None", &Node{Kind: commits.KindValue, Field: "u16", Op: commits.OpEQ, Null: true}},
		{"not u16 == None", &Node{Kind: commits.KindValue, Field: "u16", Op: commits.OpNE, Null: true}},
		{"vi != None", &Node{Kind: commits.KindValue, Field: "vi", Op: commits.OpNE, Null: true}},
		{"i8 == None", &Node{Kind: commits.KindValue, Field: "i8", Op: commits.OpAlwaysFalse, Null: true}},
		{"i8 != None", &Node{Kind: commits.KindValue, Field: "i8", Op: commits.OpAlwaysTrue, Null: true}},
		{"i8 in [1, 2]", &Node{Kind: commits.KindValue, Field: "i8", Op: commits.OpIn, Members: [][]byte{{1}, {2}}}},
		{"not str in ['a', 'bc']", &Node{Kind: commits.KindValue, Field: "str", Op: commits.OpNotIn, Members: [][]byte{[]byte("a"), []byte("bc")}}},
	}
	for _, c := range cases {
		got, err := Compile(c.in, s)
		if err != nil {
			t.Errorf("Compile(%q): %v", c.in, err)
			continue
		}
		if got.Tree.String() != c.want.String() || got.Tree.Null != c.want.Null {
			t.Errorf("Compile(%q) = %s, want %s", c.in, got.Tree, c.want)
		}
	}
}

func TestBindErrors(t *testing.T) {
	sparse, dense := testSchema(schema.Sparse), testSchema(schema.Dense)
	cases := []struct {
		in  string
		s   *schema.ArraySchema
		pos int
		msg string
	}{
		{"nope == 1", sparse, 0, "no attribute or dimension \"nope\""},
		{"attr('s') == 'x'", sparse, 0, "no attribute \"s\""},
		{"dim('i8') == 1", sparse, 0, "no dimension \"i8\""},
		{"s == 'a'", dense, 0, "dense array"},
		{"i8 == 128", sparse, 6, "out of bounds"},
		{"u64 == -1", sparse, 7, "out of bounds"},
		{"i8 == 'a'", sparse, 6, "cannot cast"},
		{"str == 1", sparse, 7, "is a string"},
		{"i8 < None", sparse, 3, "None can only"},
		{"i8 == i64", sparse, 6, "constant, not the field"},
		{"1 == 2", sparse, 0, "two constants"},
		{"i8", sparse, 0, "not a condition"},
		{"i8 == 1 & i8 == 2", sparse, 8, "parenthesize"},
		{"i8 in 1", sparse, 6, "takes a list"},
		{"i8 in []", sparse, 6, "at least one"},
		{"i8 in [None]", sparse, 7, "None cannot"},
		{"i8 in [i64]", sparse, 7, "constants"},
		{"1 in [1]", sparse, 0, "must be a field"},
		{"pair == 1", sparse, 0, "2 values per cell"},
		{"vi == 1", sparse, 0, "var-sized INT32"},
		{"blob == b'x'", sparse, 0, "BLOB"},
		{"c3 == ''", sparse, 6, "empty string"},
		{"i8 in [1] < 3", sparse, 3, "chained"},
		{"i8 == nan", sparse, 6, "not the field nan"},
		{"str == -'a'", sparse, 7, "sign"},
	}
	for _, c := range cases {
		_, err := Compile(c.in, c.s)
		var se *SyntaxError
		if !errors.As(err, &se) {
			t.Errorf("Compile(%q): err %v, want a SyntaxError", c.in, err)
			continue
		}
		if se.Pos != c.pos || !strings.Contains(se.Error(), c.msg) {
			t.Errorf("Compile(%q): %v (position %d), want position %d containing %q", c.in, err, se.Pos, c.pos, c.msg)
		}
	}
}

func TestKeepEncodes(t *testing.T) {
	s := testSchema(schema.Sparse)
	c, err := Compile("i8 < 3 and (str in ['a', 'b'] or u16 == None)", s)
	if err != nil {
		t.Fatal(err)
	}
	keep, err := c.Keep()
	if err != nil {
		t.Fatal(err)
	}
	b, err := commits.EncodeCondition(keep)
	if err != nil {
		t.Fatal(err)
	}
	back, err := commits.DecodeCondition(b)
	if err != nil {
		t.Fatal(err)
	}
	// keep = i8 >= 3 or (str not in [a b] and u16 != null)
	if back.Combination != commits.Or || len(back.Children) != 2 || back.Children[0].Op != commits.OpGE ||
		back.Children[1].Combination != commits.And || back.Children[1].Children[0].Op != commits.OpNotIn ||
		!back.Children[1].Children[1].IsNullTest() || back.Children[1].Children[1].Op != commits.OpNE {
		t.Fatalf("keep tree decoded as %+v", back)
	}
	if m := back.Children[1].Children[0].Members(); len(m) != 2 || string(m[0]) != "a" || string(m[1]) != "b" {
		t.Fatalf("members %q", m)
	}
	c, err = Compile("str == ''", s)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Keep(); !errors.Is(err, errkind.InvalidArgument) {
		t.Fatalf("empty string operand: %v, want InvalidArgument", err)
	}
}
