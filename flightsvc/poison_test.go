package flightsvc

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"testing"
	"time"

	arrarray "github.com/apache/arrow-go/v18/arrow/array"
	aflight "github.com/apache/arrow-go/v18/arrow/flight"

	"github.com/tileflight/tileflight/format/schema"
	"github.com/tileflight/tileflight/internal/bufpool"
	"github.com/tileflight/tileflight/storage"
	"github.com/tileflight/tileflight/writer"
)

// TestMain overwrites pooled tiles as they are recycled (sparse scans
// hand them to this package's records), so that a read of one after its
// release fails the tests instead of passing by luck.
func TestMain(m *testing.M) {
	bufpool.SetPoison(bufpool.Poison)
	os.Exit(m.Run())
}

// An unordered DoGet of a sparse array in many zstd tiles (the reader's
// pooled path: batches wrap tiles recycled once gRPC has sent them) sends
// every cell intact through the daemon's transport, with recycled buffers
// poisoned (TestMain), so a tile recycled before its batch was written
// would arrive as 0xA5 bytes; once the stream is done, every pooled
// buffer has been recycled.
func TestPooledDoGet(t *testing.T) {
	ctx := context.Background()
	st, err := storage.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	s, err := schema.FromJSON([]byte(`{"type": "sparse", "capacity": 500, "coords_filters": [{"name": "zstd", "level": 1}],
		"dimensions": [{"name": "k", "type": "int64", "domain": [0, 99999], "tile": 500}],
		"attributes": [{"name": "v", "type": "float64", "filters": [{"name": "zstd", "level": 1}]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if err := writer.CreateArray(ctx, st, "p", s); err != nil {
		t.Fatal(err)
	}
	const n = 100_000
	k, v := make([]byte, 8*n), make([]byte, 8*n)
	for i := 0; i < n; i++ {
		binary.LittleEndian.PutUint64(k[8*i:], uint64(i))
		binary.LittleEndian.PutUint64(v[8*i:], math.Float64bits(float64(i)+0.25))
	}
	if _, err := writer.WriteSparse(ctx, st, "p", s, map[string]writer.Column{"k": {Data: k}, "v": {Data: v}}, writer.Options{Timestamp: 1}); err != nil {
		t.Fatal(err)
	}
	c := serve(t, Config{Store: st}) // no tile cache: every tile is recycled
	live := bufpool.Live()
	for _, batch := range []int{300, 500, 4096} { // parts of tiles, whole tiles, gathered tiles
		stream, err := c.DoGet(ctx, &aflight.Ticket{Ticket: []byte(fmt.Sprintf(`{"array": "p", "layout": "unordered", "batch_rows": %d}`, batch))})
		if err != nil {
			t.Fatal(err)
		}
		rd, err := aflight.NewRecordReader(stream)
		if err != nil {
			t.Fatal(err)
		}
		i := 0
		for rd.Next() {
			// A slow reader: gRPC's flow control then holds the
			// server's sent batches unwritten for a while.
			time.Sleep(time.Millisecond)
			r := rd.RecordBatch()
			ks := r.Column(0).(*arrarray.Int64).Int64Values()
			vs := r.Column(1).(*arrarray.Float64).Float64Values()
			for j := range ks {
				if ks[j] != int64(i) || vs[j] != float64(i)+0.25 {
					t.Fatalf("batch rows %d: cell %d: k %d v %v", batch, i, ks[j], vs[j])
				}
				i++
			}
		}
		if err := rd.Err(); err != nil && !errors.Is(err, io.EOF) {
			t.Fatal(err)
		}
		rd.Release()
		if i != n {
			t.Fatalf("batch rows %d: %d cells, want %d", batch, i, n)
		}
	}
	// The server releases its last record once gRPC has written it, which
	// may come a moment after the client has read it.
	for deadline := time.Now().Add(5 * time.Second); bufpool.Live() != live && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	if d := bufpool.Live() - live; d != 0 {
		t.Fatalf("%d pooled buffers not recycled after the streams", d)
	}
}
