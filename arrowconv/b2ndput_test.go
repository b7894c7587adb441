package arrowconv

import (
	"bytes"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	arrowarray "github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/tileflight/tileflight/b2nd"
)

// B2NDFieldBytes places each value at its field's offset in the item, in
// the dtype's byte order, and refuses what does not fit exactly.
func TestB2NDFieldBytes(t *testing.T) {
	mem := memory.NewGoAllocator()
	i64 := func(v ...int64) arrow.Array {
		b := arrowarray.NewInt64Builder(mem)
		b.AppendValues(v, nil)
		return b.NewArray()
	}
	f64 := func(v ...float64) arrow.Array {
		b := arrowarray.NewFloat64Builder(mem)
		b.AppendValues(v, nil)
		return b.NewArray()
	}
	str := func(v ...string) arrow.Array {
		b := arrowarray.NewStringBuilder(mem)
		b.AppendValues(v, nil)
		return b.NewArray()
	}
	cases := []struct {
		dtype string
		col   arrow.Array
		want  []byte // items of the whole dtype, nil when err is set
		err   string
	}{
		{"<i2", i64(1, -2), []byte{1, 0, 0xfe, 0xff}, ""},
		{">i2", i64(1, -2), []byte{0, 1, 0xff, 0xfe}, ""},
		{"<u1", i64(255, 0), []byte{255, 0}, ""},
		{"<i1", i64(128), nil, "row 0: 128 does not fit <i1"},
		{"<u2", i64(-1), nil, "row 0: value does not fit <u2"},
		{"<f4", f64(0.5), []byte{0, 0, 0, 0x3f}, ""},
		{"<f4", f64(0.1), nil, "row 0: 0.1 does not fit float32 exactly"},
		{"<f2", f64(1), []byte{0, 0x3c}, ""},
		{"|S3", str("ab"), []byte{'a', 'b', 0}, ""},
		{"<U2", str("é"), []byte{0xe9, 0, 0, 0, 0, 0, 0, 0}, ""},
		{"<U1", str("ab"), nil, `row 0: "ab" is longer than <U1`},
		{"<i4", f64(1), nil, "want an integer column, got float64"},
	}
	for _, c := range cases {
		dt, err := b2nd.ParseDtype(c.dtype)
		if err != nil {
			t.Fatal(err)
		}
		out := make([]byte, c.col.Len()*dt.ItemSize)
		err = B2NDFieldBytes(dt.Fields[0], c.col, out, dt.ItemSize)
		c.col.Release()
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%s: error %v, want %q", c.dtype, err, c.err)
			}
			continue
		}
		if err != nil || !bytes.Equal(out, c.want) {
			t.Errorf("%s: %v %v, want %v", c.dtype, out, err, c.want)
		}
	}
}
