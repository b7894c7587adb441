package dense_test

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"math/rand"
	"strings"
	"testing"
	"time"

	"github.com/tileflight/tileflight/errkind"
	"github.com/tileflight/tileflight/format/schema"
	"github.com/tileflight/tileflight/query"
	"github.com/tileflight/tileflight/reader"
	"github.com/tileflight/tileflight/reader/internal/readtest"
	"github.com/tileflight/tileflight/reader/tileio"
	"github.com/tileflight/tileflight/storage"
	"github.com/tileflight/tileflight/writer"
)

// rangeArray is a 256x256 dense array of 128x128 tiles (int64 v, int32
// w; 128 KiB and 64 KiB tiles) written as two overlapping fragments, the
// second leaving part of the first showing.
func rangeArray(t testing.TB) storage.Store {
	ctx := context.Background()
	mem := storage.NewMem()
	s, err := schema.FromJSON([]byte(`{"type": "dense", "cell_order": "row-major", "tile_order": "row-major",
	  "dimensions": [{"name": "x", "type": "int64", "domain": [0, 255], "tile": 128}, {"name": "y", "type": "int64", "domain": [0, 255], "tile": 128}],
	  "attributes": [{"name": "v", "type": "int64", "fill": -1, "filters": [{"name": "zstd", "level": 1}]}, {"name": "w", "type": "int32", "fill": -2}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if err := writer.CreateArray(ctx, mem, "d", s); err != nil {
		t.Fatal(err)
	}
	for k, box := range [][4]int{{0, 255, 0, 255}, {40, 200, 10, 90}} {
		n := (box[1] - box[0] + 1) * (box[3] - box[2] + 1)
		v, w := make([]byte, 8*n), make([]byte, 4*n)
		i := 0
		for x := box[0]; x <= box[1]; x++ {
			for y := box[2]; y <= box[3]; y++ {
				binary.LittleEndian.PutUint64(v[8*i:], uint64(k*1_000_000+x*1000+y))
				binary.LittleEndian.PutUint32(w[4*i:], uint32(k*7+x-y))
				i++
			}
		}
		_, err := writer.WriteDense(ctx, mem, "d", s, [][2]int64{{int64(box[0]), int64(box[1])}, {int64(box[2]), int64(box[3])}}, schema.RowMajor,
			map[string]writer.Column{"v": {Data: v}, "w": {Data: w}}, writer.Options{Timestamp: uint64(10 + k)})
		if err != nil {
			t.Fatal(err)
		}
	}
	return mem
}

// rangeQuery decodes a fuzz input into a query: a layout, aggregates or
// cells, a budget, and range lists on both dimensions (counts, sizes,
// overlaps and duplicates as the bytes say), cut so that the result has
// at most maxCells cells.
func rangeQuery(b []byte, maxCells int) (js string, budget int64) {
	at := func(i int) int {
		if i < len(b) {
			return int(b[i])
		}
		return 0
	}
	layout := []string{"row-major", "col-major", "global"}[at(0)%3]
	budget = []int64{1, 1 << 20, 4 << 20}[at(2)%3]
	ranges := [2][][2]int{}
	for i := 3; i+3 < len(b); i += 4 {
		d := at(i) % 2
		lo := at(i + 1)
		hi := min(255, lo+at(i+2)*at(i+2)/64)
		for r := 0; r <= at(i+3)%64 && len(ranges[d]) < 4096; r++ {
			ranges[d] = append(ranges[d], [2]int{lo, hi})
		}
	}
	for d := range ranges {
		if len(ranges[d]) == 0 {
			ranges[d] = [][2]int{{0, 255}}
		}
	}
	cells := func(rs [][2]int) int {
		n := 0
		for _, r := range rs {
			n += r[1] - r[0] + 1
		}
		return n
	}
	for cells(ranges[0])*cells(ranges[1]) > maxCells {
		d := 0
		if len(ranges[1]) > 1 && (len(ranges[0]) == 1 || cells(ranges[1]) > cells(ranges[0])) {
			d = 1
		}
		if len(ranges[d]) == 1 {
			ranges[d][0][1] = ranges[d][0][0] + (ranges[d][0][1]-ranges[d][0][0])/2
			continue
		}
		ranges[d] = ranges[d][:len(ranges[d])/2]
	}
	sub, _ := json.Marshal(map[string]any{"x": ranges[0], "y": ranges[1]})
	q := fmt.Sprintf(`{"array": "d", "subarray": %s, "layout": %q, "batch_rows": 5000`, sub, layout)
	switch at(1) % 3 {
	case 1:
		q += `, "aggregates": {"v": ["sum", "max"], "*": ["count"]}`
	case 2:
		q += `, "aggregates": {"w": ["sum", "min"]}`
	}
	return q + "}", budget
}

// readDigest reads q to its end and returns its row count and a hash of
// every cell in order.
func readDigest(t testing.TB, st storage.Store, q *query.Query, opt reader.Options) (int64, uint64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	r, err := reader.Open(ctx, st, q, opt)
	if err != nil {
		return 0, 0, err
	}
	defer r.Close()
	h := fnv.New64a()
	rows := int64(0)
	for {
		rec, err := r.Next(ctx)
		if err == io.EOF {
			return rows, h.Sum64(), nil
		}
		if err != nil {
			return 0, 0, err
		}
		for i := 0; i < int(rec.NumRows()); i++ {
			for c := 0; c < int(rec.NumCols()); c++ {
				h.Write([]byte(readtest.Canon(rec.Column(c), i)))
				h.Write([]byte{'|'})
			}
		}
		rows += rec.NumRows()
		rec.Release()
	}
}

// checkRanges reads the query the input decodes to with its small budget
// and with an ample one: both must give the same cells, and what the
// small-budget read held of decoded tiles and built chunks at once
// (tileio.Meter) must stay within the budget, plus the working set and
// the one chunk the consumer waits for, which may go past it.
func checkRanges(t *testing.T, st storage.Store, in []byte) {
	const workers, workingSet = 2, 1 << 20
	js, budget := rangeQuery(in, 600_000)
	q, err := query.Parse([]byte(js))
	if err != nil {
		t.Fatalf("%s: %v", js, err)
	}
	wantRows, want, err := readDigest(t, st, q, reader.Options{MemoryBudget: 1 << 30, Workers: workers})
	if err != nil {
		t.Fatalf("ample budget: %v", err)
	}
	m := &tileio.Meter{}
	gotRows, got, err := readDigest(t, st, q, reader.Options{MemoryBudget: budget, MaxWorkingSet: workingSet, Workers: workers, Meter: m})
	if err != nil {
		t.Fatalf("%s, budget %d: %v (%s)", js, budget, err, errkind.Of(err))
	}
	if gotRows != wantRows || got != want {
		t.Fatalf("budget %d: %d rows (digest %x), with an ample budget %d (%x)", budget, gotRows, got, wantRows, want)
	}
	// A chunk is cut to budget/(2(workers+2)), at least 256 KiB; a single
	// charge larger than the budget is granted when nothing else is held.
	chunk := max(256<<10, min(budget/(2*(workers+2)), 64<<20))
	bound := max(budget, chunk, 128<<10) + workingSet + chunk
	if p := m.Peak(); p > bound {
		t.Fatalf("budget %d: the read held %d bytes at once, more than %d", budget, p, bound)
	}
	if h := m.Held(); h != 0 {
		t.Fatalf("budget %d: %d bytes still held after Close", budget, h)
	}
}

// FuzzRangesWithinBudget: range lists of every shape (many, overlapping,
// duplicated, tiny, whole-domain), in every layout and with aggregates,
// read within the memory budget and give the cells of an unconstrained
// read.
func FuzzRangesWithinBudget(f *testing.F) {
	st := rangeArray(f)
	// layout, aggregates, budget, then (dimension, low, size, repeats)...
	f.Add([]byte{2, 0, 2, 0, 0, 255, 63, 0, 0, 255, 63})         // global, 128 whole-domain x ranges
	f.Add([]byte{1, 0, 1, 0, 0, 255, 63, 1, 0, 255, 3})          // col-major, duplicates on both
	f.Add([]byte{2, 1, 0, 0, 0, 255, 63, 0, 5, 40, 10})          // global sum, 1-byte budget
	f.Add([]byte{0, 0, 2, 0, 3, 0, 63, 1, 7, 1, 63, 0, 9, 2, 5}) // many tiny ranges
	f.Add([]byte{1, 2, 1, 1, 30, 90, 40, 0, 100, 120, 20})       // col-major aggregates, overlapping
	f.Fuzz(func(t *testing.T, in []byte) {
		checkRanges(t, st, in)
	})
}

// TestRangesWithinBudget runs checkRanges on random inputs (the fuzz
// target's seeds run too under go test).
func TestRangesWithinBudget(t *testing.T) {
	st := rangeArray(t)
	rng := rand.New(rand.NewSource(29))
	n := 24
	if testing.Short() {
		n = 8
	}
	for i := 0; i < n; i++ {
		in := make([]byte, 3+4*(1+rng.Intn(4)))
		rng.Read(in)
		in[0], in[1] = byte(i%3), byte(i/3%3)
		t.Run(fmt.Sprint(i), func(t *testing.T) { checkRanges(t, st, in) })
	}
}

// TestManyRangesCancel: a read of 40,000 whole-domain ranges (far more
// cells than memory) stops within 100 ms of its context's end, whatever
// the layout, before or after its first batch.
func TestManyRangesCancel(t *testing.T) {
	st := rangeArray(t)
	rs := make([][2]int, 40000)
	for i := range rs {
		rs[i] = [2]int{0, 255}
	}
	sub, _ := json.Marshal(map[string]any{"x": rs})
	for _, tail := range []string{`"layout": "row-major"`, `"layout": "col-major"`, `"layout": "global"`, `"aggregates": {"v": ["sum"]}`} {
		q := readtest.Parse(t, fmt.Sprintf(`{"array": "d", "subarray": %s, %s}`, sub, tail))
		for _, after := range []int{0, 3} {
			m := &tileio.Meter{}
			ctx, cancel := context.WithCancel(context.Background())
			r, err := reader.Open(ctx, st, q, reader.Options{MemoryBudget: 16 << 20, Workers: 2, Meter: m})
			if err != nil {
				t.Fatalf("%s: %v", tail, err)
			}
			done := make(chan error, 1)
			go func() {
				for k := 0; ; k++ {
					rec, err := r.Next(ctx)
					if err != nil {
						done <- err
						return
					}
					rec.Release()
					if k+1 == after {
						// Then wait, as a slow client does, for the cancel.
						<-ctx.Done()
					}
				}
			}()
			time.Sleep(200 * time.Millisecond)
			start := time.Now()
			cancel()
			select {
			case err := <-done:
				if !errors.Is(err, context.Canceled) {
					t.Fatalf("%s: ended with %v", tail, err)
				}
			case <-time.After(2 * time.Second):
				t.Fatalf("%s: Next still running 2 s after the cancel", tail)
			}
			r.Close()
			if d := time.Since(start); d > 100*time.Millisecond {
				t.Errorf("%s, cancelled after %d batches: stopped after %s", tail, after, d)
			}
			if m.Held() != 0 {
				t.Errorf("%s: %d bytes held after Close", tail, m.Held())
			}
		}
	}
}

// TestGlobalPlanRefused: a read in global layout whose ranges cross more
// space tiles than its budget plans for is refused at once, naming the
// limit; the same ranges in row-major layout, and aggregates, are read.
func TestGlobalPlanRefused(t *testing.T) {
	st := rangeArray(t)
	rs := make([][2]int, 40000)
	for i := range rs {
		rs[i] = [2]int{127 - i%2, 128}
	}
	sub, _ := json.Marshal(map[string]any{"x": rs, "y": [][2]int{{7, 7}}})
	opt := reader.Options{MemoryBudget: 4 << 20, Workers: 2}
	_, err := reader.Open(context.Background(), st, readtest.Parse(t, fmt.Sprintf(`{"array": "d", "subarray": %s, "layout": "global"}`, sub)), opt)
	if errkind.Of(err) != errkind.ResourceExhausted || !strings.Contains(fmt.Sprint(err), "-memory-budget") {
		t.Fatalf("global layout over 40,000 ranges each crossing 2 tiles: %v, want ResourceExhausted naming -memory-budget", err)
	}
	for _, tail := range []string{`"layout": "row-major"`, `"aggregates": {"v": ["sum"]}`} {
		q := readtest.Parse(t, fmt.Sprintf(`{"array": "d", "subarray": %s, %s}`, sub, tail))
		rows, _, err := readDigest(t, st, q, opt)
		if err != nil {
			t.Fatalf("%s: %v", tail, err)
		}
		want := int64(1) // one row of aggregates
		if strings.Contains(tail, "layout") {
			want = 0
			for _, r := range rs {
				want += int64(r[1] - r[0] + 1)
			}
		}
		if rows != want {
			t.Fatalf("%s: %d rows, want %d", tail, rows, want)
		}
	}
}
