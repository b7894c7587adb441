package sparse

import (
	"encoding/binary"
	"math"
	"math/rand"
	"testing"

	"github.com/tileflight/tileflight/format/datatype"
	"github.com/tileflight/tileflight/format/schema"
	"github.com/tileflight/tileflight/reader/plan"
)

// TestRangeCountMany: with many ranges (overlapping, duplicated, single
// values) rangeCount searches sorted bounds; it must count exactly what
// trying every range counts, for every kind of dimension.
func TestRangeCountMany(t *testing.T) {
	enc := map[datatype.Datatype]func(v int) []byte{
		datatype.Int64:  func(v int) []byte { return binary.LittleEndian.AppendUint64(nil, uint64(int64(v)-50)) },
		datatype.Uint32: func(v int) []byte { return binary.LittleEndian.AppendUint32(nil, uint32(v)) },
		datatype.Float64: func(v int) []byte {
			return binary.LittleEndian.AppendUint64(nil, math.Float64bits(float64(v)/4-10))
		},
		datatype.StringASCII: func(v int) []byte { return []byte{byte('a' + v/26), byte('a' + v%26)} },
	}
	rng := rand.New(rand.NewSource(29))
	for typ, f := range enc {
		d := &schema.Dimension{Name: "d", Type: typ, CellValNum: 1}
		if typ == datatype.StringASCII {
			d.CellValNum = schema.VarNum
		}
		for trial := 0; trial < 20; trial++ {
			var rs []plan.Range
			for k := 0; k < 1+rng.Intn(200); k++ {
				lo := rng.Intn(200)
				hi := lo + rng.Intn(3)*rng.Intn(60)
				for r := 0; r <= rng.Intn(3); r++ {
					rs = append(rs, plan.Range{Lo: f(lo), Hi: f(hi)})
				}
			}
			many := newDimInfo(0, d, rs)
			few := newDimInfo(0, d, rs)
			few.many = false
			if len(rs) > manyRanges && !many.many {
				t.Fatalf("%s: %d ranges not searched", typ, len(rs))
			}
			for v := 0; v < 280; v++ {
				if a, b := many.rangeCount(f(v)), few.rangeCount(f(v)); a != b {
					t.Fatalf("%s, %d ranges: value %d is in %d ranges, sorted bounds say %d", typ, len(rs), v, b, a)
				}
			}
		}
	}
}
