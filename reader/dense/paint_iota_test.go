package dense

import (
	"encoding/binary"
	"testing"
)

// putIota against the per-cell definition, for every dimension width,
// wrapping across the width's range and at an offset.
func TestPutIota(t *testing.T) {
	for _, tc := range []struct {
		name   string
		sz     int
		first  uint64
		n      uint64
		offset int
	}{
		{"int64", 8, 1<<63 - 3, 7, 0},
		{"int32 wraps", 4, 1<<32 - 2, 5, 4},
		{"int16", 2, 65530, 9, 2},
		{"int8 wraps", 1, 250, 12, 3},
		{"empty", 8, 5, 0, 8},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := make([]byte, tc.offset+int(tc.n)*tc.sz+8)
			end := putIota(b, tc.offset, tc.sz, tc.first, tc.n)
			if end != tc.offset+int(tc.n)*tc.sz {
				t.Fatalf("end %d", end)
			}
			var one [8]byte
			for k := uint64(0); k < tc.n; k++ {
				binary.LittleEndian.PutUint64(one[:], tc.first+k)
				got := b[tc.offset+int(k)*tc.sz : tc.offset+int(k+1)*tc.sz]
				if string(got) != string(one[:tc.sz]) {
					t.Fatalf("cell %d: % x, want % x", k, got, one[:tc.sz])
				}
			}
			for _, x := range b[end:] {
				if x != 0 {
					t.Fatal("wrote past the end")
				}
			}
		})
	}
}
