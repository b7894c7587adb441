package arrowconv

import (
	"errors"
	"strings"
	"testing"

	"github.com/tileflight/tileflight/format/datatype"
)

// A utf8 column whose bytes are not valid UTF-8 (a damaged tile of an
// array without checksums) is refused as corrupt, naming the field;
// valid text, multi-byte runes included, converts.
func TestUTF8Checked(t *testing.T) {
	f := Field{Name: "s", Type: datatype.StringUTF8, CellValNum: VarNum}
	offs := func(v ...uint64) []byte {
		var b []byte
		for _, o := range v {
			for i := 0; i < 8; i++ {
				b = append(b, byte(o>>(8*i)))
			}
		}
		return b
	}
	cases := []struct {
		name    string
		data    string
		offsets []uint64
		want    string // "" = converts
	}{
		{"ascii", "abcdef", []uint64{0, 3}, ""},
		{"multi-byte", "héllo€", []uint64{0, 3}, ""},
		{"empty cells", "", []uint64{0, 0, 0}, ""},
		{"invalid byte", "ab\xffcd", []uint64{0, 2}, "not valid UTF-8 (near byte 2)"},
		{"truncated rune", "ab\xc3", []uint64{0, 1}, "not valid UTF-8"},
		{"a cell splits a rune", "é", []uint64{0, 1}, "cell 1 starts inside a UTF-8 sequence"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a, err := NewColumn(f, []byte(tc.data), offs(tc.offsets...), nil, len(tc.offsets))
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				a.Release()
				return
			}
			if err == nil || !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), `"s"`) {
				t.Fatalf("got %v, want corruption saying %q", err, tc.want)
			}
		})
	}
}
