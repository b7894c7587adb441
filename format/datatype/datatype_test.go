package datatype

import "testing"

func TestNamesRoundTrip(t *testing.T) {
	for d := Datatype(0); d <= Max; d++ {
		got, err := Parse(d.String())
		if err != nil || got != d {
			t.Fatalf("%d: %v %v", d, got, err)
		}
		if d.Size() == 0 {
			t.Fatalf("%s has no size", d)
		}
	}
	if _, err := Parse("TILEDB_DATETIME_MS"); err != nil {
		t.Fatal(err)
	}
	if _, err := Parse("int128"); err == nil {
		t.Fatal("int128 accepted")
	}
}

func TestSizes(t *testing.T) {
	cases := []struct {
		d    Datatype
		size int
	}{
		{Int8, 1}, {Uint16, 2}, {Int32, 4}, {Float32, 4}, {Int64, 8},
		{Float64, 8}, {DatetimeDay, 8}, {TimeNs, 8}, {StringUTF16, 2},
		{StringUCS4, 4}, {Bool, 1}, {Blob, 1}, {GeomWKT, 1},
	}
	for _, c := range cases {
		if c.d.Size() != c.size {
			t.Errorf("%s: size %d, want %d", c.d, c.d.Size(), c.size)
		}
	}
}

func TestIntOfSize(t *testing.T) {
	for _, c := range []struct {
		n      int
		signed bool
		want   Datatype
		ok     bool
	}{
		{1, true, Int8, true}, {2, true, Int16, true}, {4, true, Int32, true}, {8, true, Int64, true},
		{1, false, Uint8, true}, {2, false, Uint16, true}, {4, false, Uint32, true}, {8, false, Uint64, true},
		{3, true, 0, false}, {16, false, 0, false},
	} {
		if d, ok := IntOfSize(c.n, c.signed); d != c.want || ok != c.ok {
			t.Errorf("IntOfSize(%d, %v) = %v, %v", c.n, c.signed, d, ok)
		}
	}
}
