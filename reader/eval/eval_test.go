package eval

import (
	"encoding/binary"
	"math"
	"testing"

	"github.com/tileflight/tileflight/format/datatype"
	"github.com/tileflight/tileflight/format/schema"
	"github.com/tileflight/tileflight/query/cond"
)

func testSchema() *schema.ArraySchema {
	dom := make([]byte, 16)
	binary.LittleEndian.PutUint64(dom[8:], 100)
	return &schema.ArraySchema{
		Type:       schema.Sparse,
		Dimensions: []schema.Dimension{{Name: "d", Type: datatype.Int64, CellValNum: 1, Domain: dom}},
		Attributes: []schema.Attribute{
			{Name: "i", Type: datatype.Int32, CellValNum: 1, Nullable: true},
			{Name: "f", Type: datatype.Float64, CellValNum: 1},
			{Name: "s", Type: datatype.StringUTF8, CellValNum: schema.VarNum, Nullable: true},
			{Name: "u", Type: datatype.Uint8, CellValNum: 1},
		},
	}
}

// Cells: i = [1, null, 3, -4], f = [0.5, NaN, -0.0, 2], s = ["a", null, "", "bc"], u = [0, 255, 7, 7].
func testColumns() map[string]Column {
	le := binary.LittleEndian
	i := make([]byte, 16)
	for k, v := range []int32{1, 0, 3, -4} {
		le.PutUint32(i[4*k:], uint32(v))
	}
	f := make([]byte, 32)
	for k, v := range []float64{0.5, math.NaN(), math.Copysign(0, -1), 2} {
		le.PutUint64(f[8*k:], math.Float64bits(v))
	}
	offs := make([]byte, 40)
	for k, v := range []uint64{0, 1, 1, 1, 3} {
		le.PutUint64(offs[8*k:], v)
	}
	return map[string]Column{
		"i": {Data: i, Validity: []byte{1, 0, 1, 1}},
		"f": {Data: f},
		"s": {Data: []byte("abc"), Offsets: offs, Validity: []byte{1, 0, 1, 1}},
		"u": {Data: []byte{0, 255, 7, 7}},
	}
}

func TestEval(t *testing.T) {
	cases := []struct {
		cond string
		want string
	}{
		{"i > 0", "1010"},
		{"i != 3", "1001"}, // the null cell fails != too
		{"i == None", "0100"},
		{"i != None", "1011"},
		{"not i < 2", "0010"},  // negated as TileDB: i >= 2, nulls out
		{"f < 1", "1010"},      // NaN fails <
		{"f != 0.5", "0111"},   // NaN passes !=
		{"f == 0", "0010"},     // -0.0 == 0
		{"f in [0.0]", "0000"}, // sets compare bytes: -0.0 is not 0.0
		{"f not in [0.5]", "0111"},
		{"s == ''", "0010"},
		{"s < 'b'", "1010"},
		{"s in ['a', 'bc']", "1001"},
		{"s not in ['a']", "0011"},
		{"u >= 7", "0111"},
		{"u in [255, 0]", "1100"},
		{"(i > 0) | (u == 7)", "1011"},
		{"i > 0 and not (f < 1)", "0000"},
		{"s == None or u == 255", "0100"},
	}
	cols := testColumns()
	for _, c := range cases {
		cd, err := cond.Compile(c.cond, testSchema())
		if err != nil {
			t.Fatalf("%s: %v", c.cond, err)
		}
		out := make([]bool, 4)
		if err := New(cd).Eval(func(name string) (Column, error) { return cols[name], nil }, out); err != nil {
			t.Fatalf("%s: %v", c.cond, err)
		}
		got := ""
		for _, b := range out {
			if b {
				got += "1"
			} else {
				got += "0"
			}
		}
		if got != c.want {
			t.Errorf("%s: %s, want %s", c.cond, got, c.want)
		}
	}
}

func TestMayMatch(t *testing.T) {
	le := binary.LittleEndian
	i32 := func(v int32) []byte { b := make([]byte, 4); le.PutUint32(b, uint32(v)); return b }
	f64 := func(v float64) []byte { b := make([]byte, 8); le.PutUint64(b, math.Float64bits(v)); return b }
	stats := map[string]Stats{
		"i": {Min: i32(10), Max: i32(20), NullCount: 2, HasNullCount: true, Cells: 5},
		"f": {Min: f64(math.NaN()), Max: f64(3), Cells: 5},
		"u": {Min: []byte{7}, Max: []byte{7}, Cells: 5},
	}
	cases := []struct {
		cond string
		want bool
	}{
		{"i < 10", false}, {"i <= 10", true}, {"i > 20", false}, {"i >= 20", true},
		{"i == 15", true}, {"i == 21", false}, {"i in [1, 30]", false}, {"i in [1, 12]", true},
		{"i == None", true}, {"i != None", true},
		{"u != 7", false}, {"u not in [7, 8]", false}, {"u != 8", true},
		{"f < 0", true}, // NaN bound: unknown
		{"f > 5", true}, // float bounds are not trusted: the tile is read
		{"i < 10 or u == 7", true}, {"i < 10 and u == 7", false},
		{"s == 'x'", true}, // no statistics
	}
	for _, c := range cases {
		cd, err := cond.Compile(c.cond, testSchema())
		if err != nil {
			t.Fatalf("%s: %v", c.cond, err)
		}
		got, err := New(cd).MayMatch(func(name string) (Stats, bool, error) {
			st, ok := stats[name]
			return st, ok, nil
		})
		if err != nil || got != c.want {
			t.Errorf("%s: MayMatch %v (%v), want %v", c.cond, got, err, c.want)
		}
	}
	// A tile of nulls only matches no comparison, and only == None.
	cd, _ := cond.Compile("i > 0", testSchema())
	allNull := func(string) (Stats, bool, error) {
		return Stats{Min: i32(0), Max: i32(0), NullCount: 5, HasNullCount: true, Cells: 5}, true, nil
	}
	if m, _ := New(cd).MayMatch(allNull); m {
		t.Errorf("i > 0 over a tile of nulls: MayMatch true")
	}
}
