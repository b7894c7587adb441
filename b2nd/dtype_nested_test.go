package b2nd

import (
	"fmt"
	"testing"
)

// TestParseDtypeNested: nested structures flatten into dotted leaves at
// their offsets, subarray fields keep their shape, padding is skipped, and
// what cannot be mapped is refused.
func TestParseDtypeNested(t *testing.T) {
	d, err := ParseDtype("[('a', '<i4'), ('p', [('x', '<f8'), ('y', '>f4')]), ('', '|V4'), ('v', '<f4', (2, 3)), ('q', [('r', [('s', '|b1')])])]")
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		name         string
		kind         Kind
		off, size, n int
		big          bool
	}{{"a", 'i', 0, 4, 0, false}, {"p.x", 'f', 4, 8, 0, false}, {"p.y", 'f', 12, 4, 0, true}, {"v", 'f', 20, 24, 6, false}, {"q.r.s", 'b', 44, 1, 0, false}}
	if len(d.Fields) != len(want) || d.ItemSize != 45 {
		t.Fatalf("fields %+v itemsize %d", d.Fields, d.ItemSize)
	}
	for i, w := range want {
		f := d.Fields[i]
		if f.Name != w.name || f.Kind != w.kind || f.Offset != w.off || f.Size != w.size || f.Count != w.n || f.Big != w.big {
			t.Errorf("field %d: %+v, want %+v", i, f, w)
		}
	}
	if f := d.Fields[3]; fmt.Sprint(f.Shape) != "[2 3]" || f.ElemSize() != 4 {
		t.Errorf("subarray field %+v", f)
	}
	for _, bad := range []string{
		"[('a', '<U3', (2,))]",                    // subarray of strings
		"[('a', [('b', '<i4')], (2,))]",           // subarray of structures
		"[('a', '<i4'), ('a', '<i8')]",            // duplicate
		"[('p', [('x', '<i4')]), ('p.x', '<i4')]", // flattened names clash
		"[(('t', 'a'), '<i4')]",                   // titled field
		"[('a', '<i4', (0,))]",                    // empty subarray
		"[('a', '<i4'",                            // unclosed
		"[('a', '<i4', (2, 'x'))]",                // bad shape
	} {
		if _, err := ParseDtype(bad); err == nil {
			t.Errorf("%s accepted", bad)
		}
	}
}
