package fragmeta

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

func benchFile(b *testing.B) ([]byte, Layout) {
	paths, _ := filepath.Glob("testdata/sparse_int/*.tdb")
	if len(paths) != 1 {
		b.Fatal("sparse_int fixture missing")
	}
	data, err := os.ReadFile(paths[0])
	if err != nil {
		b.Fatal(err)
	}
	cj, _ := os.ReadFile("testdata/sparse_int/case.json")
	var c goldenCase
	if err := json.Unmarshal(cj, &c); err != nil {
		b.Fatal(err)
	}
	return data, c.layout()
}

// BenchmarkOpen measures opening a fragment: one tail read and the footer.
func BenchmarkOpen(b *testing.B) {
	data, l := benchFile(b)
	mf := &memFile{b: data}
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		if _, err := Open(mf.read, uint64(len(data)), l, 22, nil); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkLoadAll measures decoding every section of a 115-tile fragment.
func BenchmarkLoadAll(b *testing.B) {
	data, l := benchFile(b)
	mf := &memFile{b: data}
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		fr, err := Open(mf.read, uint64(len(data)), l, 22, nil)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := LoadAll(fr); err != nil {
			b.Fatal(err)
		}
	}
}
