package filters

import (
	"bytes"
	"errors"
	"math/rand"
	"os"
	"testing"

	"github.com/tileflight/tileflight/errkind"
	"github.com/tileflight/tileflight/format/gentile"
	"github.com/tileflight/tileflight/format/wire"
)

// The schema of an encrypted array, written by TileDB: its generic tile
// pipeline holds gzip and the AES-256-GCM filter
// (python_tests/golden/filters_gentile_cases.py).
func TestEncryptedGenericTile(t *testing.T) {
	b, err := os.ReadFile("../format/gentile/testdata/schema_aes.bin")
	if err != nil {
		t.Fatal(err)
	}
	key, err := os.ReadFile("../format/gentile/testdata/key.txt")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := gentile.Decode(b, nil); !errors.Is(err, errkind.FailedPrecondition) || !errors.Is(err, gentile.ErrKeyRequired) {
		t.Fatalf("decoding an encrypted tile without the key: %v, want ErrKeyRequired (FailedPrecondition)", err)
	}
	h, payload, n, err := gentile.Decode(b, GenericTileCodec{EncryptionKey: key})
	if err != nil {
		t.Fatal(err)
	}
	if n != len(b) || h.EncryptionType != 1 || uint64(len(payload)) != h.TileSize {
		t.Fatalf("n=%d/%d encryption=%d payload=%d/%d", n, len(b), h.EncryptionType, len(payload), h.TileSize)
	}
	// The same schema written unencrypted has the same payload.
	plain, err := os.ReadFile("../format/gentile/testdata/schema_plain.bin")
	if err != nil {
		t.Fatal(err)
	}
	_, want, _, err := gentile.Decode(plain, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(payload, want) {
		t.Fatalf("decrypted payload differs from the unencrypted schema's")
	}
	wrong := bytes.Repeat([]byte("k"), 32)
	if _, _, _, err := gentile.Decode(b, GenericTileCodec{EncryptionKey: wrong}); err == nil {
		t.Fatal("decoded with the wrong key")
	}
	// Our re-encryption of the payload decodes again.
	enc, err := GenericTileCodec{EncryptionKey: key}.FilterTile(&h, payload)
	if err != nil {
		t.Fatal(err)
	}
	got, err := GenericTileCodec{EncryptionKey: key}.UnfilterTile(&gentile.Header{Version: h.Version, TileSize: h.TileSize, Datatype: h.Datatype, CellSize: h.CellSize, EncryptionType: 1, Filters: h.Filters}, enc)
	if err != nil || !bytes.Equal(got, payload) {
		t.Fatalf("round trip: %v", err)
	}
}

// TestPlainAndRunnerAgree: for what TileDB writes (gzip generic tiles, and
// no filters), gentile.Plain and GenericTileCodec produce the same bytes
// and decode each other's, at chunk boundaries too.
func TestPlainAndRunnerAgree(t *testing.T) {
	r := rand.New(rand.NewSource(1))
	for _, n := range []int{0, 1, 100, 65535, 65536, 65537, 200000} {
		payload := make([]byte, n)
		for i := range payload {
			payload[i] = byte(r.Intn(8)) // compressible
		}
		viaPlain, err := gentile.Encode(payload, 22, nil)
		if err != nil {
			t.Fatal(err)
		}
		viaRunner, err := gentile.Encode(payload, 22, GenericTileCodec{})
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(viaPlain, viaRunner) {
			t.Fatalf("%d bytes: Plain and the runner encode differently", n)
		}
		for name, u := range map[string]gentile.Unfilterer{"plain": gentile.Plain{}, "runner": GenericTileCodec{}} {
			_, got, used, err := gentile.Decode(viaPlain, u)
			if err != nil || used != len(viaPlain) || !bytes.Equal(got, payload) {
				t.Fatalf("%d bytes, %s: %v", n, name, err)
			}
		}
	}
}

// TestRunnerDamagedHeaderIsCorrupt: a header whose pipeline cannot be
// built (a flipped datatype) is DataLoss, not Internal (found by the
// corruption campaign, python_tests/soak/corrupt.py).
func TestRunnerDamagedHeaderIsCorrupt(t *testing.T) {
	b, err := gentile.Encode([]byte("some payload some payload"), 22, nil)
	if err != nil {
		t.Fatal(err)
	}
	b[4+8+8] = 86 // the datatype
	if _, _, _, err := gentile.Decode(b, GenericTileCodec{}); !errors.Is(err, wire.ErrCorrupt) {
		t.Errorf("datatype flipped: %v, want ErrCorrupt", err)
	}
}

// FuzzPlainMatchesRunner: whatever gentile.Plain decodes, the complete
// runner decodes to the same bytes (Plain is a fast path, never a
// different reading).
func FuzzPlainMatchesRunner(f *testing.F) {
	for _, name := range []string{"schema_dense1.bin", "meta_dense1.bin"} {
		b, _ := os.ReadFile("../format/gentile/testdata/" + name)
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		_, p, n, err := gentile.Decode(b, gentile.Plain{})
		if err != nil {
			return
		}
		_, q, m, err := gentile.Decode(b, GenericTileCodec{})
		if err != nil || n != m || !bytes.Equal(p, q) {
			t.Fatalf("Plain decoded %d bytes from %d, the runner: %d from %d, %v", len(p), n, len(q), m, err)
		}
	})
}
