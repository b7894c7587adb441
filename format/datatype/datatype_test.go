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
