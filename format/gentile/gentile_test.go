package gentile

import (
	"bytes"
	"errors"
	"github.com/tileflight/tileflight/format/wire"
	"os"
	"testing"

	"github.com/tileflight/tileflight/errkind"
)

// Files written by TileDB 2.30 for a small dense array: its schema and its
// array metadata.
func TestDecodeTileDBFiles(t *testing.T) {
	for _, name := range []string{"schema_dense1.bin", "meta_dense1.bin"} {
		b, err := os.ReadFile("testdata/" + name)
		if err != nil {
			t.Fatal(err)
		}
		tiles, err := DecodeAll(b, nil)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if len(tiles) == 0 || len(tiles[0]) == 0 {
			t.Fatalf("%s: empty", name)
		}
		h, err := DecodeHeader(b)
		if err != nil {
			t.Fatal(err)
		}
		if len(h.Filters.Filters) != 1 || h.Filters.Filters[0].Level != 1 {
			t.Fatalf("%s: TileDB writes generic tiles with gzip level 1, got %+v", name, h.Filters)
		}
		// Re-encoding yields a tile we decode to the same payload (the
		// deflate bytes need not equal zlib's).
		enc, err := Encode(tiles[0], h.Version, nil)
		if err != nil {
			t.Fatal(err)
		}
		_, p2, n, err := Decode(enc, nil)
		if err != nil || n != len(enc) || !bytes.Equal(p2, tiles[0]) {
			t.Fatalf("%s: round trip: n=%d err=%v", name, n, err)
		}
	}
}

func TestLargePayloadIsChunked(t *testing.T) {
	payload := bytes.Repeat([]byte("0123456789abcdef"), 20000) // 5 chunks of 64 KiB
	enc, err := Encode(payload, 22, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, got, _, err := Decode(enc, nil)
	if err != nil || !bytes.Equal(got, payload) {
		t.Fatalf("err=%v", err)
	}
}

func TestTruncatedIsAnError(t *testing.T) {
	b, err := os.ReadFile("testdata/schema_dense1.bin")
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{0, 5, BaseHeaderSize, len(b) - 1} {
		if _, _, _, err := Decode(b[:n], nil); err == nil {
			t.Fatalf("truncated at %d: no error", n)
		}
	}
}

func FuzzDecode(f *testing.F) {
	for _, name := range []string{"schema_dense1.bin", "meta_dense1.bin"} {
		b, _ := os.ReadFile("testdata/" + name)
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		_, _ = DecodeAll(b, nil)
	})
}

// An encrypted tile needs the key, which only filters.GenericTileCodec
// takes (filters/gentile_test.go decodes it).
func TestEncryptedGenericTileNeedsTheRunner(t *testing.T) {
	b, err := os.ReadFile("testdata/schema_aes.bin")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := Decode(b, nil); !errors.Is(err, errkind.FailedPrecondition) || !errors.Is(err, ErrKeyRequired) {
		t.Fatalf("decoding an encrypted tile without the key: %v, want ErrKeyRequired (FailedPrecondition)", err)
	}
}

// TestDamagedHeaderIsCorrupt: a header whose pipeline cannot be built (a
// flipped datatype or gzip level) is corrupt, so the daemon answers
// DataLoss rather than Internal.
func TestDamagedHeaderIsCorrupt(t *testing.T) {
	b, err := Encode([]byte("some payload some payload"), 22, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		off  int
		val  byte
	}{
		{"datatype", 4 + 8 + 8, 86},
		{"gzip level", BaseHeaderSize + 4 + 4 + 1 + 4 + 1, 56},
	} {
		d := append([]byte(nil), b...)
		d[c.off] = c.val
		if _, _, _, err := Decode(d, nil); !errors.Is(err, wire.ErrCorrupt) {
			t.Errorf("%s flipped: %v, want ErrCorrupt", c.name, err)
		}
	}
}
