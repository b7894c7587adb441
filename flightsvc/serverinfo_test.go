package flightsvc

import (
	"context"
	"encoding/json"
	"net"
	"slices"
	"strings"
	"testing"

	aflight "github.com/apache/arrow-go/v18/arrow/flight"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/tileflight/tileflight/format/schema"
	"github.com/tileflight/tileflight/query"
	"github.com/tileflight/tileflight/storage"
	"github.com/tileflight/tileflight/writer"
)

// serveSized runs the service as the daemon does with a
// -max-message-bytes of maxMsg: gRPC's own limit a little above it, the
// size interceptor at it.
func serveSized(t *testing.T, cfg Config, maxMsg int64) aflight.Client {
	t.Helper()
	cfg.MaxMessageBytes = maxMsg
	srv := grpc.NewServer(grpc.MaxRecvMsgSize(GRPCRecvLimit(maxMsg)), grpc.ChainStreamInterceptor(MessageSizeInterceptor(maxMsg)))
	aflight.RegisterFlightServiceServer(srv, NewService(cfg))
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(lis)
	t.Cleanup(srv.Stop)
	c, err := aflight.NewClientWithMiddleware(lis.Addr().String(), nil, nil, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallSendMsgSize(1<<30)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func TestServerInfo(t *testing.T) {
	ctx := context.Background()
	c := serveSized(t, Config{Store: storage.NewMem(), MaxPutBytes: 8 << 20, MaxFragmentBytes: 1 << 20, MaxConcurrentStreams: 10, Version: "v9.9.9", SQL: true}, 4<<20)
	for _, body := range []string{"", "{}"} {
		raw, err := action(ctx, c, "server_info", body)
		if err != nil {
			t.Fatalf("body %q: %v", body, err)
		}
		var got ServerInfo
		if err := json.Unmarshal(raw, &got); err != nil {
			t.Fatal(err)
		}
		want := map[string]int64{
			"max_message_bytes": 4 << 20, "max_put_bytes": 8 << 20, "max_fragment_bytes": 1 << 20,
			"max_ticket_bytes": query.MaxQueryBytes, "max_action_body_bytes": maxActionBody, "max_ranges_per_dimension": query.MaxRanges,
			"max_batch_rows": query.MaxBatchRows, "max_partitions": query.MaxPartitions, "max_queries": 10, "max_queries_per_peer": 5,
		}
		for k, v := range want {
			if got.Limits[k] != v {
				t.Errorf("limits[%s] = %d, want %d", k, got.Limits[k], v)
			}
		}
		if len(got.Limits) != len(want) {
			t.Errorf("limits %v: want exactly %d keys", got.Limits, len(want))
		}
		if got.Version != "v9.9.9" || got.Protocol != 1 {
			t.Errorf("version %q protocol %d", got.Version, got.Protocol)
		}
		for _, f := range []string{"staged_writes", "sql", "b2nd", "aggregates", "conditions"} {
			if !slices.Contains(got.Features, f) {
				t.Errorf("features %v lack %q", got.Features, f)
			}
		}
		if slices.Contains(got.Features, "encryption") || slices.Contains(got.Features, "cluster") {
			t.Errorf("features %v name what this daemon lacks", got.Features)
		}
	}
	if _, err := action(ctx, c, "server_info", `{"x": 1}`); status.Code(err) != codes.InvalidArgument {
		t.Errorf("server_info with a body: %v", err)
	}
}

func TestGRPCRecvLimit(t *testing.T) {
	for _, tc := range []struct {
		limit int64
		want  int
	}{
		{1 << 20, 5 << 20},
		{4 << 20, 8 << 20},
		{64 << 20, 96 << 20},
		{4 << 30, 1<<31 - 1},
	} {
		if got := GRPCRecvLimit(tc.limit); got != tc.want {
			t.Errorf("GRPCRecvLimit(%d) = %d, want %d", tc.limit, got, tc.want)
		}
	}
}

// A message over -max-message-bytes and a write over -max-put-bytes are
// refused with RESOURCE_EXHAUSTED, naming the flag and the client option;
// a write under both goes through.
func TestSizeErrorsNameTheFlags(t *testing.T) {
	ctx := context.Background()
	st := storage.NewMem()
	s, err := schema.FromJSON([]byte(`{"type":"sparse","dimensions":[{"name":"k","type":"int64","domain":[0,1000000],"tile":1000}],
		"attributes":[{"name":"s","type":"string_utf8","cell_val_num":"var"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if err := writer.CreateArray(ctx, st, "a", s); err != nil {
		t.Fatal(err)
	}
	c := serveSized(t, Config{Store: st, MaxPutBytes: 3 << 20}, 1<<20)
	path := &aflight.FlightDescriptor{Type: aflight.DescriptorPATH, Path: []string{"a"}}
	batch := func(rows, width int) ([]int32, []string) {
		ks, ss := make([]int32, rows), make([]string, rows)
		for i := range ks {
			ks[i], ss[i] = int32(i), strings.Repeat("x", width)
		}
		return ks, ss
	}
	for _, tc := range []struct {
		name       string
		rows, wide int
		code       codes.Code
		want       []string
	}{
		{"under both", 100, 1000, codes.OK, nil},
		// 1.2 MiB: above the 1 MiB flag, below gRPC's own 5 MiB.
		{"message over -max-message-bytes", 1200, 1024, codes.ResourceExhausted, []string{"exceeds -max-message-bytes (1.0 MiB)", "max_batch_bytes", "server_info"}},
		// 4.5 MiB: the interceptor's error, not gRPC's.
		{"message just under gRPC's limit", 4600, 1024, codes.ResourceExhausted, []string{"-max-message-bytes", "max_batch_bytes"}},
	} {
		ks, ss := batch(tc.rows, tc.wide)
		rec := keyedStrings(ks, ss)
		_, err := doPut(ctx, c, path, rec)
		rec.Release()
		if status.Code(err) != tc.code {
			t.Fatalf("%s: %v, want %v", tc.name, err, tc.code)
		}
		for _, w := range tc.want {
			if !strings.Contains(status.Convert(err).Message(), w) {
				t.Errorf("%s: %q lacks %q", tc.name, status.Convert(err).Message(), w)
			}
		}
	}

	// Over -max-put-bytes in messages each under the message limit.
	stream, err := c.DoPut(ctx)
	if err != nil {
		t.Fatal(err)
	}
	w := aflight.NewRecordWriter(stream)
	w.SetFlightDescriptor(path)
	ks, ss := batch(800, 1024)
	rec := keyedStrings(ks, ss)
	defer rec.Release()
	for i := 0; i < 6; i++ {
		if err := w.Write(rec); err != nil {
			break
		}
	}
	w.Close()
	stream.CloseSend()
	_, err = stream.Recv()
	msg := status.Convert(err).Message()
	if status.Code(err) != codes.ResourceExhausted || !strings.Contains(msg, "exceeds -max-put-bytes") ||
		!strings.Contains(msg, "stage writes above this size automatically") || !strings.Contains(msg, "3.0 MiB") {
		t.Errorf("over -max-put-bytes: %v", err)
	}
}
