// Package datatype owns TileDB's datatype enumeration: the on-disk codes,
// the cell sizes and the lower-case names used in tileflight's schema JSON.
package datatype

import (
	"fmt"
	"strings"
)

// Datatype is a TileDB datatype as stored on disk (one byte).
type Datatype uint8

// The TileDB datatype codes. The values are the on-disk encoding.
const (
	Int32         Datatype = 0
	Int64         Datatype = 1
	Float32       Datatype = 2
	Float64       Datatype = 3
	Char          Datatype = 4
	Int8          Datatype = 5
	Uint8         Datatype = 6
	Int16         Datatype = 7
	Uint16        Datatype = 8
	Uint32        Datatype = 9
	Uint64        Datatype = 10
	StringASCII   Datatype = 11
	StringUTF8    Datatype = 12
	StringUTF16   Datatype = 13
	StringUTF32   Datatype = 14
	StringUCS2    Datatype = 15
	StringUCS4    Datatype = 16
	Any           Datatype = 17
	DatetimeYear  Datatype = 18
	DatetimeMonth Datatype = 19
	DatetimeWeek  Datatype = 20
	DatetimeDay   Datatype = 21
	DatetimeHr    Datatype = 22
	DatetimeMin   Datatype = 23
	DatetimeSec   Datatype = 24
	DatetimeMs    Datatype = 25
	DatetimeUs    Datatype = 26
	DatetimeNs    Datatype = 27
	DatetimePs    Datatype = 28
	DatetimeFs    Datatype = 29
	DatetimeAs    Datatype = 30
	TimeHr        Datatype = 31
	TimeMin       Datatype = 32
	TimeSec       Datatype = 33
	TimeMs        Datatype = 34
	TimeUs        Datatype = 35
	TimeNs        Datatype = 36
	TimePs        Datatype = 37
	TimeFs        Datatype = 38
	TimeAs        Datatype = 39
	Blob          Datatype = 40
	Bool          Datatype = 41
	GeomWKB       Datatype = 42
	GeomWKT       Datatype = 43
)

// Max is the largest valid datatype code.
const Max = GeomWKT

var names = [...]string{
	"int32", "int64", "float32", "float64", "char", "int8", "uint8", "int16",
	"uint16", "uint32", "uint64", "string_ascii", "string_utf8", "string_utf16",
	"string_utf32", "string_ucs2", "string_ucs4", "any", "datetime_year",
	"datetime_month", "datetime_week", "datetime_day", "datetime_hr",
	"datetime_min", "datetime_sec", "datetime_ms", "datetime_us", "datetime_ns",
	"datetime_ps", "datetime_fs", "datetime_as", "time_hr", "time_min",
	"time_sec", "time_ms", "time_us", "time_ns", "time_ps", "time_fs", "time_as",
	"blob", "bool", "geom_wkb", "geom_wkt",
}

// Valid reports whether d is a known datatype code.
func (d Datatype) Valid() bool { return d <= Max }

// String returns the lower-case name without prefix (e.g. "datetime_ms").
func (d Datatype) String() string {
	if d.Valid() {
		return names[d]
	}
	return fmt.Sprintf("datatype(%d)", uint8(d))
}

// TileDBName returns the C API spelling, e.g. "DATETIME_MS".
func (d Datatype) TileDBName() string { return strings.ToUpper(d.String()) }

// Parse accepts a name in any case, with or without a "TILEDB_" prefix.
func Parse(s string) (Datatype, error) {
	n := strings.ToLower(strings.TrimSpace(s))
	n = strings.TrimPrefix(n, "tiledb_")
	for i, name := range names {
		if name == n {
			return Datatype(i), nil
		}
	}
	return 0, fmt.Errorf("unknown datatype %q", s)
}

// Size is the size in bytes of one value of d (1 for byte-like types).
func (d Datatype) Size() int {
	switch d {
	case Int32, Uint32, Float32, StringUTF32, StringUCS4:
		return 4
	case Int64, Uint64, Float64:
		return 8
	case Int16, Uint16, StringUTF16, StringUCS2:
		return 2
	case Char, Int8, Uint8, StringASCII, StringUTF8, Any, Blob, Bool, GeomWKB, GeomWKT:
		return 1
	}
	if d.IsDatetime() || d.IsTime() {
		return 8
	}
	return 0
}

// IsDatetime reports DATETIME_* types (stored as int64).
func (d Datatype) IsDatetime() bool { return d >= DatetimeYear && d <= DatetimeAs }

// IsTime reports TIME_* types (stored as int64).
func (d Datatype) IsTime() bool { return d >= TimeHr && d <= TimeAs }

// IsString reports the STRING_* types.
func (d Datatype) IsString() bool { return d >= StringASCII && d <= StringUCS4 }

// IsFloat reports FLOAT32 and FLOAT64.
func (d Datatype) IsFloat() bool { return d == Float32 || d == Float64 }

// IsInteger reports the fixed-width integer types, including the
// datetime/time types (int64) and BOOL (uint8), which TileDB stores as integers.
func (d Datatype) IsInteger() bool {
	switch d {
	case Int8, Uint8, Int16, Uint16, Int32, Uint32, Int64, Uint64, Bool:
		return true
	}
	return d.IsDatetime() || d.IsTime()
}

// IsSigned reports signed integer types (datetimes and times are int64).
func (d Datatype) IsSigned() bool {
	switch d {
	case Int8, Int16, Int32, Int64:
		return true
	}
	return d.IsDatetime() || d.IsTime()
}

// IsByteLike reports the types whose cells are raw bytes or characters
// (strings, CHAR, BLOB, geometries): TileDB treats them as opaque bytes.
func (d Datatype) IsByteLike() bool {
	switch d {
	case Char, StringASCII, StringUTF8, Blob, GeomWKB, GeomWKT, Any:
		return true
	}
	return false
}

// IntOfSize is the integer type of n bytes, signed or not (ok false for a
// width no integer type has).
func IntOfSize(n int, signed bool) (d Datatype, ok bool) {
	ints := [...]Datatype{Int8, Int16, Int32, Int64}
	uints := [...]Datatype{Uint8, Uint16, Uint32, Uint64}
	for i, w := range [...]int{1, 2, 4, 8} {
		if n == w {
			if signed {
				return ints[i], true
			}
			return uints[i], true
		}
	}
	return 0, false
}
