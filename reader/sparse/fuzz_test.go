package sparse

import (
	"math"
	"testing"

	"github.com/tileflight/tileflight/format/commits"
	"github.com/tileflight/tileflight/format/datatype"
	"github.com/tileflight/tileflight/reader/tileio"
)

// FuzzEvalKeep evaluates arbitrary decoded delete conditions (any op on
// any field, malformed sets and operands of the wrong size) on cells of
// every kind: it must never panic.
func FuzzEvalKeep(f *testing.F) {
	seed := func(n *commits.Node) {
		b, err := commits.EncodeCondition(n)
		if err == nil {
			f.Add(b)
		}
	}
	seed(&commits.Node{Kind: commits.KindValue, Field: "i", Op: commits.OpLT, Value: le32(3)})
	seed(&commits.Node{Kind: commits.KindValue, Field: "s", Op: commits.OpIn, Value: []byte("ab"), Offsets: []uint64{0, 1}})
	seed(&commits.Node{Kind: commits.KindExpr, Combination: commits.Or, Children: []*commits.Node{
		{Kind: commits.KindValue, Field: "f", Op: commits.OpNE, Value: lef64(math.NaN())},
		{Kind: commits.KindValue, Field: "i", Op: commits.OpEQ}}})
	fields := map[string]*condField{
		"i": {typ: datatype.Int32, size: 4, nullable: true,
			tile: &tileio.Tile{Data: append(le32(1), le32(-5)...), Validity: []byte{1, 0}, Cells: 2}},
		"s": {typ: datatype.StringASCII, isVar: true, tile: &tileio.Tile{Data: []byte("abc"), Offsets: offs(0, 0, 3), Cells: 2}},
		"f": {typ: datatype.Float64, size: 8, tile: &tileio.Tile{Data: append(lef64(1), lef64(math.Inf(-1))...), Cells: 2}},
		"u": {typ: datatype.Uint8, size: 1, tile: &tileio.Tile{Data: []byte{0, 255}, Cells: 2}},
		"g": {typ: datatype.Int64, size: 8},
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		n, err := commits.DecodeCondition(b)
		if err != nil {
			return
		}
		for i := 0; i < 2; i++ {
			evalKeep(n, fields, i)
		}
	})
}
