package main

import (
	"context"
	"encoding/binary"
	"fmt"
	"github.com/tileflight/tileflight/b2nd"
	"github.com/tileflight/tileflight/b2nd/chunk"
	"math"

	"github.com/rs/zerolog"

	"github.com/tileflight/tileflight/format/schema"
	"github.com/tileflight/tileflight/storage"
	"github.com/tileflight/tileflight/writer"
)

// The demo arrays: a dense 1000x1000 float64 field with 100x100 tiles and a
// sparse point set with a string attribute.
const (
	demoDenseSchema = `{"type": "dense", "tile_order": "row-major", "cell_order": "row-major",
 "dimensions": [{"name": "x", "type": "int64", "domain": [0, 999], "tile": 100},
                {"name": "y", "type": "int64", "domain": [0, 999], "tile": 100}],
 "attributes": [{"name": "v", "type": "float64", "filters": [{"name": "zstd", "level": 3}]}]}`
	demoPointsSchema = `{"type": "sparse", "tile_order": "row-major", "cell_order": "row-major", "capacity": 1000,
 "dimensions": [{"name": "x", "type": "float64", "domain": [0, 1000], "tile": 100},
                {"name": "y", "type": "float64", "domain": [0, 1000], "tile": 100}],
 "attributes": [{"name": "name", "type": "string_utf8", "cell_val_num": "var", "filters": [{"name": "zstd", "level": 3}]},
                {"name": "value", "type": "int32", "filters": [{"name": "zstd", "level": 3}]}]}`
	demoSide   = 1000
	demoPoints = 5000
)

// demoValue is the dense demo's formula: a smooth field that is easy to
// check by hand (v(0, 0) = 20).
func demoValue(x, y int) float64 {
	return 20 + 10*math.Sin(float64(x)/100)*math.Cos(float64(y)/100)
}

// createDemoArrays writes demo/dense and demo/points into an empty data
// directory; a directory that holds anything is left alone.
func createDemoArrays(ctx context.Context, store storage.Store, log zerolog.Logger) error {
	entries, err := store.List(ctx, "")
	if err != nil {
		return err
	}
	if len(entries) > 0 {
		log.Info().Msg("-demo: the data directory is not empty; no demo arrays written")
		return nil
	}
	if err := createDemoDense(ctx, store); err != nil {
		return fmt.Errorf("demo/dense: %w", err)
	}
	if err := createDemoPoints(ctx, store); err != nil {
		return fmt.Errorf("demo/points: %w", err)
	}
	if err := createDemoB2ND(ctx, store); err != nil {
		return fmt.Errorf("demo/field.b2nd: %w", err)
	}
	log.Info().Strs("arrays", []string{"demo/dense", "demo/points", "demo/field.b2nd"}).Msg("-demo: demo arrays written")
	return nil
}

func createDemoDense(ctx context.Context, store storage.Store) error {
	s, err := schema.FromJSON([]byte(demoDenseSchema))
	if err != nil {
		return err
	}
	if err := writer.CreateArray(ctx, store, "demo/dense", s); err != nil {
		return err
	}
	data := make([]byte, 0, demoSide*demoSide*8)
	for x := 0; x < demoSide; x++ {
		for y := 0; y < demoSide; y++ {
			data = binary.LittleEndian.AppendUint64(data, math.Float64bits(demoValue(x, y)))
		}
	}
	_, err = writer.WriteDense(ctx, store, "demo/dense", s, [][2]int64{{0, demoSide - 1}, {0, demoSide - 1}},
		schema.RowMajor, map[string]writer.Column{"v": {Data: data}}, writer.Options{})
	return err
}

func createDemoPoints(ctx context.Context, store storage.Store) error {
	s, err := schema.FromJSON([]byte(demoPointsSchema))
	if err != nil {
		return err
	}
	if err := writer.CreateArray(ctx, store, "demo/points", s); err != nil {
		return err
	}
	var xs, ys, names, offs, vals []byte
	// A fixed linear congruential sequence: the same points on every start.
	seed := uint64(42)
	next := func() float64 {
		seed = seed*6364136223846793005 + 1442695040888963407
		return float64(seed>>11) / (1 << 53) * 1000
	}
	for i := 0; i < demoPoints; i++ {
		xs = binary.LittleEndian.AppendUint64(xs, math.Float64bits(next()))
		ys = binary.LittleEndian.AppendUint64(ys, math.Float64bits(next()))
		offs = binary.LittleEndian.AppendUint64(offs, uint64(len(names)))
		names = fmt.Appendf(names, "point-%04d", i)
		vals = binary.LittleEndian.AppendUint32(vals, uint32(int32(i%100)))
	}
	_, err = writer.WriteSparse(ctx, store, "demo/points", s, map[string]writer.Column{
		"x": {Data: xs}, "y": {Data: ys}, "name": {Data: names, Offsets: offs}, "value": {Data: vals},
	}, writer.Options{})
	return err
}

// createDemoB2ND writes demo/field.b2nd: the dense demo's field as a Blosc2
// NDArray (python-blosc2's defaults: zstd clevel 5, shuffle, a contiguous
// frame), chunks of 250x250 in blocks of 50x250.
func createDemoB2ND(ctx context.Context, store storage.Store) error {
	a, err := b2nd.Create(ctx, store, "demo/field.b2nd", b2nd.CreateOptions{
		Shape: []int64{demoSide, demoSide}, Chunks: []int64{250, 250}, Blocks: []int64{50, 250},
		Dtype: "<f8", Codec: chunk.CodecZstd, CLevel: 5, Filters: [6]uint8{5: chunk.FilterShuffle}})
	if err != nil {
		return err
	}
	data := make([]byte, 0, demoSide*demoSide*8)
	for x := 0; x < demoSide; x++ {
		for y := 0; y < demoSide; y++ {
			data = binary.LittleEndian.AppendUint64(data, math.Float64bits(demoValue(x, y)))
		}
	}
	if err := a.Write(ctx, b2nd.Box{Lo: []int64{0, 0}, Hi: []int64{demoSide - 1, demoSide - 1}}, data); err != nil {
		return err
	}
	a, err = b2nd.Open(ctx, store, "demo/field.b2nd")
	if err != nil {
		return err
	}
	return a.SetVLMeta(ctx, map[string][]byte{"description": append([]byte{0xd9, byte(len(demoB2NDNote))}, demoB2NDNote...)})
}

const demoB2NDNote = "v = 20 + 10 sin(x/100) cos(y/100), as demo/dense"
