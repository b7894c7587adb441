package filters

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/tileflight/tileflight/filters/stage"
	"github.com/tileflight/tileflight/format/datatype"
	"github.com/tileflight/tileflight/format/pipeline"
)

// partsDir, when set, makes TestCompressorParts write every compressed
// part with its original bytes and a manifest, for
// python_tests/golden/filters_c_decode.py to decode with the C libraries
// TileDB links (zlib, libzstd, liblz4, libbzip2): the proof that TileDB
// can read what our encoders write.
var partsDir = flag.String("filters.parts", "", "directory to write compressed parts into")

type partEntry struct {
	Codec string `json:"codec"`
	Level int32  `json:"level"`
	Orig  string `json:"orig"`
	Comp  string `json:"comp"`
}

func TestCompressorParts(t *testing.T) {
	inputs := map[string][]byte{"empty": {}, "byte": {7}}
	for _, name := range []string{"zstd_int64_multichunk", "gzip_float64", "lz4_utf8_chunked", "bzip2_int8"} {
		inputs[name] = readGz(t, name+".out.gz")
	}
	var manifest []partEntry
	for _, c := range []struct {
		ft pipeline.FilterType
		l  int32
	}{
		{pipeline.Gzip, -1}, {pipeline.Gzip, 0}, {pipeline.Gzip, 1}, {pipeline.Gzip, 9},
		{pipeline.Zstd, -7}, {pipeline.Zstd, -1}, {pipeline.Zstd, 3}, {pipeline.Zstd, 7}, {pipeline.Zstd, 19},
		{pipeline.LZ4, -1}, {pipeline.Bzip2, 1}, {pipeline.Bzip2, 9},
	} {
		comp, _ := pipeline.CompressorFor(c.ft)
		s, err := newCompression(pipeline.Filter{Type: c.ft, Compressor: comp, Level: c.l, Reinterpret: datatype.Any}, datatype.Uint8, 1)
		if err != nil {
			t.Fatal(err)
		}
		for name, in := range inputs {
			out, err := s.Forward(&stage.Context{Type: datatype.Uint8}, stage.Buffers{Data: [][]byte{in}})
			if err != nil {
				t.Fatal(err)
			}
			cb := out.Data[0]
			back := make([]byte, len(in))
			if err := s.c.decompress(back, cb); err != nil || !bytes.Equal(back, in) {
				t.Fatalf("%s/%d %s: %v", c.ft, c.l, name, err)
			}
			if *partsDir == "" {
				continue
			}
			base := fmt.Sprintf("%s_%d_%s", c.ft, c.l, name)
			if err := os.WriteFile(filepath.Join(*partsDir, base+".orig"), in, 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(*partsDir, base+".comp"), cb, 0o644); err != nil {
				t.Fatal(err)
			}
			manifest = append(manifest, partEntry{Codec: c.ft.String(), Level: c.l, Orig: base + ".orig", Comp: base + ".comp"})
		}
	}
	if *partsDir != "" {
		b, _ := json.MarshalIndent(manifest, "", " ")
		if err := os.WriteFile(filepath.Join(*partsDir, "manifest.json"), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
