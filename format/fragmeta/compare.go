package fragmeta

import (
	"bytes"
	"encoding/binary"
	"math"

	"github.com/tileflight/tileflight/format/datatype"
)

// Compare orders two coordinates of dimension dim the way TileDB does when
// it merges MBRs: numerically for fixed-size dimensions (datetimes as
// int64), byte-wise for var-sized ones. Values of the wrong size compare
// byte-wise so that corrupt input never panics.
func Compare(dim Field, a, b []byte) int {
	if dim.Var() || len(a) != dim.Type.Size() || len(b) != dim.Type.Size() {
		return bytes.Compare(a, b)
	}
	le := binary.LittleEndian
	switch dim.Type {
	case datatype.Int8:
		return cmp3(int8(a[0]), int8(b[0]))
	case datatype.Uint8, datatype.Bool, datatype.Char, datatype.StringASCII:
		return cmp3(a[0], b[0])
	case datatype.Int16:
		return cmp3(int16(le.Uint16(a)), int16(le.Uint16(b)))
	case datatype.Uint16:
		return cmp3(le.Uint16(a), le.Uint16(b))
	case datatype.Int32:
		return cmp3(int32(le.Uint32(a)), int32(le.Uint32(b)))
	case datatype.Uint32:
		return cmp3(le.Uint32(a), le.Uint32(b))
	case datatype.Uint64:
		return cmp3(le.Uint64(a), le.Uint64(b))
	case datatype.Float32:
		return cmp3(math.Float32frombits(le.Uint32(a)), math.Float32frombits(le.Uint32(b)))
	case datatype.Float64:
		return cmp3(math.Float64frombits(le.Uint64(a)), math.Float64frombits(le.Uint64(b)))
	}
	if dim.Type.Size() == 8 { // int64, datetimes, times
		return cmp3(int64(le.Uint64(a)), int64(le.Uint64(b)))
	}
	return bytes.Compare(a, b)
}

func cmp3[T int8 | uint8 | int16 | uint16 | int32 | uint32 | int64 | uint64 | float32 | float64](a, b T) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
