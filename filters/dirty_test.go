package filters

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"

	"github.com/tileflight/tileflight/format/datatype"
	"github.com/tileflight/tileflight/format/pipeline"
	"github.com/tileflight/tileflight/format/wire"
)

// poisonAlloc makes allocDirty return memory filled with b (length and
// capacity both poisoned) and counts its calls, until the returned
// function restores it.
func poisonAlloc(b byte, calls *int) (restore func()) {
	old := allocDirty
	allocDirty = func(n, c int) []byte {
		*calls++
		buf := make([]byte, c)
		for i := range buf {
			buf[i] = b
		}
		return buf[:n]
	}
	return func() { allocDirty = old }
}

// ints is n bytes of int64 cells that compress (a slow ramp with a
// wobble) and whose deltas stay small.
func ints(n int) []byte {
	b := make([]byte, n)
	for i := 0; i+8 <= n; i += 8 {
		k := i / 8
		binary.LittleEndian.PutUint64(b[i:], uint64(k*3+(k*k)%17))
	}
	return b
}

func pipe(fs ...pipeline.FilterType) pipeline.Pipeline {
	p := pipeline.Pipeline{MaxChunkSize: MaxChunkSize}
	for _, ft := range fs {
		c, _ := pipeline.CompressorFor(ft)
		p.Filters = append(p.Filters, pipeline.Filter{Type: ft, Compressor: c, Level: -1, Reinterpret: datatype.Any})
	}
	return p
}

// TestUnfilterOwnedDirty: tiles decoded into unzeroed memory come out
// exactly as written, for every pipeline whose first filter fills its
// output, across chunk boundaries, on the sequential and parallel paths;
// the other pipelines keep zeroed buffers.
func TestUnfilterOwnedDirty(t *testing.T) {
	unchunked := pipe(pipeline.Zstd)
	unchunked.MaxChunkSize = 0
	pipes := []struct {
		name  string
		p     pipeline.Pipeline
		dirty bool
	}{
		{"zstd", pipe(pipeline.Zstd), true},
		{"lz4", pipe(pipeline.LZ4), true},
		{"gzip", pipe(pipeline.Gzip), true},
		{"bzip2", pipe(pipeline.Bzip2), true},
		{"zstd unchunked", unchunked, true},
		{"zstd then md5", pipe(pipeline.Zstd, pipeline.ChecksumMD5), true},
		{"md5 then lz4", pipe(pipeline.ChecksumMD5, pipeline.LZ4), true},
		{"sha256 alone", pipe(pipeline.ChecksumSHA256), true},
		{"byteshuffle then zstd", pipe(pipeline.Byteshuffle, pipeline.Zstd), false},
		{"bitshuffle then lz4", pipe(pipeline.Bitshuffle, pipeline.LZ4), false},
		{"double delta", pipe(pipeline.DoubleDelta), false},
		{"rle", pipe(pipeline.RLE), false},
	}
	// Tile sizes around chunk boundaries (8-byte cells): below and above
	// parallelMin, a partial last chunk, a single cell.
	sizes := []int{8, MaxChunkSize - 8, MaxChunkSize, MaxChunkSize + 8, 3*MaxChunkSize + 24, parallelMin, 5*MaxChunkSize + 16}
	for _, pc := range pipes {
		for _, conc := range []int{1, 0} {
			p, err := New(pc.p, datatype.Int64, 1, 22, Options{Concurrency: conc})
			if err != nil {
				t.Fatal(err)
			}
			if p.fills != pc.dirty {
				t.Fatalf("%s: fills = %v, want %v", pc.name, p.fills, pc.dirty)
			}
			for _, size := range sizes {
				data := ints(size)
				filtered, err := p.FilterTile(data)
				if err != nil {
					t.Fatal(err)
				}
				for _, poison := range []byte{0x00, 0xA5} {
					calls := 0
					restore := poisonAlloc(poison, &calls)
					got, err := p.UnfilterOwned(filtered, uint64(size))
					restore()
					if err != nil {
						t.Fatalf("%s conc %d size %d: %v", pc.name, conc, size, err)
					}
					if !bytes.Equal(got, data) {
						t.Fatalf("%s conc %d size %d poison %#x: tile differs from the one written", pc.name, conc, size, poison)
					}
					if want := map[bool]int{true: 1, false: 0}[pc.dirty]; calls != want {
						t.Fatalf("%s: %d unzeroed allocations, want %d", pc.name, calls, want)
					}
				}
			}
		}
	}
}

// TestUnfilterOwnedDirtyCorrupt: a tile that fails to decode into
// unzeroed memory is an error, never a partly written tile.
func TestUnfilterOwnedDirtyCorrupt(t *testing.T) {
	for _, ft := range []pipeline.FilterType{pipeline.Zstd, pipeline.LZ4, pipeline.Gzip, pipeline.Bzip2} {
		for _, conc := range []int{1, 0} {
			p, err := New(pipe(ft), datatype.Int64, 1, 22, Options{Concurrency: conc})
			if err != nil {
				t.Fatal(err)
			}
			size := 5*MaxChunkSize + 16
			good, err := p.FilterTile(ints(size))
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range []struct {
				name string
				edit func([]byte) []byte
				size int
			}{
				{"truncated", func(b []byte) []byte { return b[:len(b)-3] }, size},
				{"payload flipped", func(b []byte) []byte { b[len(b)/2] ^= 0x5A; b[len(b)/2+1] ^= 0xFF; return b }, size},
				{"tile larger than its chunks", func(b []byte) []byte { return b }, size + 8},
			} {
				calls := 0
				restore := poisonAlloc(0xA5, &calls)
				got, err := p.UnfilterOwned(c.edit(append([]byte(nil), good...)), uint64(c.size))
				restore()
				if err == nil {
					// A flipped payload byte may still decode (lz4 has no
					// checksum): then it must be fully written.
					if bytes.Contains(got, bytes.Repeat([]byte{0xA5}, 64)) {
						t.Fatalf("%s conc %d %s: decoded tile holds unwritten memory", ft, conc, c.name)
					}
					continue
				}
				if got != nil {
					t.Fatalf("%s conc %d %s: error %v with a tile", ft, conc, c.name, err)
				}
				if !errorsIsCorrupt(err) {
					t.Fatalf("%s conc %d %s: %v, want a corrupt or truncated tile", ft, conc, c.name, err)
				}
			}
		}
	}
}

func errorsIsCorrupt(err error) bool {
	return errors.Is(err, wire.ErrCorrupt) || errors.Is(err, wire.ErrTruncated) || errors.Is(err, ErrChecksum)
}

// dirtyFuzzPipes are the pipelines FuzzUnfilterOwnedDirty picks from: the
// ones decoded into unzeroed memory.
var dirtyFuzzPipes = []pipeline.Pipeline{
	pipe(pipeline.Zstd), pipe(pipeline.LZ4), pipe(pipeline.Gzip), pipe(pipeline.Bzip2),
	pipe(pipeline.Zstd, pipeline.ChecksumMD5), pipe(pipeline.ChecksumSHA256), pipe(),
}

// FuzzUnfilterOwnedDirty: whatever the input, a tile decoded into memory
// poisoned with 0x00 and one decoded into memory poisoned with 0xFF are
// the same (or both fail): no byte the decoders did not write escapes.
func FuzzUnfilterOwnedDirty(f *testing.F) {
	for i, pl := range dirtyFuzzPipes {
		p, err := New(pl, datatype.Int64, 1, 22, Options{})
		if err != nil {
			f.Fatal(err)
		}
		for _, n := range []int{0, 8, MaxChunkSize + 8, 5 * MaxChunkSize} {
			b, err := p.FilterTile(ints(n))
			if err != nil {
				f.Fatal(err)
			}
			if len(b) <= maxSeed {
				f.Add(b, uint32(n), uint8(i), false)
			}
		}
	}
	f.Fuzz(func(t *testing.T, filtered []byte, size uint32, pi uint8, seqOnly bool) {
		size %= maxFuzzTile
		conc := 0
		if seqOnly {
			conc = 1
		}
		p, err := New(dirtyFuzzPipes[int(pi)%len(dirtyFuzzPipes)], datatype.Int64, 1, 22, Options{Concurrency: conc})
		if err != nil {
			t.Fatal(err)
		}
		var res [2][]byte
		var errs [2]error
		for k, poison := range []byte{0x00, 0xFF} {
			calls := 0
			restore := poisonAlloc(poison, &calls)
			res[k], errs[k] = p.UnfilterOwned(append([]byte(nil), filtered...), uint64(size))
			restore()
		}
		if (errs[0] == nil) != (errs[1] == nil) {
			t.Fatalf("poison 0x00: %v; poison 0xFF: %v", errs[0], errs[1])
		}
		if errs[0] == nil && !bytes.Equal(res[0], res[1]) {
			t.Fatal("the tile depends on the memory it was decoded into")
		}
	})
}

// strs returns n var-sized cells (lengths 0..12, some runs of repeats)
// as start offsets and values.
func strs(n int) ([]uint64, []byte) {
	offs := make([]uint64, n)
	var vals []byte
	for i := 0; i < n; i++ {
		offs[i] = uint64(len(vals))
		k := (i / 3) % 13
		for j := 0; j < k; j++ {
			vals = append(vals, byte('a'+(i/3+j)%26))
		}
	}
	return offs, vals
}

// TestUnfilterVarOwnedDirty: var-sized tile pairs decoded into unzeroed
// buffers equal the cells written, for values and offsets pipelines that
// fill their output and for string RLE/dictionary (offsets carried in the
// values, values decoded into zeroed memory).
func TestUnfilterVarOwnedDirty(t *testing.T) {
	for _, c := range []struct {
		name             string
		values, offsets  pipeline.Pipeline
		dirtyV, dirtyOff bool
	}{
		{"zstd, offsets zstd", pipe(pipeline.Zstd), pipe(pipeline.Zstd), true, true},
		{"lz4, offsets double delta", pipe(pipeline.LZ4), pipe(pipeline.DoubleDelta), true, false},
		{"none, offsets none", pipe(), pipe(), true, true},
		{"byteshuffle zstd, offsets gzip", pipe(pipeline.Byteshuffle, pipeline.Zstd), pipe(pipeline.Gzip), false, true},
		{"rle strings", pipe(pipeline.RLE), pipe(pipeline.Zstd), false, true},
		{"dictionary strings", pipe(pipeline.Dictionary, pipeline.Zstd), pipe(pipeline.LZ4), false, true},
	} {
		for _, cells := range []int{1, 100, 20000, 70000} {
			p, err := New(c.values, datatype.StringASCII, 0, 22, Options{})
			if err != nil {
				t.Fatal(err)
			}
			off, err := New(c.offsets, datatype.Uint64, 1, 22, Options{IsOffsets: true})
			if err != nil {
				t.Fatal(err)
			}
			offs, vals := strs(cells)
			fo, fv, err := p.FilterVarTile(off, offs, vals)
			if err != nil {
				t.Fatal(err)
			}
			for _, poison := range []byte{0x00, 0xA5} {
				calls := 0
				restore := poisonAlloc(poison, &calls)
				gotOffs, gotVals, err := p.UnfilterVarOwned(off, fo, fv, uint64(8*(cells+1)), uint64(len(vals)))
				restore()
				if err != nil {
					t.Fatalf("%s, %d cells: %v", c.name, cells, err)
				}
				if !bytes.Equal(gotVals, vals) {
					t.Fatalf("%s, %d cells, poison %#x: values differ", c.name, cells, poison)
				}
				for i := 0; i <= cells; i++ {
					want := uint64(len(vals))
					if i < cells {
						want = offs[i]
					}
					if got := binary.LittleEndian.Uint64(gotOffs[8*i:]); got != want {
						t.Fatalf("%s, %d cells, poison %#x: offset %d = %d, want %d", c.name, cells, poison, i, got, want)
					}
				}
				want := 0
				if c.dirtyV {
					want++
				}
				if c.dirtyOff {
					want++
				}
				if calls != want {
					t.Fatalf("%s: %d unzeroed buffers, want %d", c.name, calls, want)
				}
			}
		}
	}
}

// TestGoldenDirty: every tile TileDB wrote (testdata) decodes through the
// owned paths into memory poisoned two ways, and equals TileDB's cells,
// in order and in parallel.
func TestGoldenDirty(t *testing.T) {
	dirtyCases := 0
	defer func() {
		if !t.Failed() && dirtyCases == 0 {
			t.Fatal("no golden tile decoded into unzeroed memory")
		}
	}()
	for _, c := range loadCases(t) {
		t.Run(c.Name, func(t *testing.T) {
			dt, err := datatype.Parse(c.Type)
			if err != nil {
				t.Fatal(err)
			}
			pl := toPipeline(t, c.Filters, c.MaxChunkSize)
			tdb := readGz(t, c.Name+".tdb.gz")
			want := readGz(t, c.Name+".out.gz")
			for _, conc := range []int{1, 0} {
				for _, poison := range []byte{0x00, 0xA5} {
					calls := 0
					restore := poisonAlloc(poison, &calls)
					if !c.isVar() {
						p, err := New(pl, dt, 1, c.Version, Options{Concurrency: conc})
						if err != nil {
							restore()
							t.Fatal(err)
						}
						got, err := p.UnfilterOwned(append([]byte(nil), tdb...), uint64(len(want)))
						restore()
						if err != nil || !bytes.Equal(got, want) {
							t.Fatalf("conc %d poison %#x: %v, or cells differ from TileDB's", conc, poison, err)
						}
						if wantCalls := map[bool]int{true: 1}[p.fills && len(p.stages) > 0]; calls != wantCalls {
							t.Fatalf("%d unzeroed allocations, want %d", calls, wantCalls)
						}
						dirtyCases += calls
						continue
					}
					off, err := New(toPipeline(t, c.OffsetsFilters, c.MaxChunkSize), datatype.Uint64, 1, c.Version, Options{IsOffsets: true, Concurrency: conc})
					if err != nil {
						restore()
						t.Fatal(err)
					}
					p, err := New(pl, dt, 0, c.Version, Options{Concurrency: conc})
					if err != nil {
						restore()
						t.Fatal(err)
					}
					wantOffs := readGz(t, c.Name+".offs.gz")
					offs, vals, err := p.UnfilterVarOwned(off, tdb, readGz(t, c.Name+".var.gz"), uint64(len(wantOffs)+8), uint64(len(want)))
					restore()
					if err != nil || !bytes.Equal(vals, want) || !bytes.Equal(offs[:len(wantOffs)], wantOffs) ||
						binary.LittleEndian.Uint64(offs[len(wantOffs):]) != uint64(len(want)) {
						t.Fatalf("conc %d poison %#x: %v, or cells differ from TileDB's", conc, poison, err)
					}
				}
			}
		})
	}
}
