// Package golden loads the TileDB-written golden files that package tests
// keep in their testdata/ folders. Only tests import it: every helper fails
// the test rather than returning an error, so a missing or unreadable
// fixture stops the test at the line that needed it.
package golden

import (
	"compress/gzip"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"testing"
)

// Read returns the contents of the file at path.
func Read(t testing.TB, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// ReadGz returns the gunzipped contents of the file at path.
func ReadGz(t testing.TB, path string) []byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	z, err := gzip.NewReader(f)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	b, err := io.ReadAll(z)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return b
}

// ReadJSON decodes the JSON file at path into v.
func ReadJSON(t testing.TB, path string, v any) {
	t.Helper()
	if err := json.Unmarshal(Read(t, path), v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// Glob returns the paths matching pattern, failing when there are none:
// a golden test that finds no cases would pass without testing anything.
func Glob(t testing.TB, pattern string) []string {
	t.Helper()
	m, err := filepath.Glob(pattern)
	if err != nil || len(m) == 0 {
		t.Fatalf("no golden files match %s: %v", pattern, err)
	}
	return m
}

// Seeds returns the contents of the files matching pattern, which may be
// none: fuzz targets add them to their corpus and have other seeds too.
func Seeds(t testing.TB, pattern string) [][]byte {
	t.Helper()
	m, _ := filepath.Glob(pattern)
	var out [][]byte
	for _, p := range m {
		out = append(out, Read(t, p))
	}
	return out
}
