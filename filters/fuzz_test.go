package filters

import (
	"bytes"
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tileflight/tileflight/format/datatype"
	"github.com/tileflight/tileflight/format/pipeline"
	"github.com/tileflight/tileflight/format/wire"
)

// fuzzTypes are the datatypes the fuzz targets pick from.
var fuzzTypes = []datatype.Datatype{
	datatype.Int8, datatype.Uint8, datatype.Int16, datatype.Uint16, datatype.Int32,
	datatype.Uint32, datatype.Int64, datatype.Uint64, datatype.Float32, datatype.Float64,
	datatype.DatetimeMs, datatype.StringASCII, datatype.StringUTF8, datatype.Char,
}

// maxFuzzTile bounds the unfiltered size the fuzz targets claim, as a
// reader bounds it by the fragment metadata.
const maxFuzzTile = 1 << 20

// maxSeed keeps large tiles out of the corpus: the fuzzer minimizes every
// new interesting input, which takes most of a run for 100 kB inputs.
const maxSeed = 16 << 10

// seedGolden adds the TileDB-written tiles whose case name starts with
// prefix to the corpus.
func seedGolden(f *testing.F, prefix string) {
	for _, c := range loadCases(f) {
		if !strings.HasPrefix(c.Name, prefix) {
			continue
		}
		ti := fuzzTypeIndex(c.Type)
		want := readGz(f, c.Name+".out.gz")
		if c.isVar() {
			if _, err := os.Stat(filepath.Join("testdata", c.Name+".var.gz")); err == nil {
				if v := readGz(f, c.Name+".var.gz"); len(v) <= maxSeed {
					f.Add(v, uint32(len(want)), ti, uint16(c.N))
				}
			}
			continue
		}
		if tile := readGz(f, c.Name+".tdb.gz"); len(tile) <= maxSeed {
			f.Add(tile, uint32(len(want)), ti, uint16(c.N))
		}
	}
}

// fuzzTypeIndex is the index in fuzzTypes of the datatype TileDB names
// name, or 0 when it is not one of them.
func fuzzTypeIndex(name string) uint8 {
	dt, _ := datatype.Parse(name)
	ti := uint8(0)
	for i, t := range fuzzTypes {
		if t == dt {
			ti = uint8(i)
		}
	}
	return ti
}

// fuzzFilter runs a fuzz target for the single filter ft, seeded with the
// TileDB-written tiles whose case name starts with prefix.
func fuzzFilter(f *testing.F, prefix string, ft pipeline.FilterType) {
	seedGolden(f, prefix)
	f.Fuzz(func(t *testing.T, tile []byte, size uint32, ti uint8, cells uint16) {
		fuzzOne(t, ft, tile, size, ti, cells)
	})
}

func fuzzOne(t *testing.T, ft pipeline.FilterType, tile []byte, size uint32, ti uint8, cells uint16) {
	size %= maxFuzzTile
	dt := fuzzTypes[int(ti)%len(fuzzTypes)]
	comp, _ := pipeline.CompressorFor(ft)
	pl := pipeline.Pipeline{MaxChunkSize: MaxChunkSize, Filters: []pipeline.Filter{{Type: ft, Compressor: comp, Level: -1, Reinterpret: datatype.Any}}}
	runPipeline(t, pl, dt, tile, size, cells)
}

// runPipeline unfilters tile as a fixed tile and as a var values tile; it
// may fail but must not panic, and must return exactly what it was told.
func runPipeline(t *testing.T, pl pipeline.Pipeline, dt datatype.Datatype, tile []byte, size uint32, cells uint16) {
	for _, cvn := range []uint32{1, 0} {
		p, err := New(pl, dt, cvn, 22, Options{Concurrency: 1})
		if err != nil {
			continue
		}
		if cvn == 1 {
			out, err := p.UnfilterTile(make([]byte, size), tile)
			if err == nil && len(out) != int(size) {
				t.Fatalf("unfiltered %d bytes, asked %d", len(out), size)
			}
			// Into unzeroed memory (two poisons): the same tile or error.
			for _, poison := range []byte{0x00, 0xFF} {
				calls := 0
				restore := poisonAlloc(poison, &calls)
				owned, oerr := p.UnfilterOwned(append([]byte(nil), tile...), uint64(size))
				restore()
				if (err == nil) != (oerr == nil) || (err == nil && !bytes.Equal(out, owned)) {
					t.Fatalf("poison %#x: UnfilterOwned (%v) differs from UnfilterTile (%v)", poison, oerr, err)
				}
			}
			continue
		}
		off, err := New(pipeline.Pipeline{MaxChunkSize: MaxChunkSize}, datatype.Uint64, 1, 22, Options{IsOffsets: true})
		if err != nil {
			t.Fatal(err)
		}
		offTile := wire.NewWriter(nil)
		offTile.Uint64(1)
		offTile.Uint32(8 * uint32(cells))
		offTile.Uint32(8 * uint32(cells))
		offTile.Uint32(0)
		for i := 0; i < int(cells); i++ {
			offTile.Uint64(uint64(i))
		}
		offs, vals, err := p.UnfilterVarTile(off, offTile.Bytes(), tile, make([]byte, 8*(int(cells)+1)), make([]byte, size))
		for _, poison := range []byte{0x00, 0xFF} {
			calls := 0
			restore := poisonAlloc(poison, &calls)
			oo, ov, oerr := p.UnfilterVarOwned(off, offTile.Bytes(), tile, 8*(uint64(cells)+1), uint64(size))
			restore()
			if (err == nil) != (oerr == nil) || (err == nil && (!bytes.Equal(offs, oo) || !bytes.Equal(vals, ov))) {
				t.Fatalf("poison %#x: UnfilterVarOwned (%v) differs from UnfilterVarTile (%v)", poison, oerr, err)
			}
		}
		if err != nil {
			continue
		}
		prev := uint64(0)
		for i := 0; i <= int(cells); i++ {
			o := binary.LittleEndian.Uint64(offs[8*i:])
			if o < prev || o > uint64(len(vals)) {
				t.Fatalf("offset %d of cell %d out of order or range", o, i)
			}
			prev = o
		}
	}
}

func FuzzUnfilterGzip(f *testing.F) { fuzzFilter(f, "gzip_", pipeline.Gzip) }

func FuzzUnfilterZstd(f *testing.F) { fuzzFilter(f, "zstd_", pipeline.Zstd) }

func FuzzUnfilterLZ4(f *testing.F) { fuzzFilter(f, "lz4_", pipeline.LZ4) }

func FuzzUnfilterBzip2(f *testing.F) { fuzzFilter(f, "bzip2_", pipeline.Bzip2) }

func FuzzUnfilterRLE(f *testing.F) { fuzzFilter(f, "rle_", pipeline.RLE) }

func FuzzUnfilterDictionary(f *testing.F) { fuzzFilter(f, "dictionary_", pipeline.Dictionary) }

func FuzzUnfilterDelta(f *testing.F) { fuzzFilter(f, "delta_", pipeline.Delta) }

func FuzzUnfilterDoubleDelta(f *testing.F) { fuzzFilter(f, "double_delta_", pipeline.DoubleDelta) }

// FuzzUnfilterPipeline takes the serialized pipeline from the input too,
// so any filter combination (including package codecs') is exercised.
func FuzzUnfilterPipeline(f *testing.F) {
	for _, c := range loadCases(f) {
		w := wire.NewWriter(nil)
		pipeline.Encode(w, toPipeline(f, c.Filters, c.MaxChunkSize), 22)
		want := readGz(f, c.Name+".out.gz")
		tile := readGz(f, c.Name+".tdb.gz")
		if c.isVar() {
			tile = readGz(f, c.Name+".var.gz")
		}
		if len(tile) > maxSeed {
			continue
		}
		ti := fuzzTypeIndex(c.Type)
		f.Add(w.Bytes(), tile, uint32(len(want)), ti, uint16(c.N))
	}
	f.Fuzz(func(t *testing.T, pb, tile []byte, size uint32, ti uint8, cells uint16) {
		pl, err := pipeline.Decode(wire.NewReader(pb), 22)
		if err != nil {
			return
		}
		runPipeline(t, pl, fuzzTypes[int(ti)%len(fuzzTypes)], tile, size%maxFuzzTile, cells)
	})
}
