package filters

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"

	"github.com/tileflight/tileflight/format/datatype"
	"github.com/tileflight/tileflight/format/pipeline"
)

const benchTile = 1 << 20

// benchData is 1 MiB of int64 (a random walk with runs) or float64 (a
// random walk of noisy measurements), the kinds of data tiles hold.
func benchData(dt datatype.Datatype) []byte {
	rng := rand.New(rand.NewPCG(7, 8))
	b := make([]byte, benchTile)
	v, f := int64(1000), 20.0
	for i := 0; i < benchTile; i += 8 {
		if dt == datatype.Float64 {
			f += rng.NormFloat64() * 0.1
			binary.LittleEndian.PutUint64(b[i:], math.Float64bits(math.Round(f*100)/100))
			continue
		}
		if rng.IntN(3) > 0 {
			v += int64(rng.IntN(7)) - 3
		}
		binary.LittleEndian.PutUint64(b[i:], uint64(v))
	}
	return b
}

func BenchmarkUnfilter(b *testing.B) {
	for _, dt := range []datatype.Datatype{datatype.Int64, datatype.Float64} {
		data := benchData(dt)
		for _, ft := range []pipeline.FilterType{pipeline.Gzip, pipeline.Zstd, pipeline.LZ4, pipeline.Bzip2, pipeline.RLE, pipeline.Delta, pipeline.DoubleDelta} {
			re := datatype.Any
			if dt == datatype.Float64 && (ft == pipeline.Delta || ft == pipeline.DoubleDelta) {
				re = datatype.Int64 // TileDB refuses floats without a reinterpret type
			}
			for _, conc := range []int{1, 0} {
				name := dt.String() + "/" + ft.String()
				if conc == 0 {
					name += "/parallel"
				}
				b.Run(name, func(b *testing.B) {
					p, err := New(one(ft, -1, re), dt, 1, 22, Options{Concurrency: conc})
					if err != nil {
						b.Fatal(err)
					}
					tile, err := p.FilterTile(data)
					if err != nil {
						b.Fatal(err)
					}
					dst := make([]byte, len(data))
					b.SetBytes(int64(len(data)))
					b.ReportMetric(float64(len(data))/float64(len(tile)), "ratio")
					for b.Loop() {
						if _, err := p.UnfilterTile(dst, tile); err != nil {
							b.Fatal(err)
						}
					}
				})
			}
		}
	}
}

// The bare libraries on the same 64 KiB chunks, for comparison with the
// runner (sequential) above. For zstd, "exact" decodes each chunk into a
// slice capped at its end (copy loops that never write past it: what the
// parallel runner does) and "slack" leaves room past it (16-byte copy
// loops that may overrun: the sequential runner). Neither wins everywhere:
// on this project's AMD EPYC (Zen 4) the overrunning loops are ~25%
// faster on the noisy float64 walk and ~25% slower on "grid", float64
// r*8192+c, the shape of `make bench`'s dense arrays (short, frequent
// matches at offset 8), and even on int64.
func BenchmarkBareZstd(b *testing.B) {
	for _, kind := range []string{"int64", "float64", "grid"} {
		var data []byte
		switch kind {
		case "int64":
			data = benchData(datatype.Int64)
		case "float64":
			data = benchData(datatype.Float64)
		default:
			data = make([]byte, benchTile)
			for i := 0; i < benchTile; i += 8 {
				binary.LittleEndian.PutUint64(data[i:], math.Float64bits(float64(1<<20+i/8)))
			}
		}
		enc, _ := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithEncoderCRC(false))
		dec, _ := zstd.NewReader(nil, zstd.WithDecoderConcurrency(0))
		var frames [][]byte
		for i := 0; i < len(data); i += MaxChunkSize {
			frames = append(frames, enc.EncodeAll(data[i:i+MaxChunkSize], nil))
		}
		for _, slack := range []int{0, decodeSlack} {
			name := kind + "/exact"
			if slack > 0 {
				name = kind + "/slack"
			}
			b.Run(name, func(b *testing.B) {
				dst := make([]byte, len(data)+slack)
				b.SetBytes(int64(len(data)))
				for b.Loop() {
					for i, f := range frames {
						o := i * MaxChunkSize
						if _, err := dec.DecodeAll(f, dst[o:o:o+MaxChunkSize+slack]); err != nil {
							b.Fatal(err)
						}
					}
				}
			})
		}
	}
}

// BenchmarkUnfilterOwned is a 16 MiB zstd-1 tile of "grid" float64 (one
// tile of `make bench`'s dense_zstd array) unfiltered into a new buffer,
// as a read loads it: "zeroed" allocates as make does, "unzeroed" as the
// runner does for pipelines whose first filter fills its output.
func BenchmarkUnfilterOwned(b *testing.B) {
	const size = 16 << 20
	data := make([]byte, size)
	for i := 0; i < size; i += 8 {
		binary.LittleEndian.PutUint64(data[i:], math.Float64bits(float64(1<<24+i/8)))
	}
	p, err := New(one(pipeline.Zstd, 1, datatype.Any), datatype.Float64, 1, 22, Options{})
	if err != nil {
		b.Fatal(err)
	}
	tile, err := p.FilterTile(data)
	if err != nil {
		b.Fatal(err)
	}
	for _, zeroed := range []bool{true, false} {
		name := "unzeroed"
		if zeroed {
			name = "zeroed"
		}
		b.Run(name, func(b *testing.B) {
			if zeroed {
				old := allocDirty
				allocDirty = func(n, c int) []byte { return make([]byte, n, c) }
				defer func() { allocDirty = old }()
			}
			b.SetBytes(size)
			b.ReportAllocs()
			for b.Loop() {
				if _, err := p.UnfilterOwned(tile, size); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkBareLZ4(b *testing.B) {
	for _, dt := range []datatype.Datatype{datatype.Int64, datatype.Float64} {
		b.Run(dt.String(), func(b *testing.B) {
			data := benchData(dt)
			var c lz4.CompressorCCompat
			var blocks [][]byte
			for i := 0; i < len(data); i += MaxChunkSize {
				buf := make([]byte, lz4.CompressBlockBound(MaxChunkSize))
				n, _ := c.CompressBlock(data[i:i+MaxChunkSize], buf)
				blocks = append(blocks, buf[:n])
			}
			dst := make([]byte, len(data))
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				for i, blk := range blocks {
					if _, err := lz4.UncompressBlock(blk, dst[i*MaxChunkSize:(i+1)*MaxChunkSize]); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}

func BenchmarkFilter(b *testing.B) {
	data := benchData(datatype.Int64)
	for _, ft := range []pipeline.FilterType{pipeline.Gzip, pipeline.Zstd, pipeline.LZ4, pipeline.Bzip2, pipeline.RLE, pipeline.Delta, pipeline.DoubleDelta} {
		b.Run(ft.String(), func(b *testing.B) {
			p, err := New(one(ft, -1, datatype.Any), datatype.Int64, 1, 22, Options{Concurrency: 1})
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				if _, err := p.FilterTile(data); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
