package arrowconv

import (
	"fmt"
	"unicode/utf8"
)

// checkUTF8 refuses a string column whose cells are not valid UTF-8:
// Arrow's string type promises it, and clients fail decoding the whole
// batch otherwise. Tiles of arrays without checksums carry whatever a
// damaged disk left, so the bytes are checked here, where they become
// Arrow strings. The data buffer is checked once; the cells are then valid
// when none starts inside a multi-byte sequence (aoffs holds n+1 starts).
func checkUTF8(f Field, data []byte, aoffs []int64) error {
	if len(aoffs) < 2 {
		return nil
	}
	lo, hi := aoffs[0], aoffs[len(aoffs)-1]
	if lo < 0 || hi > int64(len(data)) || lo > hi {
		return nil // the offsets' own checks report this
	}
	if !utf8.Valid(data[lo:hi]) {
		return fmt.Errorf("field %q: a cell is not valid UTF-8 (near byte %d): %w", f.Name, lo+int64(firstInvalid(data[lo:hi])), ErrCorrupt)
	}
	for i, o := range aoffs[1 : len(aoffs)-1] {
		if o >= lo && o < hi && !utf8.RuneStart(data[o]) {
			return fmt.Errorf("field %q: cell %d starts inside a UTF-8 sequence (byte %d): %w", f.Name, i+1, o, ErrCorrupt)
		}
	}
	return nil
}

func firstInvalid(b []byte) int {
	for i := 0; i < len(b); {
		r, n := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && n <= 1 {
			return i
		}
		i += n
	}
	return len(b)
}
