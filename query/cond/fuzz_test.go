package cond

import (
	"errors"
	"testing"

	"github.com/tileflight/tileflight/format/commits"
	"github.com/tileflight/tileflight/format/schema"
)

// FuzzCompile: any text either parses and binds, or fails with a
// SyntaxError whose position lies within the text; a bound tree always
// converts to a format tree that encodes and decodes.
func FuzzCompile(f *testing.F) {
	for _, s := range []string{
		"i8 > 1 and (str == 'a' or u16 == None)", "not (1 <= i64 < 5) | (f32 in [1.5, -2])",
		"attr('a b') != val(3) & (s >= b'x')", "c3 not in ['abc', 'xyz'] or t >= 0x10",
		"f64 < 1e999 and b == True", "str == '\\u00e9\\x41' 'b'", "((((i8 == 1))))",
	} {
		f.Add(s)
	}
	sc := testSchema(schema.Sparse)
	f.Fuzz(func(t *testing.T, text string) {
		c, err := Compile(text, sc)
		if err != nil {
			var se *SyntaxError
			if !errors.As(err, &se) {
				t.Fatalf("%q: error %v is not a SyntaxError", text, err)
			}
			if se.Pos < 0 || se.Pos > len(text) {
				t.Fatalf("%q: position %d outside the text", text, se.Pos)
			}
			return
		}
		keep, err := c.Keep()
		if err != nil {
			return // empty string operands
		}
		b, err := commits.EncodeCondition(keep)
		if err != nil {
			t.Fatalf("%q: encode: %v", text, err)
		}
		if _, err := commits.DecodeCondition(b); err != nil {
			t.Fatalf("%q: decode: %v", text, err)
		}
	})
}
