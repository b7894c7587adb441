package arrowconv

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	dt "github.com/tileflight/tileflight/format/datatype"
)

// le encodes values the way TileDB stores them.
func le(vals ...any) []byte {
	var b bytes.Buffer
	for _, v := range vals {
		if err := binary.Write(&b, binary.LittleEndian, v); err != nil {
			panic(err)
		}
	}
	return b.Bytes()
}

func u64s(vs ...uint64) []byte { return le(vs) }

type tcase struct {
	name     string
	f        Field
	data     []byte
	offsets  []byte
	validity []byte
	n        int
	typ      string // Arrow type as String()
	str      string // array String()
	nulls    int
	// noRoundTrip: data that does not survive (NaT -> null)
	noRoundTrip bool
}

func fld(name string, t dt.Datatype, cvn uint32) Field {
	return Field{Name: name, Type: t, CellValNum: cvn}
}

func nullable(f Field) Field { f.Nullable = true; return f }

var enumColors = &Enumeration{Name: "colors", Type: dt.StringUTF8, CellValNum: VarNum,
	Data: []byte("redgreenblue"), Offsets: u64s(0, 3, 8)}

var enumInts = &Enumeration{Name: "sizes", Type: dt.Int32, CellValNum: 1, Data: le([]int32{10, 20, 30})}

func cases() []tcase {
	enumF := Field{Name: "color", Type: dt.Uint8, CellValNum: 1, Enumeration: enumColors, Nullable: true}
	enumI := Field{Name: "size", Type: dt.Int16, CellValNum: 1, Enumeration: enumInts}
	return []tcase{
		{name: "int8", f: fld("a", dt.Int8, 1), data: le([]int8{-128, 0, 127}), n: 3, typ: "int8", str: "[-128 0 127]"},
		{name: "uint8", f: fld("a", dt.Uint8, 1), data: le([]uint8{0, 255}), n: 2, typ: "uint8", str: "[0 255]"},
		{name: "int16", f: fld("a", dt.Int16, 1), data: le([]int16{-3, 4}), n: 2, typ: "int16", str: "[-3 4]"},
		{name: "uint16", f: fld("a", dt.Uint16, 1), data: le([]uint16{65535}), n: 1, typ: "uint16", str: "[65535]"},
		{name: "int32", f: fld("a", dt.Int32, 1), data: le([]int32{1, -2, 3}), n: 3, typ: "int32", str: "[1 -2 3]"},
		{name: "uint32", f: fld("a", dt.Uint32, 1), data: le([]uint32{4294967295}), n: 1, typ: "uint32", str: "[4294967295]"},
		{name: "int64", f: fld("a", dt.Int64, 1), data: le([]int64{math.MinInt64, 5}), n: 2, typ: "int64", str: "[-9223372036854775808 5]"},
		{name: "uint64", f: fld("a", dt.Uint64, 1), data: le([]uint64{math.MaxUint64}), n: 1, typ: "uint64", str: "[18446744073709551615]"},
		{name: "float32", f: fld("a", dt.Float32, 1), data: le([]float32{1.5, -2}), n: 2, typ: "float32", str: "[1.5 -2]"},
		{name: "float64", f: fld("a", dt.Float64, 1), data: le([]float64{0.25, 1e300}), n: 2, typ: "float64", str: "[0.25 1e+300]"},
		{name: "empty", f: fld("a", dt.Float64, 1), data: []byte{}, n: 0, typ: "float64", str: "[]"},
		{name: "bool", f: fld("b", dt.Bool, 1), data: []byte{1, 0, 1, 1, 0, 0, 0, 1, 1, 0}, n: 10, typ: "bool",
			str: "[true false true true false false false true true false]"},
		{name: "bool nullable", f: nullable(fld("b", dt.Bool, 1)), data: []byte{1, 0, 1}, validity: []byte{1, 0, 1}, n: 3, typ: "bool",
			str: "[true (null) true]", nulls: 1},
		{name: "int32 nullable", f: nullable(fld("a", dt.Int32, 1)), data: le([]int32{1, 0, 3, 4, 5, 6, 7, 8, 9}),
			validity: []byte{1, 0, 1, 1, 1, 1, 1, 1, 0}, n: 9, typ: "int32", str: "[1 (null) 3 4 5 6 7 8 (null)]", nulls: 2},
		{name: "nullable all valid", f: nullable(fld("a", dt.Int32, 1)), data: le([]int32{1, 2}), validity: []byte{1, 1}, n: 2, typ: "int32", str: "[1 2]"},
		{name: "datetime_sec", f: fld("t", dt.DatetimeSec, 1), data: le([]int64{0, 86400}), n: 2, typ: "timestamp[s]",
			str: "[0 86400]"},
		{name: "datetime_ms", f: fld("t", dt.DatetimeMs, 1), data: le([]int64{1500}), n: 1, typ: "timestamp[ms]", str: "[1500]"},
		{name: "datetime_us", f: fld("t", dt.DatetimeUs, 1), data: le([]int64{1}), n: 1, typ: "timestamp[us]", str: "[1]"},
		{name: "datetime_ns", f: fld("t", dt.DatetimeNs, 1), data: le([]int64{1}), n: 1, typ: "timestamp[ns]", str: "[1]"},
		{name: "datetime_day", f: fld("d", dt.DatetimeDay, 1), data: le([]int64{0, 19000, -1}), n: 3, typ: "date32",
			str: "[1970-01-01 2022-01-08 1969-12-31]"},
		{name: "datetime_day NaT", f: fld("d", dt.DatetimeDay, 1), data: le([]int64{1, math.MinInt64}), n: 2, typ: "date32",
			str: "[1970-01-02 (null)]", nulls: 1, noRoundTrip: true},
		{name: "time_sec", f: fld("t", dt.TimeSec, 1), data: le([]int64{3600}), n: 1, typ: "time32[s]", str: "[3600]"},
		{name: "time_ms", f: fld("t", dt.TimeMs, 1), data: le([]int64{1}), n: 1, typ: "time32[ms]", str: "[1]"},
		{name: "time_us", f: fld("t", dt.TimeUs, 1), data: le([]int64{1}), n: 1, typ: "time64[us]", str: "[1]"},
		{name: "time_ns", f: fld("t", dt.TimeNs, 1), data: le([]int64{1}), n: 1, typ: "time64[ns]", str: "[1]"},
		{name: "datetime_year", f: fld("t", dt.DatetimeYear, 1), data: le([]int64{53}), n: 1, typ: "int64", str: "[53]"},
		{name: "time_hr", f: fld("t", dt.TimeHr, 1), data: le([]int64{-2}), n: 1, typ: "int64", str: "[-2]"},
		{name: "datetime_as", f: fld("t", dt.DatetimeAs, 1), data: le([]int64{7}), n: 1, typ: "int64", str: "[7]"},
		{name: "string var", f: fld("s", dt.StringUTF8, VarNum), data: []byte("aébbcc"), offsets: u64s(0, 3, 3), n: 3,
			typ: "large_utf8", str: `["aé" "" "bbcc"]`},
		{name: "ascii var nullable", f: nullable(fld("s", dt.StringASCII, VarNum)), data: []byte("xyz"), offsets: u64s(0, 1, 1),
			validity: []byte{1, 0, 1}, n: 3, typ: "large_utf8", str: `["x" (null) "yz"]`, nulls: 1},
		{name: "char var", f: fld("c", dt.Char, VarNum), data: []byte{0, 1, 2}, offsets: u64s(0, 2), n: 2, typ: "large_binary",
			str: `["\x00\x01" "\x02"]`},
		{name: "blob var", f: fld("c", dt.Blob, VarNum), data: []byte{9}, offsets: u64s(0), n: 1, typ: "large_binary", str: `["\t"]`},
		{name: "geom_wkt", f: fld("g", dt.GeomWKT, VarNum), data: []byte("POINT (1 2)"), offsets: u64s(0), n: 1, typ: "large_utf8", str: `["POINT (1 2)"]`},
		{name: "geom_wkb", f: fld("g", dt.GeomWKB, VarNum), data: []byte{1, 2}, offsets: u64s(0), n: 1, typ: "large_binary", str: `["\x01\x02"]`},
		{name: "utf16 var", f: fld("u", dt.StringUTF16, VarNum), data: []byte{'a', 0, 'b', 0}, offsets: u64s(0, 2), n: 2, typ: "large_binary", str: `["a\x00" "b\x00"]`},
		{name: "char fixed 1", f: fld("c", dt.Char, 1), data: []byte("ab"), n: 2, typ: "fixed_size_binary[1]", str: `["a" "b"]`},
		{name: "ascii fixed 3", f: fld("c", dt.StringASCII, 3), data: []byte("abcdef"), n: 2, typ: "fixed_size_binary[3]", str: `["abc" "def"]`},
		{name: "ucs4 fixed 2", f: fld("c", dt.StringUCS4, 2), data: make([]byte, 8), n: 1, typ: "fixed_size_binary[8]", str: `["\x00\x00\x00\x00\x00\x00\x00\x00"]`},
		{name: "int32 fixed 2", f: fld("v", dt.Int32, 2), data: le([]int32{1, 2, 3, 4}), n: 2, typ: "fixed_size_list<item: int32, nullable>[2]",
			str: "[[1 2] [3 4]]"},
		{name: "float64 fixed 3 nullable", f: nullable(fld("v", dt.Float64, 3)), data: le([]float64{1, 2, 3, 0, 0, 0}), validity: []byte{1, 0}, n: 2,
			typ: "fixed_size_list<item: float64, nullable>[3]", str: "[[1 2 3] (null)]", nulls: 1},
		{name: "bool fixed 2", f: fld("v", dt.Bool, 2), data: []byte{1, 0, 0, 1}, n: 2, typ: "fixed_size_list<item: bool, nullable>[2]", str: "[[true false] [false true]]"},
		{name: "datetime_day fixed 2", f: fld("v", dt.DatetimeDay, 2), data: le([]int64{0, 1}), n: 1, typ: "fixed_size_list<item: date32, nullable>[2]", str: "[[1970-01-01 1970-01-02]]"},
		{name: "int16 var", f: fld("v", dt.Int16, VarNum), data: le([]int16{1, 2, 3}), offsets: u64s(0, 4, 4), n: 3,
			typ: "large_list<item: int16, nullable>", str: "[[1 2] [] [3]]"},
		{name: "float32 var nullable", f: nullable(fld("v", dt.Float32, VarNum)), data: le([]float32{1, 2}), offsets: u64s(0, 4, 4),
			validity: []byte{1, 1, 0}, n: 3, typ: "large_list<item: float32, nullable>", str: "[[1] [] (null)]", nulls: 1},
		{name: "bool var", f: fld("v", dt.Bool, VarNum), data: []byte{1, 0, 1}, offsets: u64s(0, 1), n: 2, typ: "large_list<item: bool, nullable>", str: "[[true] [false true]]"},
		{name: "datetime_ms var", f: fld("v", dt.DatetimeMs, VarNum), data: le([]int64{0, 1000}), offsets: u64s(0), n: 1, typ: "large_list<item: timestamp[ms], nullable>",
			str: "[[0 1000]]"},
		{name: "time_sec var", f: fld("v", dt.TimeSec, VarNum), data: le([]int64{1, 2}), offsets: u64s(0, 8), n: 2, typ: "large_list<item: time32[s], nullable>",
			str: "[[1] [2]]"},
		{name: "enum strings", f: enumF, data: []byte{2, 0, 1, 9}, validity: []byte{1, 1, 1, 0}, n: 4,
			typ: "dictionary<values=large_utf8, indices=uint8, ordered=false>", str: "{ dictionary: [\"red\" \"green\" \"blue\"]\n  indices: [2 0 1 (null)] }", nulls: 1},
		{name: "enum ints", f: enumI, data: le([]int16{1, 1, 0}), n: 3,
			typ: "dictionary<values=int32, indices=int16, ordered=false>", str: "{ dictionary: [10 20 30]\n  indices: [1 1 0] }"},
	}
}

func TestRoundTrip(t *testing.T) {
	for _, c := range cases() {
		t.Run(c.name, func(t *testing.T) {
			arr, err := NewColumn(c.f, c.data, c.offsets, c.validity, c.n)
			if err != nil {
				t.Fatal(err)
			}
			defer arr.Release()
			want, err := ArrowType(c.f)
			if err != nil {
				t.Fatal(err)
			}
			if !arrow.TypeEqual(arr.DataType(), want) {
				t.Fatalf("array type %s, ArrowType %s", arr.DataType(), want)
			}
			if got := arr.DataType().String(); got != c.typ {
				t.Errorf("type %s, want %s", got, c.typ)
			}
			if got := arr.String(); got != c.str {
				t.Errorf("values %s, want %s", got, c.str)
			}
			if arr.Len() != c.n || arr.NullN() != c.nulls {
				t.Errorf("len %d nulls %d, want %d %d", arr.Len(), arr.NullN(), c.n, c.nulls)
			}
			if err := arr.Data().(*array.Data); err == nil {
				t.Fatal("no data")
			}
			if c.noRoundTrip {
				return
			}
			data, offs, valid, err := ToTileDB(c.f, arr)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(data, c.data) || !bytes.Equal(offs, c.offsets) {
				t.Errorf("round trip data %x offsets %x, want %x %x", data, offs, c.data, c.offsets)
			}
			wantValid := c.validity
			if c.f.Nullable && wantValid == nil {
				wantValid = bytes.Repeat([]byte{1}, c.n)
			}
			if !bytes.Equal(valid, wantValid) {
				t.Errorf("round trip validity %v, want %v", valid, wantValid)
			}
			// A slice of the array (non-zero Arrow offset) converts to the
			// matching cells.
			if c.n >= 2 {
				sl := array.NewSlice(arr, 1, int64(c.n))
				defer sl.Release()
				sd, so, sv, err := ToTileDB(c.f, sl)
				if err != nil {
					t.Fatal(err)
				}
				back, err := NewColumn(c.f, sd, so, sv, c.n-1)
				if err != nil {
					t.Fatal(err)
				}
				if !array.Equal(back, sl) {
					t.Errorf("slice round trip %s, want %s", back, sl)
				}
			}
		})
	}
}

// TestZeroCopy checks that the bytes TileDB gave are the bytes Arrow holds,
// and that ToTileDB hands the Arrow buffer back without copying.
func TestZeroCopy(t *testing.T) {
	data := le([]int64{1, 2, 3, 4})
	arr, err := NewColumn(fld("a", dt.Int64, 1), data[8:24], nil, nil, 2)
	if err != nil {
		t.Fatal(err)
	}
	if &arr.Data().Buffers()[1].Bytes()[0] != &data[8] {
		t.Fatal("fixed-size data was copied")
	}
	out, _, _, err := ToTileDB(fld("a", dt.Int64, 1), array.NewSlice(arr, 1, 2))
	if err != nil || &out[0] != &data[16] {
		t.Fatal("ToTileDB copied an exactly matching column", err)
	}
	s := []byte("xxhelloworld")
	sa, err := NewColumn(fld("s", dt.StringUTF8, VarNum), s, u64s(2, 7), nil, 2)
	if err != nil {
		t.Fatal(err)
	}
	if got := sa.String(); got != `["hello" "world"]` {
		t.Fatal(got)
	}
	if &sa.Data().Buffers()[2].Bytes()[0] != &s[2] {
		t.Fatal("var data was copied")
	}
	d, o, _, err := ToTileDB(fld("s", dt.StringUTF8, VarNum), sa)
	if err != nil || &d[0] != &s[2] || !bytes.Equal(o, u64s(0, 5)) {
		t.Fatal("var round trip", err, o)
	}
}

func TestTileRange(t *testing.T) {
	// Cells 1..2 of a 4-cell var tile: offsets[1:3], data up to cell 3's start.
	data := []byte("aabbbcdddd")
	offs := u64s(0, 2, 5, 6)
	arr, err := NewColumn(fld("s", dt.StringASCII, VarNum), data[:6], offs[8:24], nil, 2)
	if err != nil {
		t.Fatal(err)
	}
	if got := arr.String(); got != `["bbb" "c"]` {
		t.Fatal(got)
	}
}

func TestNewColumnErrors(t *testing.T) {
	cases := []struct {
		name                      string
		f                         Field
		data, offsets, validities []byte
		n                         int
		want                      string
		is                        error
	}{
		{"short fixed", fld("a", dt.Int32, 1), make([]byte, 7), nil, nil, 2, `field "a": 7 data bytes for 2 cells of 4 bytes`, ErrCorrupt},
		{"long fixed", fld("a", dt.Int32, 1), make([]byte, 12), nil, nil, 2, "12 data bytes", ErrCorrupt},
		{"negative n", fld("a", dt.Int32, 1), nil, nil, nil, -1, "negative cell count", ErrCorrupt},
		{"offsets count", fld("s", dt.StringUTF8, VarNum), []byte("ab"), u64s(0), nil, 2, "8 offset bytes for 2 cells", ErrCorrupt},
		{"offsets decrease", fld("s", dt.StringUTF8, VarNum), []byte("abc"), u64s(0, 2, 1), nil, 3, "offset of cell 2 (1) is below the previous one (2)", ErrCorrupt},
		{"offset beyond", fld("s", dt.StringUTF8, VarNum), []byte("abc"), u64s(0, 4), nil, 2, "offset of cell 1 (4) beyond 3 data bytes", ErrCorrupt},
		{"first offset beyond", fld("s", dt.StringUTF8, VarNum), []byte("abc"), u64s(9), nil, 1, "first offset 9 beyond 3", ErrCorrupt},
		{"var numeric misaligned", fld("v", dt.Int32, VarNum), make([]byte, 8), u64s(0, 2), nil, 2, "not a multiple of the 4-byte", ErrCorrupt},
		{"var numeric ragged", fld("v", dt.Int32, VarNum), make([]byte, 7), u64s(0, 4), nil, 2, "7 value bytes", ErrCorrupt},
		{"validity length", nullable(fld("a", dt.Int8, 1)), []byte{1, 2}, nil, []byte{1}, 2, "1 validity bytes for 2 cells", ErrCorrupt},
		{"validity not nullable", fld("a", dt.Int8, 1), []byte{1}, nil, []byte{1}, 1, "non-nullable", ErrCorrupt},
		{"day out of range", fld("d", dt.DatetimeDay, 1), le([]int64{1 << 40}), nil, nil, 1, "cell 0: datetime_day value 1099511627776 does not fit 32 bits", ErrMismatch},
		{"bad datatype", fld("a", dt.Datatype(200), 1), nil, nil, nil, 0, "datatype 200", ErrUnsupported},
		{"cvn 0", fld("a", dt.Int32, 0), nil, nil, nil, 0, "cell_val_num 0", ErrUnsupported},
		{"enum index", Field{Name: "e", Type: dt.Int8, CellValNum: 1, Enumeration: enumColors}, []byte{3}, nil, nil, 1, `cell 0: enumeration index 3 outside "colors"'s 3 values`, ErrCorrupt},
		{"enum negative", Field{Name: "e", Type: dt.Int8, CellValNum: 1, Enumeration: enumColors}, []byte{0xff}, nil, nil, 1, "enumeration index -1", ErrCorrupt},
		{"enum float index", Field{Name: "e", Type: dt.Float32, CellValNum: 1, Enumeration: enumColors}, nil, nil, nil, 0, "not an integer", ErrUnsupported},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := NewColumn(c.f, c.data, c.offsets, c.validities, c.n)
			if err == nil || !strings.Contains(err.Error(), c.want) || !errors.Is(err, c.is) {
				t.Fatalf("error %v, want %q wrapping %v", err, c.want, c.is)
			}
		})
	}
}

func TestArrowFieldAndSchema(t *testing.T) {
	fs := []Field{
		{Name: "x", Type: dt.Int64, CellValNum: 1, Role: Dimension, Nullable: true},
		{Name: "v", Type: dt.Float32, CellValNum: 1, Nullable: true},
		{Name: "c", Type: dt.Uint8, CellValNum: 1, Enumeration: enumColors},
		{Name: "t", Type: dt.DatetimeHr, CellValNum: 1},
	}
	s, err := Schema(fs, map[string]string{"tiledb.array": "a"})
	if err != nil {
		t.Fatal(err)
	}
	want := `schema:
  fields: 4
    - x: type=int64
   metadata: ["tiledb.role": "dimension", "tiledb.datatype": "int64"]
    - v: type=float32, nullable
   metadata: ["tiledb.role": "attribute", "tiledb.datatype": "float32"]
    - c: type=dictionary<values=large_utf8, indices=uint8, ordered=false>
   metadata: ["tiledb.role": "attribute", "tiledb.datatype": "uint8", "tiledb.enumeration": "colors"]
    - t: type=int64
   metadata: ["tiledb.role": "attribute", "tiledb.datatype": "datetime_hr"]
  metadata: ["tiledb.array": "a"]`
	if s.String() != want {
		t.Errorf("schema\n%s\nwant\n%s", s, want)
	}
	if _, err := Schema([]Field{{Name: "bad", Type: dt.Int32}}, nil); err == nil {
		t.Fatal("cell_val_num 0 accepted")
	}
}

func TestEnumerationDictionaryShared(t *testing.T) {
	f := Field{Name: "c", Type: dt.Uint8, CellValNum: 1, Enumeration: enumColors}
	a, err := NewColumn(f, []byte{0}, nil, nil, 1)
	if err != nil {
		t.Fatal(err)
	}
	b, err := NewColumn(f, []byte{1}, nil, nil, 1)
	if err != nil {
		t.Fatal(err)
	}
	if b.(*array.Dictionary).Dictionary().Data() != a.(*array.Dictionary).Dictionary().Data() {
		t.Fatal("dictionary rebuilt per column")
	}
	a.Release() // releasing one column leaves the shared dictionary intact
	if b.(*array.Dictionary).Dictionary().Len() != 3 {
		t.Fatal("shared dictionary released")
	}
	if got := b.String(); !strings.Contains(got, `indices: [1]`) {
		t.Fatal(got)
	}
}

func TestPackBits(t *testing.T) {
	for n := 0; n < 40; n++ {
		src := make([]byte, n)
		for i := range src {
			src[i] = byte((i * 37) % 5) // 0..4: any non-zero byte is valid
		}
		dst := make([]byte, bitmapLen(n))
		set := packBits(dst, src)
		cnt := 0
		for i, v := range src {
			bit := dst[i/8]>>(i%8)&1 == 1
			if bit != (v != 0) {
				t.Fatalf("n=%d bit %d", n, i)
			}
			if v != 0 {
				cnt++
			}
		}
		if set != cnt || popcount(dst, n) != cnt {
			t.Fatalf("n=%d set %d popcount %d want %d", n, set, popcount(dst, n), cnt)
		}
	}
}

// TestToTileDBConveniences covers the DoPut conversions.
func TestToTileDBConveniences(t *testing.T) {
	mem := memory.NewGoAllocator()
	i64 := func(vs ...int64) arrow.Array {
		b := array.NewInt64Builder(mem)
		b.AppendValues(vs, nil)
		return b.NewArray()
	}
	f64 := func(vs ...float64) arrow.Array {
		b := array.NewFloat64Builder(mem)
		b.AppendValues(vs, nil)
		return b.NewArray()
	}
	strs := func(b interface {
		array.Builder
		AppendString(string)
	}, vs ...string) arrow.Array {
		for _, v := range vs {
			b.AppendString(v)
		}
		return b.NewArray()
	}
	ts := func(u arrow.TimeUnit, vs ...int64) arrow.Array {
		b := array.NewTimestampBuilder(mem, &arrow.TimestampType{Unit: u, TimeZone: "UTC"})
		for _, v := range vs {
			b.Append(arrow.Timestamp(v))
		}
		return b.NewArray()
	}
	date32 := func(vs ...int32) arrow.Array {
		b := array.NewDate32Builder(mem)
		for _, v := range vs {
			b.Append(arrow.Date32(v))
		}
		return b.NewArray()
	}
	time32s := func(vs ...int32) arrow.Array {
		b := array.NewTime32Builder(mem, &arrow.Time32Type{Unit: arrow.Second})
		for _, v := range vs {
			b.Append(arrow.Time32(v))
		}
		return b.NewArray()
	}
	nullI32 := func() arrow.Array {
		b := array.NewInt32Builder(mem)
		b.Append(1)
		b.AppendNull()
		return b.NewArray()
	}
	list := func(vals [][]int64) arrow.Array {
		b := array.NewListBuilder(mem, arrow.PrimitiveTypes.Int64)
		vb := b.ValueBuilder().(*array.Int64Builder)
		for _, v := range vals {
			if v == nil {
				b.AppendNull()
				continue
			}
			b.Append(true)
			vb.AppendValues(v, nil)
		}
		return b.NewArray()
	}
	dictArr := func(vals ...string) arrow.Array {
		b := array.NewDictionaryBuilder(mem, &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int32, ValueType: arrow.BinaryTypes.String})
		for _, v := range vals {
			if v == "" {
				b.AppendNull()
				continue
			}
			if err := b.(*array.BinaryDictionaryBuilder).AppendString(v); err != nil {
				t.Fatal(err)
			}
		}
		return b.NewArray()
	}
	cases := []struct {
		name              string
		f                 Field
		arr               arrow.Array
		data, offs, valid []byte
		err               string
	}{
		{name: "int64 -> int8", f: fld("a", dt.Int8, 1), arr: i64(-128, 127), data: []byte{0x80, 0x7f}},
		{name: "int64 -> int8 overflow", f: fld("a", dt.Int8, 1), arr: i64(1, 128), err: `column "a": row 1: int64 value 128 does not convert exactly to int8`},
		{name: "int64 -> uint16 negative", f: fld("a", dt.Uint16, 1), arr: i64(-1), err: "row 0: int64 value -1"},
		{name: "int64 -> uint64", f: fld("a", dt.Uint64, 1), arr: i64(5), data: le([]uint64{5})},
		{name: "int64 -> float64 exact", f: fld("a", dt.Float64, 1), arr: i64(1 << 53), data: le([]float64{1 << 53})},
		{name: "int64 -> float64 inexact", f: fld("a", dt.Float64, 1), arr: i64(1<<53 + 1), err: "does not convert exactly to float64"},
		{name: "int64 max -> float64", f: fld("a", dt.Float64, 1), arr: i64(math.MaxInt64), err: "does not convert exactly"},
		{name: "float64 -> int32", f: fld("a", dt.Int32, 1), arr: f64(3, -4), data: le([]int32{3, -4})},
		{name: "float64 fraction", f: fld("a", dt.Int32, 1), arr: f64(2.5), err: "row 0: float64 value 2.5"},
		{name: "float64 NaN -> int", f: fld("a", dt.Int64, 1), arr: f64(math.NaN()), err: "does not convert exactly"},
		{name: "float64 2^63 -> int64", f: fld("a", dt.Int64, 1), arr: f64(math.Ldexp(1, 63)), err: "does not convert exactly"},
		{name: "float64 -> float32", f: fld("a", dt.Float32, 1), arr: f64(0.5, math.Inf(1)), data: le([]float32{0.5, float32(math.Inf(1))})},
		{name: "float64 -> float32 inexact", f: fld("a", dt.Float32, 1), arr: f64(0.1), err: "float64 value 0.1"},
		{name: "int -> bool", f: fld("b", dt.Bool, 1), arr: i64(0, 1), data: []byte{0, 1}},
		{name: "int 2 -> bool", f: fld("b", dt.Bool, 1), arr: i64(2), err: "2 is not a boolean"},
		{name: "string -> int", f: fld("a", dt.Int32, 1), arr: strs(array.NewStringBuilder(mem), "1"),
			err: `column "a": expected int32 (TileDB int32), got utf8`},
		{name: "null in non-nullable", f: fld("a", dt.Int32, 1), arr: nullI32(), err: `column "a": row 1 is null but the attribute is not nullable`},
		{name: "null in dimension", f: Field{Name: "x", Type: dt.Int32, CellValNum: 1, Role: Dimension, Nullable: true}, arr: nullI32(), err: "dimension is not nullable"},
		{name: "nullable", f: nullable(fld("a", dt.Int32, 1)), arr: nullI32(), data: le([]int32{1, 0})[:8], valid: []byte{1, 0}},
		{name: "utf8", f: fld("s", dt.StringUTF8, VarNum), arr: strs(array.NewStringBuilder(mem), "ab", "", "c"), data: []byte("abc"), offs: u64s(0, 2, 2)},
		{name: "utf8_view", f: fld("s", dt.StringUTF8, VarNum), arr: strs(array.NewStringViewBuilder(mem), "a long string beyond twelve", "b"),
			data: []byte("a long string beyond twelveb"), offs: u64s(0, 27)},
		{name: "binary -> blob", f: fld("s", dt.Blob, VarNum), arr: strs(array.NewBinaryBuilder(mem, arrow.BinaryTypes.Binary), "xy"), data: []byte("xy"), offs: u64s(0)},
		{name: "utf8 -> fixed char", f: fld("s", dt.Char, 2), arr: strs(array.NewStringBuilder(mem), "ab", "cd"), data: []byte("abcd")},
		{name: "utf8 wrong width", f: fld("s", dt.Char, 2), arr: strs(array.NewStringBuilder(mem), "ab", "c"), err: "row 1 has 1 bytes, the field's cells have 2"},
		{name: "timestamp s -> ms", f: fld("t", dt.DatetimeMs, 1), arr: ts(arrow.Second, 2, -1), data: le([]int64{2000, -1000})},
		{name: "timestamp ms -> s exact", f: fld("t", dt.DatetimeSec, 1), arr: ts(arrow.Millisecond, 3000), data: le([]int64{3})},
		{name: "timestamp ms -> s inexact", f: fld("t", dt.DatetimeSec, 1), arr: ts(arrow.Millisecond, 3001), err: "row 0"},
		{name: "timestamp s -> ns overflow", f: fld("t", dt.DatetimeNs, 1), arr: ts(arrow.Second, 1<<40), err: "out of range"},
		{name: "timestamp ns -> as overflow", f: fld("t", dt.DatetimeAs, 1), arr: ts(arrow.Nanosecond, 1<<40), err: "out of range"},
		{name: "timestamp ns -> ps", f: fld("t", dt.DatetimePs, 1), arr: ts(arrow.Nanosecond, 5), data: le([]int64{5000})},
		{name: "timestamp s -> day", f: fld("t", dt.DatetimeDay, 1), arr: ts(arrow.Second, 172800), data: le([]int64{2})},
		{name: "timestamp s -> week", f: fld("t", dt.DatetimeWeek, 1), arr: ts(arrow.Second, 604800), data: le([]int64{1})},
		{name: "timestamp -> year", f: fld("t", dt.DatetimeYear, 1), arr: ts(arrow.Second, 0), err: "expected int64 (TileDB datetime_year), got timestamp[s, tz=UTC]"},
		{name: "int -> datetime", f: fld("t", dt.DatetimeMs, 1), arr: i64(7), data: le([]int64{7})},
		{name: "date32 -> datetime_ms", f: fld("t", dt.DatetimeMs, 1), arr: date32(1, -1), data: le([]int64{86400000, -86400000})},
		{name: "time32[s] -> time_ms", f: fld("t", dt.TimeMs, 1), arr: time32s(2), data: le([]int64{2000})},
		{name: "date32 zero -> datetime_as", f: fld("t", dt.DatetimeAs, 1), arr: date32(0, 0), data: le([]int64{0, 0})},
		{name: "date32 -> datetime_as beyond int64", f: fld("t", dt.DatetimeAs, 1), arr: date32(0, 1), err: "row 1: date32 value"},
		{name: "date32 -> datetime_week inexact", f: fld("t", dt.DatetimeWeek, 1), arr: date32(7, 8), err: "row 1: date32 value"},
		{name: "timestamp -> time", f: fld("t", dt.TimeMs, 1), arr: ts(arrow.Second, 0), err: "expected time32[ms]"},
		{name: "list -> var int32", f: fld("v", dt.Int32, VarNum), arr: list([][]int64{{1, 2}, {}, {3}}), data: le([]int32{1, 2, 3}), offs: u64s(0, 8, 8)},
		{name: "list -> fixed 2", f: fld("v", dt.Int64, 2), arr: list([][]int64{{1, 2}, {3, 4}}), data: le([]int64{1, 2, 3, 4})},
		{name: "list wrong length", f: fld("v", dt.Int64, 2), arr: list([][]int64{{1, 2}, {3}}), err: "row 1 has 1 values, the field has 2 per cell"},
		{name: "list nullable fixed", f: nullable(fld("v", dt.Int64, 2)), arr: list([][]int64{{1, 2}, nil}), data: le([]int64{1, 2, 0, 0}), valid: []byte{1, 0}},
		{name: "list elem overflow", f: fld("v", dt.Int8, VarNum), arr: list([][]int64{{1000}}), err: "int64 value 1000 does not convert exactly to int8"},
		{name: "list -> scalar", f: fld("v", dt.Int8, 1), arr: list([][]int64{{1}}), err: "expected int8 (TileDB int8), got list<item: int64, nullable>"},
		{name: "dictionary", f: Field{Name: "c", Type: dt.Uint8, CellValNum: 1, Enumeration: enumColors, Nullable: true}, arr: dictArr("blue", "red", "", "blue"),
			data: []byte{2, 0, 0, 2}, valid: []byte{1, 1, 0, 1}},
		{name: "dictionary unknown", f: Field{Name: "c", Type: dt.Uint8, CellValNum: 1, Enumeration: enumColors}, arr: dictArr("red", "pink"),
			err: `row 1: value pink is not in enumeration "colors"`},
		{name: "enum plain strings", f: Field{Name: "c", Type: dt.Int32, CellValNum: 1, Enumeration: enumColors}, arr: strs(array.NewLargeStringBuilder(mem), "green"),
			data: le([]int32{1})},
		{name: "enum indices", f: Field{Name: "c", Type: dt.Int32, CellValNum: 1, Enumeration: enumColors}, arr: i64(2, 0), data: le([]int32{2, 0})},
		{name: "enum index out of range", f: Field{Name: "c", Type: dt.Int32, CellValNum: 1, Enumeration: enumColors}, arr: i64(3), err: "enumeration index 3 outside"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			defer c.arr.Release()
			data, offs, valid, err := ToTileDB(c.f, c.arr)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) || !errors.Is(err, ErrMismatch) {
					t.Fatalf("error %v, want %q", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(data, c.data) || !bytes.Equal(offs, c.offs) || !bytes.Equal(valid, c.valid) {
				t.Fatalf("got %x %x %v, want %x %x %v", data, offs, valid, c.data, c.offs, c.valid)
			}
		})
	}
}

// A dictionary column whose values are in another order than the
// enumeration's must be remapped without touching the caller's indices: the
// same record may be converted again (a retried DoPut) or read concurrently.
func TestToTileDBDictionaryLeavesInputAlone(t *testing.T) {
	mem := memory.NewGoAllocator()
	for _, it := range []arrow.DataType{arrow.PrimitiveTypes.Int64, arrow.PrimitiveTypes.Int32} {
		b := array.NewDictionaryBuilder(mem, &arrow.DictionaryType{IndexType: it, ValueType: arrow.BinaryTypes.String})
		for _, v := range []string{"blue", "red", "blue", "green"} {
			if err := b.(*array.BinaryDictionaryBuilder).AppendString(v); err != nil {
				t.Fatal(err)
			}
		}
		arr := b.NewArray()
		b.Release()
		f := Field{Name: "c", Type: dt.Int64, CellValNum: 1, Enumeration: enumColors}
		want := le([]int64{2, 0, 2, 1})
		for round := range 2 {
			data, _, _, err := ToTileDB(f, arr)
			if err != nil {
				t.Fatalf("%s round %d: %v", it, round, err)
			}
			if !bytes.Equal(data, want) {
				t.Fatalf("%s round %d: got %x, want %x", it, round, data, want)
			}
		}
		if got := arr.String(); got != `{ dictionary: ["blue" "red" "green"]
  indices: [0 1 0 2] }` {
			t.Fatalf("%s: input changed: %s", it, got)
		}
		arr.Release()
	}
}
