package sparse

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/tileflight/tileflight/format/datatype"
	"github.com/tileflight/tileflight/format/schema"
	"github.com/tileflight/tileflight/reader/tileio"
)

// The merge compares cursors by orderKey; it must order any two cells
// exactly as compareGlobal does, for every numeric dimension type, both
// tile and cell orders, and Hilbert arrays.
func TestOrderKeyAgreesWithCompareGlobal(t *testing.T) {
	types := []datatype.Datatype{datatype.Int8, datatype.Int16, datatype.Int32, datatype.Int64,
		datatype.Uint8, datatype.Uint16, datatype.Uint32, datatype.Uint64,
		datatype.Float32, datatype.Float64, datatype.DatetimeMs}
	rng := rand.New(rand.NewPCG(3, 4))
	for _, typ := range types {
		for _, layout := range []string{"row-major", "col-major", "hilbert"} {
			t.Run(typ.String()+"/"+layout, func(t *testing.T) {
				r, cells := orderKeyFixture(t, rng, typ, layout)
				if !r.numericKeys() {
					t.Fatal("numeric dimensions without numeric keys")
				}
				var ka, kb []uint64
				for n := 0; n < 4000; n++ {
					i, j := rng.IntN(cells.n), rng.IntN(cells.n)
					ka = r.orderKey(cells, i, ka)
					kb = r.orderKey(cells, j, kb)
					got, want := slices.Compare(ka, kb), r.compareGlobal(cells, i, cells, j)
					if got != want {
						t.Fatalf("cells %v and %v: keys compare %d, compareGlobal %d", r.cellCoords(cells, i), r.cellCoords(cells, j), got, want)
					}
				}
			})
		}
	}
}

func (r *Reader) cellCoords(t *ltile, i int) [][]byte {
	var out [][]byte
	for d := range r.dims {
		out = append(out, t.coord(d, i))
	}
	return out
}

// orderKeyFixture is a Reader over two dimensions of type typ and one
// tile of random cells, edge values included (domain ends, zeros of
// both signs for floats), with Hilbert values when asked.
func orderKeyFixture(t *testing.T, rng *rand.Rand, typ datatype.Datatype, layout string) (*Reader, *ltile) {
	t.Helper()
	size := typ.Size()
	lo, hi, extent := make([]byte, size), make([]byte, size), make([]byte, size)
	put := func(b []byte, v float64) {
		switch {
		case typ.IsFloat() && size == 4:
			binary.LittleEndian.PutUint32(b, math.Float32bits(float32(v)))
		case typ.IsFloat():
			binary.LittleEndian.PutUint64(b, math.Float64bits(v))
		default:
			var u uint64
			if v < 0 {
				u = uint64(int64(v))
			} else {
				u = uint64(v)
			}
			for k := 0; k < size; k++ {
				b[k] = byte(u >> (8 * k))
			}
		}
	}
	var dlo, dhi float64
	switch {
	case typ.IsFloat():
		dlo, dhi = -100, 100
	case typ.IsSigned():
		dlo, dhi = -100, 100
	default:
		dlo, dhi = 0, 200
	}
	put(lo, dlo)
	put(hi, dhi)
	put(extent, 7)
	r := &Reader{hilbert: layout == "hilbert"}
	for d := 0; d < 2; d++ {
		dim := &schema.Dimension{Name: string(rune('x' + d)), Type: typ, CellValNum: 1, Domain: append(append([]byte(nil), lo...), hi...), TileExtent: extent}
		di := newDimInfo(d, dim, nil)
		di.hasExtent, di.domLo, di.extent = true, lo, extent
		r.dims = append(r.dims, di)
	}
	switch layout {
	case "col-major":
		r.tileOrder, r.cellOrder = []int{1, 0}, []int{1, 0}
	default:
		r.tileOrder, r.cellOrder = []int{0, 1}, []int{0, 1}
	}
	const n = 300
	cells := &ltile{n: n}
	for d := 0; d < 2; d++ {
		data := make([]byte, n*size)
		for i := 0; i < n; i++ {
			v := dlo + math.Floor(rng.Float64()*(dhi-dlo+1))
			if typ.IsFloat() {
				v = dlo + rng.Float64()*(dhi-dlo)
				switch rng.IntN(10) {
				case 0:
					v = math.Copysign(0, -1)
				case 1:
					v = 0
				case 2:
					v = dlo
				}
			}
			v = math.Min(v, dhi)
			put(data[i*size:(i+1)*size], v)
		}
		cells.dims = append(cells.dims, &tileio.Tile{Data: data, Cells: n})
	}
	if r.hilbert {
		// Few distinct values, so that equal Hilbert values fall back on
		// the coordinates.
		cells.hv = make([]uint64, n)
		for i := range cells.hv {
			cells.hv[i] = uint64(rng.IntN(8))
		}
	}
	return r, cells
}
