package sqlsvc

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	arr "github.com/apache/arrow-go/v18/arrow/array"
	aflight "github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/flight/flightsql"
	"github.com/apache/arrow-go/v18/arrow/memory"
	gms "github.com/dolthub/go-mysql-server/sql"
	"github.com/rs/zerolog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/tileflight/tileflight/calls"
	"github.com/tileflight/tileflight/errkind"
	"github.com/tileflight/tileflight/flightsvc"
	"github.com/tileflight/tileflight/format/schema"
	"github.com/tileflight/tileflight/mux"
	"github.com/tileflight/tileflight/sqlsvc/native"
	"github.com/tileflight/tileflight/storage"
	"github.com/tileflight/tileflight/writer"
)

func TestBudget(t *testing.T) {
	b := &budget{limit: 1000}
	if err := b.charge(600, "ORDER BY"); err != nil {
		t.Fatalf("600 of 1000: %v", err)
	}
	if err := b.charge(400, "ORDER BY"); err != nil {
		t.Fatalf("1000 of 1000: %v", err)
	}
	err := b.charge(1, "ORDER BY")
	if errkind.Of(err) != errkind.ResourceExhausted || !strings.Contains(err.Error(), "-sql-memory (1000 bytes)") || !strings.Contains(err.Error(), "ORDER BY") {
		t.Fatalf("past the limit: %v (kind %v)", err, errkind.Of(err))
	}
	if b.Used() != 1001 {
		t.Fatalf("used %d, want 1001", b.Used())
	}
	// The engine asks UsedMemory once per new cache entry: each ask
	// charges entryBytes, and the manager refuses past MaxMemory.
	r := &budget{limit: 3 * entryBytes}
	if r.MaxMemory() != 3*entryBytes {
		t.Fatalf("MaxMemory %d", r.MaxMemory())
	}
	for i := 1; i <= 3; i++ {
		if got := r.UsedMemory(); got != uint64(i*entryBytes) {
			t.Fatalf("ask %d: UsedMemory %d, want %d", i, got, i*entryBytes)
		}
	}
	if gms.HasAvailableMemory(r) {
		t.Fatal("a fourth entry past the budget is still available")
	}
	if withBudget(context.Background(), 0) != context.Background() || budgetFrom(context.Background()) != nil {
		t.Fatal("a zero bound must leave the context without a budget")
	}
	for n, want := range map[int64]string{1 << 30: "1GiB", 64 << 20: "64MiB", 3 << 10: "3KiB", 1500: "1500 bytes"} {
		if got := sizeString(n); got != want {
			t.Errorf("sizeString(%d) = %q, want %q", n, got, want)
		}
	}
}

func TestRowBytes(t *testing.T) {
	for _, c := range []struct {
		row  gms.Row
		want int64
	}{
		{gms.Row{}, 24},
		{gms.Row{nil, true}, 24 + 32},
		{gms.Row{int64(1), float64(2)}, 24 + 32 + 16},
		{gms.Row{int32(1)}, 24 + 16 + 4},
		{gms.Row{"abcd"}, 24 + 16 + 16 + 4},
		{gms.Row{[]byte("abcdefgh")}, 24 + 16 + 24 + 8},
		{gms.Row{time.Unix(0, 0)}, 24 + 16 + 24},
	} {
		if got := rowBytes(c.row); got != c.want {
			t.Errorf("rowBytes(%v) = %d, want %d", c.row, got, c.want)
		}
	}
}

// serveMemory serves one sparse array "big" of n cells (k, s: a
// 40-character string) with -sql-memory limit.
func serveMemory(t *testing.T, n int, limit int64) *flightsql.Client {
	sc, _ := serveMemoryCalls(t, n, limit)
	return sc
}

// serveMemoryCalls is serveMemory with the daemon's call registry (and
// its interceptors) in place; it also returns the plain Flight client.
func serveMemoryCalls(t *testing.T, n int, limit int64) (*flightsql.Client, aflight.Client) {
	t.Helper()
	ctx := context.Background()
	conf := flightsvc.Config{Store: storage.NewMem(), Log: zerolog.Nop()}
	s, err := schema.FromJSON([]byte(`{"type":"sparse","dimensions":[{"name":"k","type":"int64","domain":[0,1000000],"tile":1000}],
		"attributes":[{"name":"s","type":"string_utf8","cell_val_num":"var"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if err := writer.CreateArray(ctx, conf.Store, "big", s); err != nil {
		t.Fatal(err)
	}
	svc := flightsvc.NewService(conf)
	h, srvImpl, err := New(native.New(svc), zerolog.Nop(), "test")
	if err != nil {
		t.Fatal(err)
	}
	srvImpl.SetMemory(limit)
	reg := calls.NewRegistry(0)
	srvImpl.SetCalls(reg)
	_, sl := flightsvc.AccessLog(zerolog.Nop())
	srv := grpc.NewServer(grpc.ChainStreamInterceptor(sl, reg.Interceptors()))
	aflight.RegisterFlightServiceServer(srv, mux.New(svc, h))
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(lis)
	t.Cleanup(srv.Stop)
	opts := []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}
	c, err := aflight.NewClientWithMiddleware(lis.Addr().String(), nil, nil, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	sc, err := flightsql.NewClient(lis.Addr().String(), nil, nil, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sc.Close() })
	b := arr.NewRecordBuilder(memory.DefaultAllocator, arrow.NewSchema([]arrow.Field{{Name: "k", Type: arrow.PrimitiveTypes.Int64}, {Name: "s", Type: arrow.BinaryTypes.String}}, nil))
	for k := 0; k < n; k++ {
		b.Field(0).(*arr.Int64Builder).Append(int64(k))
		b.Field(1).(*arr.StringBuilder).Append(fmt.Sprintf("%040d", (k*7919)%n))
	}
	put(t, c, `{"array":"big"}`, b.NewRecordBatch())
	return sc, c
}

func TestMemoryBound(t *testing.T) {
	// 5000 rows of about 24+32+8+16+40 = 120 bytes: about 600 KB held by a
	// sort of the whole array; the bound is 256 KiB.
	c := serveMemory(t, 5000, 256<<10)
	for _, tc := range []struct {
		sql  string
		rows int
		code codes.Code
	}{
		{"SELECT k, s FROM big", 5000, codes.OK},                                          // a scan streams
		{"SELECT k, s FROM big WHERE s LIKE '%7'", 500, codes.OK},                         // a filter streams
		{"SELECT k, s FROM big ORDER BY s DESC LIMIT 3", 3, codes.OK},                     // TopN keeps 3 rows
		{"SELECT k, s FROM big WHERE k < 500 ORDER BY s", 500, codes.OK},                  // a small sort fits
		{"SELECT count(*) FROM big GROUP BY k % 10", 10, codes.OK},                        // 10 groups fit
		{"SELECT k, s FROM big ORDER BY s", 0, codes.ResourceExhausted},                   // the whole array sorted
		{"SELECT k % 5000, count(*) FROM big GROUP BY 1", 0, codes.ResourceExhausted},     // 5000 groups of 256 bytes
		{"SELECT s, count(*) FROM big GROUP BY s", 0, codes.ResourceExhausted},            // 5000 groups, grouped natively
		{"SELECT DISTINCT s FROM big", 0, codes.ResourceExhausted},                        // 5000 distinct hashes
		{"SELECT count(*) FROM big a, big b WHERE a.s = b.s", 0, codes.ResourceExhausted}, // a hash join's build side
		{"SELECT median(k) FROM big WHERE k < 100", 1, codes.OK},                          // 100 values kept
		{"SELECT median(k + length(s)) FROM big", 0, codes.ResourceExhausted},             // every value kept
		{"SELECT string_agg(s, ',') FROM big", 0, codes.ResourceExhausted},                // every string kept
		// A cross join reads its inner side again per outer row: it holds
		// nothing (-sql-timeout bounds how long it runs).
		{"SELECT count(*) FROM big a CROSS JOIN big b WHERE a.k < 100", 1, codes.OK},
		{"SELECT k FROM big WHERE k = 42", 1, codes.OK}, // the daemon still answers
	} {
		got, _, err := rows(t, c, tc.sql)
		if status.Code(err) != tc.code {
			t.Errorf("%s: %v, want %v", tc.sql, err, tc.code)
			continue
		}
		if err != nil {
			if !strings.Contains(err.Error(), "-sql-memory (256KiB)") {
				t.Errorf("%s: the error does not name the flag: %v", tc.sql, err)
			}
			continue
		}
		if len(got) != tc.rows {
			t.Errorf("%s: %d rows, want %d", tc.sql, len(got), tc.rows)
		}
	}
	// An INSERT's SELECT is bounded as a query is, and writes nothing.
	_, err := c.ExecuteUpdate(context.Background(), "INSERT INTO big SELECT k + 100000, s FROM big ORDER BY s")
	if status.Code(err) != codes.ResourceExhausted || !strings.Contains(err.Error(), "-sql-memory") {
		t.Errorf("INSERT ... SELECT ... ORDER BY past the bound: %v", err)
	}
	if got, _, err := rows(t, c, "SELECT count(*) FROM big"); err != nil || len(got) != 1 || got[0] != "5000" {
		t.Errorf("after the refused INSERT: %v %v", got, err)
	}
}

func TestCancelFlightInfo(t *testing.T) {
	sc, c := serveMemoryCalls(t, 3000, 0)
	ctx := context.Background()
	// 9 million rows: it runs until cancelled.
	info, err := sc.Execute(ctx, "SELECT a.k, b.s FROM big a CROSS JOIN big b")
	if err != nil {
		t.Fatal(err)
	}
	rd, err := sc.DoGet(ctx, info.Endpoint[0].Ticket)
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Release()
	if !rd.Next() {
		t.Fatalf("no first batch: %v", rd.Err())
	}
	res, err := c.CancelFlightInfo(ctx, &aflight.CancelFlightInfoRequest{Info: info})
	if err != nil || res.GetStatus() != aflight.CancelStatusCancelled {
		t.Fatalf("CancelFlightInfo of a running statement: %v %v, want CANCELLED", res.GetStatus(), err)
	}
	n := 0
	for rd.Next() {
		n++
	}
	if status.Code(rd.Err()) != codes.Canceled || !strings.Contains(rd.Err().Error(), "CancelFlightInfo") {
		t.Fatalf("the cancelled reader ends with %v after %d more batches, want CANCELLED naming CancelFlightInfo", rd.Err(), n)
	}
	if n > 200 {
		t.Fatalf("%d batches after the cancel", n)
	}
	// Nothing redeems its ticket any more: NOT_FOUND.
	if _, err := c.CancelFlightInfo(ctx, &aflight.CancelFlightInfoRequest{Info: info}); status.Code(err) != codes.NotFound {
		t.Fatalf("CancelFlightInfo of a finished statement: %v, want NOT_FOUND", err)
	}
	// A FlightInfo without a ticket is malformed.
	if _, err := c.CancelFlightInfo(ctx, &aflight.CancelFlightInfoRequest{Info: &aflight.FlightInfo{}}); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("CancelFlightInfo without tickets: %v, want INVALID_ARGUMENT", err)
	}
	// The server still answers.
	if got, _, err := rows(t, sc, "SELECT k FROM big WHERE k = 7"); err != nil || len(got) != 1 {
		t.Fatalf("after the cancel: %v %v", got, err)
	}
}
