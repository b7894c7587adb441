package dense_test

import (
	"path/filepath"
	"testing"

	"github.com/tileflight/tileflight/internal/s3test"
	"github.com/tileflight/tileflight/reader"
	"github.com/tileflight/tileflight/reader/internal/readtest"
	"github.com/tileflight/tileflight/storage/s3"
)

// TestMain: see readtest.Main (poisoned buffers).
func TestMain(m *testing.M) { readtest.Main(m) }

// TestDenseConformanceS3 reruns every dense read TileDB recorded with the
// arrays in a bucket of a real S3 server: the same cells in the same
// order. Blocks are small (4 KiB) so that tile reads straddle blocks and
// share them, as large arrays' tiles do with the default 1 MiB.
func TestDenseConformanceS3(t *testing.T) {
	cases := denseCases(t)
	st := s3test.Open(t, "conformance", func(o *s3.Options) { o.BlockSize = 4 << 10 })
	n := 0
	for i, c := range cases {
		// Each case in its own folder: names repeat between the fixture
		// matrix and this package's own cases.
		sub := s3test.OpenBucket(t, st, filepath.Join("c", itoa(i)))
		s3test.UploadDir(t, sub, c.Dir, filepath.Base(c.Dir))
		_, key := readtest.OpenCase(t, c)
		for _, rd := range c.Expect.Reads {
			t.Run(c.Name+"/"+rd.Name, func(t *testing.T) {
				q := readtest.QueryFor(c, rd)
				q.BatchRows = 7
				recs, _, err := readtest.ReadAll(t, sub, q, reader.Options{EncryptionKey: key, Workers: 3})
				if err != nil {
					t.Fatal(err)
				}
				readtest.CompareRead(t, c, rd, recs)
				for _, r := range recs {
					r.Release()
				}
				n++
			})
		}
	}
	if n == 0 {
		t.Fatal("no dense reads")
	}
}

func itoa(i int) string {
	return string(rune('a'+i/26)) + string(rune('a'+i%26))
}
