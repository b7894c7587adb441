package filters

import (
	"bytes"
	"errors"
	"testing"
	"unsafe"

	"github.com/tileflight/tileflight/format/datatype"
	"github.com/tileflight/tileflight/format/pipeline"
	"github.com/tileflight/tileflight/format/wire"
)

func seq(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7 + i/251)
	}
	return b
}

func TestUnfilterOwned(t *testing.T) {
	plain := pipeline.Pipeline{MaxChunkSize: MaxChunkSize}
	unchunked := pipeline.Pipeline{}
	zstd := one(pipeline.Zstd, 1, datatype.Any)
	for _, c := range []struct {
		name    string
		p       pipeline.Pipeline
		size    int
		aliased bool // the result shares filtered's memory
	}{
		{"empty", plain, 0, false},
		{"one chunk", plain, 1000, true},
		{"unchunked 1 MiB", unchunked, 1 << 20, true},
		{"16 chunks", plain, 1 << 20, true},
		{"partial last chunk", plain, 3*MaxChunkSize + 40, true},
		{"zstd", zstd, 3*MaxChunkSize + 40, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			p, err := New(c.p, datatype.Float64, 1, 22, Options{})
			if err != nil {
				t.Fatal(err)
			}
			data := seq(c.size)
			filtered, err := p.FilterTile(data)
			if err != nil {
				t.Fatal(err)
			}
			want, err := p.UnfilterTile(make([]byte, c.size), filtered)
			if err != nil || !bytes.Equal(want, data) {
				t.Fatalf("UnfilterTile: %v", err)
			}
			got, err := p.UnfilterOwned(filtered, uint64(c.size))
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, data) {
				t.Fatalf("UnfilterOwned differs from the tile written")
			}
			if shared := overlaps(got, filtered); shared != c.aliased {
				t.Errorf("result shares the filtered buffer: %v, want %v", shared, c.aliased)
			}
			if len(got) > 0 && c.aliased && cap(got) != len(got) {
				t.Errorf("aliased result has spare capacity %d", cap(got)-len(got))
			}
		})
	}
}

func overlaps(a, b []byte) bool {
	if len(a) == 0 || len(b) == 0 {
		return false
	}
	pa, pb := uintptr(unsafe.Pointer(&a[0])), uintptr(unsafe.Pointer(&b[0]))
	return pa >= pb && pa < pb+uintptr(len(b))
}

func TestUnfilterOwnedCorrupt(t *testing.T) {
	p, err := New(pipeline.Pipeline{MaxChunkSize: MaxChunkSize}, datatype.Int32, 1, 22, Options{})
	if err != nil {
		t.Fatal(err)
	}
	good, err := p.FilterTile(seq(2*MaxChunkSize + 8))
	if err != nil {
		t.Fatal(err)
	}
	frame := func(orig, flen, mlen uint32, payload int) []byte {
		w := wire.NewWriter(nil)
		w.Uint64(1)
		w.Uint32(orig)
		w.Uint32(flen)
		w.Uint32(mlen)
		return append(w.Bytes(), seq(payload)...)
	}
	for _, c := range []struct {
		name     string
		filtered []byte
		size     uint64
	}{
		{"wrong size", good, 2*MaxChunkSize + 4},
		{"truncated", good[:len(good)-1], 2*MaxChunkSize + 8},
		{"metadata on a plain chunk", frame(8, 4, 4, 8), 8},
		{"filtered length differs", frame(8, 6, 0, 6), 8},
		{"no header", []byte{1, 2}, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := p.UnfilterOwned(append([]byte(nil), c.filtered...), c.size)
			if !errors.Is(err, wire.ErrCorrupt) && !errors.Is(err, wire.ErrTruncated) {
				t.Fatalf("got %v, want a corrupt or truncated tile", err)
			}
		})
	}
}

// FuzzUnfilterOwned checks that the in-place path of an unfiltered tile
// agrees with the copying one on any input.
func FuzzUnfilterOwned(f *testing.F) {
	p, err := New(pipeline.Pipeline{MaxChunkSize: MaxChunkSize}, datatype.Uint8, 1, 22, Options{})
	if err != nil {
		f.Fatal(err)
	}
	for _, n := range []int{0, 5, MaxChunkSize + 3} {
		b, _ := p.FilterTile(seq(n))
		f.Add(b, uint32(n))
	}
	f.Fuzz(func(t *testing.T, filtered []byte, size uint32) {
		size %= 1 << 20
		want, werr := p.UnfilterTile(make([]byte, size), filtered)
		got, gerr := p.UnfilterOwned(append([]byte(nil), filtered...), uint64(size))
		if (werr == nil) != (gerr == nil) {
			t.Fatalf("UnfilterTile: %v; UnfilterOwned: %v", werr, gerr)
		}
		if werr == nil && !bytes.Equal(want, got) {
			t.Fatal("results differ")
		}
	})
}

// TestUnfilterTileKeepsPastLen: chunks decode with slack into the next
// chunk's space, never past the end of the caller's dst.
func TestUnfilterTileKeepsPastLen(t *testing.T) {
	for _, ft := range []pipeline.FilterType{pipeline.Zstd, pipeline.LZ4, pipeline.Gzip} {
		p, err := New(one(ft, 1, datatype.Any), datatype.Float64, 1, 22, Options{Concurrency: 1})
		if err != nil {
			t.Fatal(err)
		}
		data := seq(5*MaxChunkSize + 16)
		filtered, err := p.FilterTile(data)
		if err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, len(data)+64)
		for i := range buf {
			buf[i] = 0xAA
		}
		got, err := p.UnfilterTile(buf[:len(data)], filtered)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, data) {
			t.Fatalf("%s: unfiltered tile differs", ft)
		}
		for i, b := range buf[len(data):] {
			if b != 0xAA {
				t.Fatalf("%s: byte %d past the end of dst was written", ft, i)
			}
		}
	}
}
