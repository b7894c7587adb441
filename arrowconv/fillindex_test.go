package arrowconv

import (
	"errors"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/array"
	dt "github.com/tileflight/tileflight/format/datatype"
)

// A dense cell holding the attribute's fill index (no enumeration value)
// comes back null with its raw index kept; any other index outside the
// enumeration is still corruption, with or without a fill index.
func TestEnumFillIndex(t *testing.T) {
	mk := func(fill bool, idx int64) Field {
		e := &Enumeration{Name: "colors", Type: dt.StringUTF8, CellValNum: VarNum,
			Data: []byte("redgreenblue"), Offsets: u64s(0, 3, 8), HasFill: fill, FillIndex: idx}
		return Field{Name: "c", Type: dt.Uint8, CellValNum: 1, Role: Attribute, Enumeration: e}
	}
	f := mk(true, 255)
	af, err := ArrowField(f)
	if err != nil || !af.Nullable {
		t.Fatalf("field %v (%v): a column with a fill index must be nullable", af, err)
	}
	col, err := NewColumn(f, []byte{0, 255, 2, 255, 1}, nil, nil, 5)
	if err != nil {
		t.Fatal(err)
	}
	defer col.Release()
	d := col.(*array.Dictionary)
	if d.NullN() != 2 || d.IsValid(1) || d.IsValid(3) || !d.IsValid(0) {
		t.Fatalf("nulls %d, valid %v %v %v", d.NullN(), d.IsValid(0), d.IsValid(1), d.IsValid(3))
	}
	if raw := d.Indices().Data().Buffers()[1].Bytes(); raw[1] != 255 || raw[3] != 255 || raw[2] != 2 {
		t.Fatalf("raw indices %v, want the fill index kept", raw[:5])
	}
	if err := array.ValidateFull(d); err != nil {
		t.Fatalf("not a valid dictionary array: %v", err)
	}
	if got := d.Dictionary().(*array.LargeString).Value(d.GetValueIndex(2)); got != "blue" {
		t.Fatalf("cell 2 %q", got)
	}
	for _, c := range []struct {
		f    Field
		data []byte
	}{{mk(true, 255), []byte{0, 7}}, {mk(false, 0), []byte{0, 255}}, {mk(true, 254), []byte{255}}} {
		if _, err := NewColumn(c.f, c.data, nil, nil, len(c.data)); !errors.Is(err, ErrCorrupt) {
			t.Errorf("indices %v (fill %v %d): %v, want ErrCorrupt", c.data, c.f.Enumeration.HasFill, c.f.Enumeration.FillIndex, err)
		}
	}
	// Signed index types: the fill is compared as the signed value.
	e := &Enumeration{Name: "n", Type: dt.Int32, CellValNum: 1, Data: le([]int32{10, 20}), HasFill: true, FillIndex: -32768}
	col2, err := NewColumn(Field{Name: "n", Type: dt.Int16, CellValNum: 1, Role: Attribute, Enumeration: e}, le([]int16{1, -32768}), nil, nil, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer col2.Release()
	if col2.NullN() != 1 || col2.IsValid(1) {
		t.Fatalf("int16 fill: nulls %d", col2.NullN())
	}
}
