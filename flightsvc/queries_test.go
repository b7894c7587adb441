package flightsvc

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	arrarray "github.com/apache/arrow-go/v18/arrow/array"
	aflight "github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/rs/zerolog"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/tileflight/tileflight/access"
	"github.com/tileflight/tileflight/calls"
	"github.com/tileflight/tileflight/format/schema"
	"github.com/tileflight/tileflight/storage"
	"github.com/tileflight/tileflight/writer"
)

// bigArray writes "big": 4 Mi float64 cells (32 MiB), more than any
// flow-control window, so that a DoGet nobody reads blocks in its send.
func bigArray(t *testing.T, st storage.Store, c aflight.Client, ctx context.Context) {
	t.Helper()
	if testing.Short() {
		// Minutes under the race detector (make race runs -short); every
		// make test runs it in full.
		t.Skip("reads 32 MiB several times: run without -short")
	}
	s, err := schema.FromJSON([]byte(`{"type":"sparse","dimensions":[{"name":"k","type":"int64","domain":[0,100000000],"tile":100000}],
		"attributes":[{"name":"v","type":"float64"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if err := writer.CreateArray(ctx, st, "big", s); err != nil {
		t.Fatal(err)
	}
	const per = 128 << 10
	// Built before the DoPut opens, so that the stream never waits on the
	// client (a stall, for a registry with a short stall timeout).
	sc := arrow.NewSchema([]arrow.Field{{Name: "k", Type: arrow.PrimitiveTypes.Int64}, {Name: "v", Type: arrow.PrimitiveTypes.Float64}}, nil)
	var recs []arrow.RecordBatch
	for part := 0; part < 32; part++ {
		b := arrarray.NewRecordBuilder(memory.DefaultAllocator, sc)
		for i := 0; i < per; i++ {
			k := int64(part*per + i)
			b.Field(0).(*arrarray.Int64Builder).Append(k)
			b.Field(1).(*arrarray.Float64Builder).Append(float64(k) * 0.5)
		}
		recs = append(recs, b.NewRecordBatch())
		b.Release()
	}
	stream, err := c.DoPut(ctx)
	if err != nil {
		t.Fatal(err)
	}
	w := aflight.NewRecordWriter(stream, ipc.WithSchema(sc))
	w.SetFlightDescriptor(&aflight.FlightDescriptor{Type: aflight.DescriptorPATH, Path: []string{"big"}})
	for _, rec := range recs {
		if err := w.Write(rec); err != nil {
			t.Fatal(err)
		}
		rec.Release()
	}
	w.Close()
	stream.CloseSend()
	if _, err := stream.Recv(); err != nil {
		t.Fatal(err)
	}
}

func listQueries(t *testing.T, c aflight.Client, ctx context.Context) []calls.Snapshot {
	t.Helper()
	body, err := action(ctx, c, "list_queries", "")
	if err != nil {
		t.Fatal(err)
	}
	var out []calls.Snapshot
	if err := json.Unmarshal(body, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// openIdle starts a DoGet of the big array and never reads it.
func openIdle(t *testing.T, c aflight.Client, ctx context.Context) (aflight.FlightService_DoGetClient, context.CancelFunc) {
	t.Helper()
	cctx, cancel := context.WithCancel(ctx)
	stream, err := c.DoGet(cctx, &aflight.Ticket{Ticket: []byte(`{"array":"big"}`)})
	if err != nil {
		t.Fatal(err)
	}
	return stream, cancel
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited 10 s for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// recvErr reads a DoGet to its end and returns its error (nil: it ended).
func recvErr(stream aflight.FlightService_DoGetClient) error {
	for {
		if _, err := stream.Recv(); err != nil {
			if err.Error() == "EOF" {
				return nil
			}
			return err
		}
	}
}

// TestListAndCancelQueries: list_queries shows a running DoGet with its
// array and owner; a read-only token sees and cancels only its own (the
// other's is PERMISSION_DENIED); cancel_query ends it with CANCELLED for
// its client; an unknown or finished id is NOT_FOUND.
func TestListAndCancelQueries(t *testing.T) {
	ctx := context.Background()
	st := storage.NewMem()
	auth, err := access.NewFromText("w rw writer\nr ro reader\nr2 ro other")
	if err != nil {
		t.Fatal(err)
	}
	reg := calls.NewRegistry(0)
	c := serve(t, Config{Store: st, Auth: auth, Calls: reg, Log: zerolog.Nop()})
	w := metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer w")
	r := metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer r")
	r2 := metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer r2")
	bigArray(t, st, c, w)

	stream, cancel := openIdle(t, c, r)
	defer cancel()
	var q calls.Snapshot
	waitFor(t, "the DoGet in list_queries", func() bool {
		for _, s := range listQueries(t, c, w) {
			if s.Kind == "doget" && s.Array != "" {
				q = s
				return true
			}
		}
		return false
	})
	if q.Array != "big" || q.User != "reader" || q.Peer == "" || q.Started.IsZero() {
		t.Errorf("list_queries entry: %+v", q)
	}
	// Another read-only token neither sees it nor may cancel it.
	for _, s := range listQueries(t, c, r2) {
		if s.ID == q.ID {
			t.Errorf("a read-only token sees another's query: %+v", s)
		}
	}
	if _, err := action(r2, c, "cancel_query", `{"id":"`+q.ID+`"}`); status.Code(err) != codes.PermissionDenied {
		t.Errorf("cancel of another's query with a read-only token: %v", err)
	}
	// Its owner sees it.
	seen := false
	for _, s := range listQueries(t, c, r) {
		seen = seen || s.ID == q.ID
	}
	if !seen {
		t.Error("the owner does not see its own query")
	}
	// The owner cancels it: CANCELLED for the client, gone from the list.
	if _, err := action(r, c, "cancel_query", `{"id":"`+q.ID+`"}`); err != nil {
		t.Fatal(err)
	}
	if err := recvErr(stream); status.Code(err) != codes.Canceled {
		t.Errorf("cancelled DoGet: %v, want CANCELLED", err)
	}
	waitFor(t, "the registry to empty", func() bool { return reg.Count() <= 1 }) // the list_queries call itself
	if _, err := action(w, c, "cancel_query", `{"id":"`+q.ID+`"}`); status.Code(err) != codes.NotFound {
		t.Errorf("cancel of a finished query: %v", err)
	}
	if _, err := action(w, c, "cancel_query", `{"id":"nope"}`); status.Code(err) != codes.NotFound {
		t.Errorf("cancel of an unknown id: %v", err)
	}
	// A rw token cancels anyone's.
	stream, cancel2 := openIdle(t, c, r2)
	defer cancel2()
	waitFor(t, "the second DoGet", func() bool {
		for _, s := range listQueries(t, c, w) {
			if s.Kind == "doget" && s.User == "other" {
				q = s
				return true
			}
		}
		return false
	})
	if _, err := action(w, c, "cancel_query", `{"id":"`+q.ID+`"}`); err != nil {
		t.Fatal(err)
	}
	if err := recvErr(stream); status.Code(err) != codes.Canceled {
		t.Errorf("DoGet cancelled by a rw token: %v", err)
	}
}

// TestStalledClientsDoNotStarveOthers: clients that open DoGets and never
// read them hold at most their share of the slots, are ended once they
// have made no progress for the stall timeout, and a normal client is
// served meanwhile (queued, not refused, when every slot is taken).
func TestStalledClientsDoNotStarveOthers(t *testing.T) {
	ctx := context.Background()
	st := storage.NewMem()
	auth, err := access.NewFromText("bad rw\ngood rw")
	if err != nil {
		t.Fatal(err)
	}
	reg := calls.NewRegistry(500 * time.Millisecond)
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	go reg.Watch(wctx)
	c := serve(t, Config{Store: st, Auth: auth, Calls: reg, Log: zerolog.Nop(),
		MaxConcurrentStreams: 4, MaxQueriesPerPeer: 3, QueueWait: 5 * time.Second})
	bad := metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer bad")
	good := metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer good")
	bigArray(t, st, c, good)
	start := time.Now()
	if _, err := countRows(good, c, `{"array":"big"}`); err != nil {
		t.Fatal(err)
	}
	alone := time.Since(start)

	// 8 stalled DoGets: 3 get slots, the others are refused at once.
	var mu sync.Mutex
	codesSeen := map[codes.Code]int{}
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			stream, cancel := openIdle(t, c, bad)
			defer cancel()
			// Receive nothing: the first Recv only returns the status
			// once the server ends the stream.
			_, err := stream.Recv()
			if err == nil {
				// The schema arrived; wait for the end without reading on.
				time.Sleep(3 * time.Second)
				_, err = stream.Recv()
				for err == nil {
					_, err = stream.Recv()
				}
			}
			mu.Lock()
			codesSeen[status.Code(err)]++
			mu.Unlock()
		}()
	}
	time.Sleep(200 * time.Millisecond)
	start = time.Now()
	n, err := countRows(good, c, `{"array":"big"}`)
	if err != nil || n != 4<<20 {
		t.Fatalf("a normal client beside stalled ones: %d rows, %v", n, err)
	}
	// Served as if alone: within a few times the time of the same read
	// with nobody else around (measured first), whatever the machine.
	if took := time.Since(start); took > 3*alone+5*time.Second {
		t.Errorf("a normal client beside stalled ones took %v (%v alone)", took, alone)
	}
	wg.Wait()
	if codesSeen[codes.ResourceExhausted] < 5 {
		t.Errorf("stalled client over its share: %v", codesSeen)
	}
	if codesSeen[codes.Canceled] == 0 {
		t.Errorf("no stalled DoGet was ended by the watchdog: %v", codesSeen)
	}
	waitFor(t, "every call to end", func() bool { return reg.Count() == 0 })
}
