package b2nd

import (
	"bytes"
	"context"
	"encoding/binary"
	"math"
	"os"
	"testing"

	"github.com/tileflight/tileflight/b2nd/chunk"
	"github.com/tileflight/tileflight/storage"
)

func TestCreateWriteReadBack(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	if d := os.Getenv("B2ND_KEEP"); d != "" {
		dir = d
	}
	st, err := storage.NewLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		sparse  bool
		codec   int
		filters [6]uint8
	}{
		{"c_zstd.b2nd", false, chunk.CodecZstd, [6]uint8{5: chunk.FilterShuffle}},
		{"s_lz4.b2nd", true, chunk.CodecLZ4, [6]uint8{5: chunk.FilterBitshuffle}},
		{"c_blosclz.b2nd", false, chunk.CodecBloscLZ, [6]uint8{4: chunk.FilterDelta, 5: chunk.FilterShuffle}},
		{"s_zlib.b2nd", true, chunk.CodecZlib, [6]uint8{4: chunk.FilterShuffle, 5: chunk.FilterBytedelta}},
		{"c_lz4hc.b2nd", false, chunk.CodecLZ4HC, [6]uint8{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			shape := []int64{13, 11}
			a, err := Create(ctx, st, tc.name, CreateOptions{Shape: shape, Chunks: []int64{5, 4}, Blocks: []int64{2, 3},
				Dtype: "<f8", Codec: tc.codec, CLevel: 5, Filters: tc.filters, Sparse: tc.sparse})
			if err != nil {
				t.Fatal(err)
			}
			want := make([]byte, 13*11*8)
			write := func(lo, hi []int64, base float64) {
				n := (hi[0] - lo[0] + 1) * (hi[1] - lo[1] + 1)
				data := make([]byte, 8*n)
				k := 0
				for i := lo[0]; i <= hi[0]; i++ {
					for j := lo[1]; j <= hi[1]; j++ {
						v := base + float64(i*100+j)
						binary.LittleEndian.PutUint64(data[8*k:], math.Float64bits(v))
						binary.LittleEndian.PutUint64(want[8*(i*11+j):], math.Float64bits(v))
						k++
					}
				}
				if err := a.Write(ctx, Box{lo, hi}, data); err != nil {
					t.Fatal(err)
				}
				if a, err = Open(ctx, st, tc.name); err != nil {
					t.Fatal(err)
				}
			}
			write([]int64{2, 3}, []int64{9, 8}, 0.5)
			write([]int64{0, 0}, []int64{12, 1}, 1000)
			if err := a.SetVLMeta(ctx, map[string][]byte{"k": {0xa1, 'x'}}); err != nil {
				t.Fatal(err)
			}
			if a, err = Open(ctx, st, tc.name); err != nil {
				t.Fatal(err)
			}
			got, err := a.ReadAll(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("read back differs")
			}
			vm, err := a.VLMetaValues()
			if err != nil || !bytes.Equal(vm["k"], []byte{0xa1, 'x'}) {
				t.Fatalf("vlmeta %v %v", vm, err)
			}
		})
	}
}
