package arrowconv

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/apache/arrow-go/v18/arrow"
)

// Tile is the unfiltered buffers of a tile, or of any range of its cells, in
// NewColumn's conventions: N cells; for var-sized fields Offsets holds N
// uint64 start offsets into Data and the last cell ends at len(Data);
// Validity is nil or N bytes.
type Tile struct {
	Data, Offsets, Validity []byte
	N                       int
}

// Run selects Len consecutive cells of tiles[Tile], starting at cell Start.
// A gather of single cells uses runs of length 1.
type Run struct {
	Tile, Start, Len uint32
}

// Gather copies the cells that runs select, in run order, into one new
// array: the path for layouts that reorder cells (row-major or col-major
// results over tiles of another order, fragment merges, sparse unordered
// results). Bytes are copied once, per run where runs are long and per cell,
// without a generic copy, where they are single cells. Tiles are validated
// only where runs touch them; a bad run or buffer is an error wrapping
// ErrCorrupt.
func Gather(f Field, tiles []Tile, runs []Run) (arrow.Array, error) {
	if !littleEndian {
		return nil, fmt.Errorf("field %q: big-endian host: %w", f.Name, ErrUnsupported)
	}
	if _, err := ArrowType(f); err != nil {
		return nil, err
	}
	n := 0
	nullable := false
	for i, r := range runs {
		if int(r.Tile) >= len(tiles) {
			return nil, fmt.Errorf("field %q: run %d: tile %d of %d: %w", f.Name, i, r.Tile, len(tiles), ErrCorrupt)
		}
		t := &tiles[r.Tile]
		if uint64(r.Start)+uint64(r.Len) > uint64(max(t.N, 0)) {
			return nil, fmt.Errorf("field %q: run %d: cells [%d, %d) of a %d-cell tile: %w", f.Name, i, r.Start, uint64(r.Start)+uint64(r.Len), t.N, ErrCorrupt)
		}
		if n > math.MaxInt32*int(1<<16) {
			return nil, fmt.Errorf("field %q: gather of more than 2^47 cells: %w", f.Name, ErrUnsupported)
		}
		n += int(r.Len)
		if t.Validity != nil {
			nullable = true
		}
	}
	for ti := range tiles {
		t := &tiles[ti]
		if t.N < 0 {
			return nil, fmt.Errorf("field %q: tile %d: negative cell count: %w", f.Name, ti, ErrCorrupt)
		}
		if err := checkValidity(f, t.Validity, t.N); err != nil {
			return nil, fmt.Errorf("tile %d: %w", ti, err)
		}
		if f.IsVar() {
			if len(t.Offsets) != 8*t.N || t.N > math.MaxInt/8 {
				return nil, fmt.Errorf("field %q: tile %d: %d offset bytes for %d cells: %w", f.Name, ti, len(t.Offsets), t.N, ErrCorrupt)
			}
		} else if cs := f.CellSize(); t.N > len(t.Data)/cs || len(t.Data) != t.N*cs {
			return nil, fmt.Errorf("field %q: tile %d: %d data bytes for %d cells of %d bytes: %w", f.Name, ti, len(t.Data), t.N, cs, ErrCorrupt)
		}
	}

	var valid []byte
	if nullable {
		valid = make([]byte, n)
		o := 0
		for _, r := range runs {
			v := tiles[r.Tile].Validity
			if v == nil {
				for j := range int(r.Len) {
					valid[o+j] = 1
				}
			} else {
				copy(valid[o:o+int(r.Len)], v[r.Start:r.Start+r.Len])
			}
			o += int(r.Len)
		}
	}
	if f.IsVar() {
		data, aoffs, err := gatherVar(f, tiles, runs, n)
		if err != nil {
			return nil, err
		}
		return build(f, data, aoffs, valid, n, nil)
	}
	return build(f, gatherFixed(f.CellSize(), tiles, runs, n), nil, valid, n, nil)
}

func gatherFixed(cs int, tiles []Tile, runs []Run, n int) []byte {
	out := make([]byte, n*cs)
	o := 0
	for _, r := range runs {
		src := tiles[r.Tile].Data
		s := int(r.Start) * cs
		if r.Len == 1 {
			switch cs {
			case 8:
				binary.LittleEndian.PutUint64(out[o:], binary.LittleEndian.Uint64(src[s:]))
			case 4:
				binary.LittleEndian.PutUint32(out[o:], binary.LittleEndian.Uint32(src[s:]))
			case 2:
				binary.LittleEndian.PutUint16(out[o:], binary.LittleEndian.Uint16(src[s:]))
			case 1:
				out[o] = src[s]
			default:
				copy(out[o:o+cs], src[s:s+cs])
			}
			o += cs
			continue
		}
		l := int(r.Len) * cs
		copy(out[o:o+l], src[s:s+l])
		o += l
	}
	return out
}

func gatherVar(f Field, tiles []Tile, runs []Run, n int) ([]byte, []int64, error) {
	aoffs := make([]int64, n+1)
	var total uint64
	c := 0
	for ri, r := range runs {
		t := &tiles[r.Tile]
		end := int(r.Start + r.Len)
		for k := int(r.Start); k < end; k++ {
			s := binary.LittleEndian.Uint64(t.Offsets[8*k:])
			e := uint64(len(t.Data))
			if k+1 < t.N {
				e = binary.LittleEndian.Uint64(t.Offsets[8*(k+1):])
			}
			if s > e || e > uint64(len(t.Data)) {
				return nil, nil, fmt.Errorf("field %q: run %d: tile %d cell %d: value [%d, %d) of %d data bytes: %w",
					f.Name, ri, r.Tile, k, s, e, len(t.Data), ErrCorrupt)
			}
			total += e - s
			c++
			aoffs[c] = int64(total)
		}
	}
	out := make([]byte, total)
	c = 0
	for _, r := range runs {
		t := &tiles[r.Tile]
		s := binary.LittleEndian.Uint64(t.Offsets[8*r.Start:])
		// Within one run the values are contiguous in the tile: one copy.
		l := aoffs[c+int(r.Len)] - aoffs[c]
		copy(out[aoffs[c]:aoffs[c]+l], t.Data[s:s+uint64(l)])
		c += int(r.Len)
	}
	return out, aoffs, nil
}

// ColumnBuilder assembles one column of a record batch from several tile
// pieces. It keeps references, not copies: Finish wraps a single piece
// without copying (NewColumn) and copies only when there are several.
// To stay zero-copy in global layout, cut record batches at tile boundaries.
type ColumnBuilder struct {
	f     Field
	tiles []Tile
	n     int
}

// NewColumnBuilder returns an empty builder for f.
func NewColumnBuilder(f Field) *ColumnBuilder { return &ColumnBuilder{f: f} }

// Append adds n cells given as NewColumn takes them. The buffers must stay
// unchanged until the array Finish returns is released.
func (b *ColumnBuilder) Append(data, offsets, validity []byte, n int) {
	b.tiles = append(b.tiles, Tile{Data: data, Offsets: offsets, Validity: validity, N: n})
	b.n += n
}

// Len is the number of cells appended since the last Finish.
func (b *ColumnBuilder) Len() int { return b.n }

// Finish returns the column and resets the builder.
func (b *ColumnBuilder) Finish() (arrow.Array, error) {
	tiles := b.tiles
	b.tiles, b.n = nil, 0
	switch len(tiles) {
	case 0:
		return NewColumn(b.f, nil, nil, nil, 0)
	case 1:
		t := tiles[0]
		return NewColumn(b.f, t.Data, t.Offsets, t.Validity, t.N)
	}
	runs := make([]Run, len(tiles))
	for i, t := range tiles {
		if t.N < 0 || t.N > math.MaxUint32 {
			return nil, fmt.Errorf("field %q: piece %d: %d cells: %w", b.f.Name, i, t.N, ErrCorrupt)
		}
		runs[i] = Run{Tile: uint32(i), Len: uint32(t.N)}
	}
	return Gather(b.f, tiles, runs)
}

// FillTile returns a tile of n copies of one cell, e.g. a dense attribute's
// fill value, for Gather to draw from where nothing was written. value is
// the cell's bytes; valid=false makes every cell null (nullable fields).
func FillTile(f Field, value []byte, valid bool, n int) (Tile, error) {
	if n < 0 {
		return Tile{}, fmt.Errorf("field %q: negative fill count: %w", f.Name, ErrCorrupt)
	}
	if !f.IsVar() && len(value) != f.CellSize() {
		return Tile{}, fmt.Errorf("field %q: fill value of %d bytes for %d-byte cells: %w", f.Name, len(value), f.CellSize(), ErrMismatch)
	}
	if !valid && !f.Nullable {
		return Tile{}, fmt.Errorf("field %q: null fill for a non-nullable field: %w", f.Name, ErrMismatch)
	}
	if len(value) > 0 && n > math.MaxInt/len(value)/2 {
		return Tile{}, fmt.Errorf("field %q: fill of %d cells too large: %w", f.Name, n, ErrUnsupported)
	}
	t := Tile{N: n, Data: make([]byte, n*len(value))}
	for i := 0; i < n; i++ {
		copy(t.Data[i*len(value):], value)
	}
	if f.IsVar() {
		t.Offsets = make([]byte, 8*n)
		for i := 0; i < n; i++ {
			binary.LittleEndian.PutUint64(t.Offsets[8*i:], uint64(i*len(value)))
		}
	}
	if f.Nullable {
		t.Validity = make([]byte, n)
		if valid {
			for i := range t.Validity {
				t.Validity[i] = 1
			}
		}
	}
	return t, nil
}
