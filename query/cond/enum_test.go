package cond

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/tileflight/tileflight/errkind"
	"github.com/tileflight/tileflight/format/commits"
	"github.com/tileflight/tileflight/format/schema"
)

// Comparisons of enumerated attributes become comparisons of indexes the
// way TileDB 2.30 rewrites them, after `not` is pushed down.
func TestEnumRewrite(t *testing.T) {
	s := enumSchema(t)
	for _, c := range []struct{ in, want string }{
		{"o == 'mid'", "o EQ [1 0]"},
		{"o < 'hi'", "o LT [2 0]"},
		{"not (o < 'hi')", "o GE [2 0]"},
		{"'mid' <= o", "o GE [1 0]"},
		{"o > 'nope'", "o ALWAYS_FALSE"},
		{"not (o > 'nope')", "o ALWAYS_FALSE"},
		{"o != 'nope'", "o ALWAYS_TRUE"},
		{"u != 'nope'", "u NE null"},
		{"not (u == 'nope')", "u NE null"},
		{"u == b'blue'", "u EQ [2]"},
		{"u in ['nope', 'green', 'red']", "u IN [[1] [0]]"},
		{"u in ['nope']", "u ALWAYS_FALSE"},
		{"u not in ['nope']", "u NE null"},
		{"u == None", "u EQ null"},
		// Enumerations of numbers: the constant is cast to the values'
		// type as TileDB-Py casts it, then looked up.
		{"k == 20", "k EQ [1]"},
		{"k == 20.9", "k EQ [1]"},
		{"k == 30", "k ALWAYS_FALSE"},
		{"k in [10, 30, 20]", "k IN [[0] [1]]"},
		{"k not in [30]", "k ALWAYS_TRUE"},
		{"f == 0.25", "f EQ [1 0]"},
		{"f <= 10.0", "f LE [2 0]"},
		{"not (f > 1.5)", "f LE [0 0]"},
		{"f == 2", "f ALWAYS_FALSE"},
		{"f == 10", "f EQ [2 0]"},
	} {
		cd, err := Compile(c.in, s)
		if err != nil {
			t.Errorf("%s: %v", c.in, err)
			continue
		}
		if !cd.Enumerated {
			t.Errorf("%s: Enumerated not set", c.in)
		}
		n := cd.Tree
		got := n.Field + " " + n.Op.String()
		switch {
		case n.Null:
			got += " null"
		case n.Members != nil:
			got += " " + fmt.Sprint(n.Members)
		case n.Value != nil:
			got += " " + fmt.Sprint(n.Value)
		}
		if got != c.want {
			t.Errorf("%s: %q, want %q", c.in, got, c.want)
		}
	}
	for _, c := range []struct {
		in, msg string
		kind    error
	}{
		{"u < 'red'", "not ordered", errkind.InvalidArgument},
		{"o == 1", "compare it with one of its values", errkind.InvalidArgument},
		{"u in ['red', 2]", "compare it with one of its values", errkind.InvalidArgument},
		{"k == '10'", "compare it with one of its values (a number)", errkind.InvalidArgument},
		{"k < 20", "not ordered", errkind.InvalidArgument},
		{"p == 1", "enumerations of INT32 values (cell_val_num 2) are not implemented", errkind.Unimplemented},
	} {
		_, err := Compile(c.in, s)
		if err == nil || !strings.Contains(err.Error(), c.msg) || !errors.Is(err, c.kind) {
			t.Errorf("%s: %v, want %v containing %q", c.in, err, c.kind, c.msg)
		}
	}
}

func enumSchema(t testing.TB) *schema.ArraySchema {
	t.Helper()
	s, err := schema.FromJSON([]byte(`{"type": "sparse", "cell_order": "row-major", "tile_order": "row-major",
	  "dimensions": [{"name": "x", "type": "int64", "domain": [0, 99], "tile": 10}],
	  "attributes": [{"name": "o", "type": "int16", "enumeration": "ord"},
	                 {"name": "u", "type": "uint8", "nullable": true, "enumeration": "unord"},
	                 {"name": "k", "type": "uint8", "enumeration": "nums"},
	                 {"name": "f", "type": "int16", "enumeration": "floats"},
	                 {"name": "p", "type": "uint8", "enumeration": "pairs"}],
	  "enumerations": [{"name": "ord", "type": "string_utf8", "cell_val_num": "var", "ordered": true, "values": ["lo", "mid", "hi"]},
	                   {"name": "unord", "type": "string_ascii", "cell_val_num": "var", "values": ["red", "green", "blue"]},
	                   {"name": "nums", "type": "int32", "values": [10, 20]},
	                   {"name": "floats", "type": "float64", "ordered": true, "values": [1.5, 0.25, 10.0, -3.0]},
	                   {"name": "pairs", "type": "int32", "cell_val_num": 2, "values": [[1, 2], [3, 4]]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// FuzzCompileEnum: over enumerated attributes, any text binds to a tree
// comparing indexes of the attribute's type (never a value left over), or
// fails with a SyntaxError or, for the enumeration of pairs, Unimplemented.
func FuzzCompileEnum(f *testing.F) {
	for _, s := range []string{
		"o == 'mid'", "not (o < 'hi') or u in ['red', 'x']", "u != 'nope' and u == None", "not (u not in ['blue'])",
		"k == 10", "'lo' < o <= 'hi'", "f >= 0.25 or k in [20, 7.5]", "p == 3",
	} {
		f.Add(s)
	}
	sc := enumSchema(f)
	size := map[string]int{"o": 2, "u": 1, "k": 1, "f": 2}
	f.Fuzz(func(t *testing.T, text string) {
		c, err := Compile(text, sc)
		if err != nil {
			var se *SyntaxError
			if !errors.As(err, &se) && !errors.Is(err, errkind.Unimplemented) {
				t.Fatalf("%q: error %v is neither a SyntaxError nor Unimplemented", text, err)
			}
			return
		}
		var check func(n *Node)
		check = func(n *Node) {
			for _, ch := range n.Children {
				check(ch)
			}
			sz, ok := size[n.Field]
			if n.Kind != commits.KindValue || !ok || n.Null {
				return
			}
			if n.Value != nil && len(n.Value) != sz {
				t.Fatalf("%q: %s compares %d bytes, want an index of %d", text, n, len(n.Value), sz)
			}
			for _, m := range n.Members {
				if len(m) != sz {
					t.Fatalf("%q: %s has a member of %d bytes, want an index of %d", text, n, len(m), sz)
				}
			}
		}
		check(c.Tree)
	})
}
