package arrowconv

import (
	"encoding/binary"
	"testing"

	dt "github.com/tileflight/tileflight/format/datatype"
)

const benchCells = 1 << 20

// report gives ns per cell, the figure the design's targets are stated in.
func report(b *testing.B) {
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/benchCells, "ns/cell")
}

func BenchmarkVarOffsets(b *testing.B) {
	offs := make([]byte, 8*benchCells)
	for i := 0; i < benchCells; i++ {
		binary.LittleEndian.PutUint64(offs[8*i:], uint64(3*i))
	}
	data := make([]byte, 3*benchCells)
	f := fld("s", dt.StringUTF8, VarNum)
	b.SetBytes(int64(len(offs)))
	for b.Loop() {
		if _, err := NewColumn(f, data, offs, nil, benchCells); err != nil {
			b.Fatal(err)
		}
	}
	report(b)
}

func BenchmarkValidity(b *testing.B) {
	v := make([]byte, benchCells)
	for i := range v {
		v[i] = byte(i % 3 & 1)
	}
	f := nullable(fld("a", dt.Int8, 1))
	data := make([]byte, benchCells)
	for b.Loop() {
		if _, err := NewColumn(f, data, nil, v, benchCells); err != nil {
			b.Fatal(err)
		}
	}
	report(b)
}

func BenchmarkBool(b *testing.B) {
	data := make([]byte, benchCells)
	for i := range data {
		data[i] = byte(i % 5 & 1)
	}
	f := fld("b", dt.Bool, 1)
	for b.Loop() {
		if _, err := NewColumn(f, data, nil, nil, benchCells); err != nil {
			b.Fatal(err)
		}
	}
	report(b)
}

func BenchmarkWrapFixed(b *testing.B) {
	data := make([]byte, 8*benchCells)
	f := fld("a", dt.Float64, 1)
	for b.Loop() {
		if _, err := NewColumn(f, data, nil, nil, benchCells); err != nil {
			b.Fatal(err)
		}
	}
	report(b)
}

// BenchmarkGatherCells: single-cell runs (e.g. col-major output over
// row-major tiles) of float64 from 16 tiles.
func BenchmarkGatherCells(b *testing.B) {
	const tilesN = 16
	tiles := make([]Tile, tilesN)
	for i := range tiles {
		tiles[i] = Tile{Data: make([]byte, 8*benchCells/tilesN), N: benchCells / tilesN}
	}
	runs := make([]Run, benchCells)
	for i := range runs {
		runs[i] = Run{Tile: uint32(i % tilesN), Start: uint32((i * 7919) % (benchCells / tilesN)), Len: 1}
	}
	f := fld("a", dt.Float64, 1)
	for b.Loop() {
		if _, err := Gather(f, tiles, runs); err != nil {
			b.Fatal(err)
		}
	}
	report(b)
}

// BenchmarkGatherRuns: row-major output over 2-D tiles, runs of 64 cells.
func BenchmarkGatherRuns(b *testing.B) {
	const tilesN = 16
	tiles := make([]Tile, tilesN)
	for i := range tiles {
		tiles[i] = Tile{Data: make([]byte, 8*benchCells/tilesN), N: benchCells / tilesN}
	}
	runs := make([]Run, benchCells/64)
	for i := range runs {
		runs[i] = Run{Tile: uint32(i % tilesN), Start: uint32((i / tilesN) * 64), Len: 64}
	}
	f := fld("a", dt.Float64, 1)
	for b.Loop() {
		if _, err := Gather(f, tiles, runs); err != nil {
			b.Fatal(err)
		}
	}
	report(b)
}

func BenchmarkGatherVar(b *testing.B) {
	offs := make([]byte, 8*benchCells)
	for i := 0; i < benchCells; i++ {
		binary.LittleEndian.PutUint64(offs[8*i:], uint64(5*i))
	}
	tiles := []Tile{{Data: make([]byte, 5*benchCells), Offsets: offs, N: benchCells}}
	runs := make([]Run, benchCells)
	for i := range runs {
		runs[i] = Run{Start: uint32((i * 7919) % benchCells), Len: 1}
	}
	f := fld("s", dt.StringUTF8, VarNum)
	for b.Loop() {
		if _, err := Gather(f, tiles, runs); err != nil {
			b.Fatal(err)
		}
	}
	report(b)
}
