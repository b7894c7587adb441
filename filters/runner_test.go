package filters

import (
	"bytes"
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/tileflight/tileflight/format/datatype"
	"github.com/tileflight/tileflight/format/pipeline"
	"github.com/tileflight/tileflight/format/wire"
)

func one(ft pipeline.FilterType, level int32, re datatype.Datatype) pipeline.Pipeline {
	c, _ := pipeline.CompressorFor(ft)
	return pipeline.Pipeline{MaxChunkSize: MaxChunkSize, Filters: []pipeline.Filter{{Type: ft, Compressor: c, Level: level, Reinterpret: re}}}
}

func TestVersionRules(t *testing.T) {
	rle, dict := one(pipeline.RLE, -1, datatype.Any), one(pipeline.Dictionary, -1, datatype.Any)
	for _, c := range []struct {
		p        pipeline.Pipeline
		t        datatype.Datatype
		v        uint32
		carries  bool
		chunking bool
	}{
		{rle, datatype.StringASCII, 11, false, true},
		{rle, datatype.StringASCII, 12, true, false},
		{rle, datatype.StringUTF8, 12, false, false}, // no chunking, yet offsets filtered
		{rle, datatype.StringUTF8, 16, false, false},
		{rle, datatype.StringUTF8, 17, true, false},
		{dict, datatype.StringASCII, 12, false, true},
		{dict, datatype.StringASCII, 13, true, false},
		{dict, datatype.StringUTF8, 16, false, false},
		{dict, datatype.StringUTF8, 17, true, false},
		{rle, datatype.Char, 22, false, true},
		{rle, datatype.Int32, 22, false, true},
		{pipeline.Pipeline{MaxChunkSize: 0}, datatype.StringUTF8, 22, false, false},
	} {
		p, err := New(c.p, c.t, 0, c.v, Options{})
		if err != nil {
			t.Fatal(err)
		}
		if p.CarriesOffsets() != c.carries || p.Chunked() != c.chunking {
			t.Errorf("%v %s v%d: carries=%v chunked=%v, want %v %v", c.p.Filters, c.t, c.v, p.CarriesOffsets(), p.Chunked(), c.carries, c.chunking)
		}
	}
}

func TestFixedChunks(t *testing.T) {
	p, _ := New(pipeline.Pipeline{MaxChunkSize: 1}, datatype.Int32, 3, 22, Options{}) // 12-byte cells
	for _, c := range []struct {
		size uint64
		want []uint64
	}{
		{0, []uint64{0}},
		{12, []uint64{0, 12}},
		{65532, []uint64{0, 65532}},
		{65544, []uint64{0, 65532, 65544}},
		{3 * 65532, []uint64{0, 65532, 2 * 65532, 3 * 65532}},
	} {
		if got := p.fixedChunks(c.size); !equalU64(got, c.want) {
			t.Errorf("size %d: %v, want %v", c.size, got, c.want)
		}
	}
}

func TestVarChunks(t *testing.T) {
	const K = MaxChunkSize
	for _, c := range []struct {
		name  string
		cells []uint64
		want  []uint64
	}{
		{"fits", []uint64{10, 20}, []uint64{0, 30}},
		{"under half full: joins", []uint64{K / 2, K}, []uint64{0, K/2 + K, K/2 + K}},
		{"within 150%: joins", []uint64{K/2 + 1, K / 2}, []uint64{0, K + 1, K + 1}},
		// TileDB then ends the tile with an empty chunk.
		{"beyond 150%: new chunk", []uint64{K/2 + 1, K, 5}, []uint64{0, K/2 + 1, K/2 + 1 + K + 5, K/2 + 1 + K + 5}},
		{"big cell alone", []uint64{K/2 + 1, 2 * K, 5}, []uint64{0, K/2 + 1, K/2 + 1 + 2*K, K/2 + 1 + 2*K + 5}},
		{"big last cell", []uint64{K/2 + 1, 2 * K}, []uint64{0, K/2 + 1, K/2 + 1 + 2*K}},
	} {
		p, _ := New(pipeline.Pipeline{MaxChunkSize: K}, datatype.StringUTF8, 0, 22, Options{})
		offs := make([]uint64, len(c.cells))
		size := uint64(0)
		for i, s := range c.cells {
			offs[i] = size
			size += s
		}
		got, err := p.varChunks(size, offs)
		if err != nil || !equalU64(got, c.want) {
			t.Errorf("%s: %v %v, want %v", c.name, got, err, c.want)
		}
	}
}

func equalU64(a, b []uint64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// Every compressor round-trips edge-sized and random data of every width.
func TestRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	type tc struct {
		ft pipeline.FilterType
		l  int32
		re datatype.Datatype
	}
	var pls []tc
	for _, ft := range []pipeline.FilterType{pipeline.Gzip, pipeline.Zstd, pipeline.LZ4, pipeline.Bzip2, pipeline.RLE, pipeline.Delta, pipeline.DoubleDelta} {
		pls = append(pls, tc{ft, -1, datatype.Any})
	}
	pls = append(pls, tc{pipeline.Gzip, 0, datatype.Any}, tc{pipeline.Gzip, 9, datatype.Any}, tc{pipeline.Zstd, 19, datatype.Any},
		tc{pipeline.Zstd, -7, datatype.Any}, tc{pipeline.Bzip2, 9, datatype.Any}, tc{pipeline.DoubleDelta, -1, datatype.Uint8})
	types := []datatype.Datatype{datatype.Int8, datatype.Uint8, datatype.Int16, datatype.Uint16, datatype.Int32, datatype.Uint32, datatype.Int64, datatype.Uint64, datatype.DatetimeNs}
	for _, pc := range pls {
		for _, dt := range types {
			p, err := New(one(pc.ft, pc.l, pc.re), dt, 1, 22, Options{})
			if err != nil {
				t.Fatal(err)
			}
			w := dt.Size()
			for _, n := range []int{0, 1, 2, 3, 17, 70000 / w} {
				for _, kind := range []string{"random", "smooth", "extreme"} {
					if n > 17 && kind != "smooth" {
						continue // multi-chunk: one kind is enough
					}
					data := make([]byte, n*w)
					switch kind {
					case "random":
						for i := range data {
							data[i] = byte(rng.Uint32())
						}
					case "smooth":
						for i := 0; i < n; i++ {
							store(data[i*w:], w, uint64(i*i/7))
						}
					case "extreme":
						for i := 0; i < n; i++ {
							v := uint64(math.MaxInt64)
							if i%3 == 1 {
								v = 1 << 63
							}
							store(data[i*w:], w, v)
						}
					}
					f, err := p.FilterTile(data)
					if err != nil {
						// Double delta refuses deltas beyond int64, as TileDB.
						if pc.ft == pipeline.DoubleDelta && kind != "smooth" && errors.Is(err, ErrUnsupported) {
							continue
						}
						t.Fatalf("%s %s n=%d %s: filter: %v", pc.ft, dt, n, kind, err)
					}
					got, err := p.UnfilterTile(make([]byte, len(data)), f)
					if err != nil || !bytes.Equal(got, data) {
						t.Fatalf("%s/%d %s n=%d %s: round trip: %v", pc.ft, pc.l, dt, n, kind, err)
					}
				}
			}
		}
	}
}

// A checksum failure surfaces as ErrChecksum, and errors name the chunk
// and the filter.
func TestErrors(t *testing.T) {
	c := findCase(t, "bitshuffle_zstd_md5_float32")
	p, err := New(toPipeline(t, c.Filters, c.MaxChunkSize), datatype.Float32, 1, c.Version, Options{})
	if err != nil {
		t.Fatal(err)
	}
	tile := readGz(t, c.Name+".tdb.gz")
	want := readGz(t, c.Name+".out.gz")
	bad := append([]byte(nil), tile...)
	bad[len(bad)-3] ^= 0x40 // last chunk's data: the MD5 of the zstd output no longer matches
	_, err = p.UnfilterTile(make([]byte, len(want)), bad)
	if !errors.Is(err, ErrChecksum) {
		t.Fatalf("want ErrChecksum, got %v", err)
	}
	if !strings.Contains(err.Error(), "chunk 1 of 2") || !strings.Contains(err.Error(), "checksum_md5") {
		t.Fatalf("error does not name the chunk and filter: %v", err)
	}
	// Told the wrong tile size.
	if _, err := p.UnfilterTile(make([]byte, len(want)-4), tile); !errors.Is(err, wire.ErrCorrupt) {
		t.Fatalf("wrong size: %v", err)
	}
	// Truncated.
	if _, err := p.UnfilterTile(make([]byte, len(want)), tile[:len(tile)-1]); !errors.Is(err, wire.ErrTruncated) {
		t.Fatalf("truncated: %v", err)
	}
	// Corrupt zstd data names the filter.
	z := findCase(t, "zstd_int64_multichunk")
	zp, _ := New(toPipeline(t, z.Filters, z.MaxChunkSize), datatype.Int64, 1, z.Version, Options{})
	zt := readGz(t, z.Name+".tdb.gz")
	zt[8+12+16+8+3] ^= 0xFF // first chunk, inside the zstd frame
	_, err = zp.UnfilterTile(make([]byte, 80000), zt)
	if err == nil || !strings.Contains(err.Error(), "chunk 0 of 2") || !strings.Contains(err.Error(), "zstd") || errors.Is(err, ErrChecksum) {
		t.Fatalf("corrupt zstd: %v", err)
	}
	// Unsupported combinations.
	for _, c := range []struct {
		p  pipeline.Pipeline
		dt datatype.Datatype
	}{
		{one(pipeline.Delta, -1, datatype.Any), datatype.Float64},
		{one(pipeline.DoubleDelta, -1, datatype.Float32), datatype.Int64},
		{one(pipeline.DoubleDelta, -1, datatype.Int64), datatype.Int32},
		{one(pipeline.Gzip, 10, datatype.Any), datatype.Int32},
	} {
		if _, err := New(c.p, c.dt, 1, 22, Options{}); !errors.Is(err, ErrUnsupported) {
			t.Errorf("%v on %s: %v", c.p.Filters, c.dt, err)
		}
	}
}

func findCase(t *testing.T, name string) goldenCase {
	for _, c := range loadCases(t) {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("no case %s", name)
	return goldenCase{}
}
