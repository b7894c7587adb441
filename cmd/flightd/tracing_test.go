package main

import (
	"bytes"
	"context"
	"encoding/hex"
	"net"
	"sync"
	"testing"
	"time"

	aflight "github.com/apache/arrow-go/v18/arrow/flight"
	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// collector is an in-process OTLP/gRPC trace receiver: it keeps every
// span exported to it, with its resource's attributes.
type collector struct {
	collectortrace.UnimplementedTraceServiceServer
	mu       sync.Mutex
	spans    []*tracepb.Span
	resource map[string]string
}

func (c *collector) Export(_ context.Context, req *collectortrace.ExportTraceServiceRequest) (*collectortrace.ExportTraceServiceResponse, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, rs := range req.ResourceSpans {
		for _, kv := range rs.GetResource().GetAttributes() {
			if c.resource == nil {
				c.resource = map[string]string{}
			}
			c.resource[kv.Key] = kv.Value.GetStringValue()
		}
		for _, ss := range rs.ScopeSpans {
			c.spans = append(c.spans, ss.Spans...)
		}
	}
	return &collectortrace.ExportTraceServiceResponse{}, nil
}

func startCollector(t *testing.T) (*collector, string) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c := &collector{}
	srv := grpc.NewServer()
	collectortrace.RegisterTraceServiceServer(srv, c)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	return c, lis.Addr().String()
}

func spanAttr(s *tracepb.Span, key string) (string, int64, bool) {
	for _, kv := range s.Attributes {
		if kv.Key == key {
			return kv.Value.GetStringValue(), kv.Value.GetIntValue(), true
		}
	}
	return "", 0, false
}

// A DoGet against a daemon with -otlp-endpoint yields, in one trace, the
// call's span and under it plan (with storage reads under it), storage
// reads and encode; shutting down flushes them to the collector.
func TestOTLPTracesOfDoGet(t *testing.T) {
	col, colAddr := startCollector(t)
	for _, endpoint := range []string{colAddr, "http://" + colAddr} {
		t.Run(endpoint, func(t *testing.T) {
			col.mu.Lock()
			col.spans, col.resource = nil, nil
			col.mu.Unlock()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			ready := make(chan string, 1)
			var logs bytes.Buffer
			done := make(chan int, 1)
			go func() {
				done <- runServe(ctx, []string{"-data", t.TempDir(), "-demo", "-listen", "127.0.0.1:0", "-log-format", "json",
					"-otlp-endpoint", endpoint}, &logs, ready)
			}()
			var addr string
			select {
			case addr = <-ready:
			case code := <-done:
				t.Fatalf("exited %d: %s", code, logs.String())
			case <-time.After(20 * time.Second):
				t.Fatal("not ready")
			}
			conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			stream, err := aflight.NewFlightServiceClient(conn).DoGet(ctx, &aflight.Ticket{Ticket: []byte(`{"array": "demo/dense"}`)})
			if err != nil {
				t.Fatal(err)
			}
			msgs := 0
			for {
				if _, err := stream.Recv(); err != nil {
					break
				}
				msgs++
			}
			if msgs < 2 {
				t.Fatalf("DoGet sent %d messages, want a schema and batches", msgs)
			}
			cancel() // shutdown flushes the spans
			select {
			case code := <-done:
				if code != 0 {
					t.Fatalf("exit %d: %s", code, logs.String())
				}
			case <-time.After(20 * time.Second):
				t.Fatal("did not stop")
			}

			col.mu.Lock()
			defer col.mu.Unlock()
			if col.resource["service.name"] != "tileflight" || col.resource["service.version"] == "" {
				t.Errorf("resource %v: want service.name tileflight and a service.version", col.resource)
			}
			var rpc *tracepb.Span
			for _, s := range col.spans {
				if s.Name == "arrow.flight.protocol.FlightService/DoGet" {
					rpc = s
				}
			}
			if rpc == nil {
				t.Fatalf("no DoGet span among %d", len(col.spans))
			}
			ids := map[string]*tracepb.Span{}
			for _, s := range col.spans {
				if bytes.Equal(s.TraceId, rpc.TraceId) {
					ids[hex.EncodeToString(s.SpanId)] = s
				}
			}
			count := map[string]int{}
			var planID []byte
			for _, s := range ids {
				if s.Name == "plan" {
					planID = s.SpanId
					if !bytes.Equal(s.ParentSpanId, rpc.SpanId) {
						t.Errorf("plan's parent is %x, want the DoGet span %x", s.ParentSpanId, rpc.SpanId)
					}
					if a, _, _ := spanAttr(s, "tileflight.array"); a != "demo/dense" {
						t.Errorf("plan's tileflight.array = %q", a)
					}
				}
			}
			for _, s := range ids {
				count[s.Name]++
				switch s.Name {
				case "encode":
					if !bytes.Equal(s.ParentSpanId, rpc.SpanId) {
						t.Errorf("encode's parent is %x, want the DoGet span", s.ParentSpanId)
					}
					if _, rows, ok := spanAttr(s, "tileflight.rows"); !ok || rows <= 0 {
						t.Errorf("encode's tileflight.rows = %d (%v)", rows, ok)
					}
				case "storage.read":
					parent := ids[hex.EncodeToString(s.ParentSpanId)]
					if parent == nil || (parent != rpc && parent.Name != "plan") {
						t.Errorf("storage.read's parent %x is neither plan nor the DoGet", s.ParentSpanId)
					}
					path, _, _ := spanAttr(s, "tileflight.storage.path")
					if len(path) < len("demo/dense/") || path[:len("demo/dense/")] != "demo/dense/" {
						t.Errorf("storage.read path %q: want one relative to the data root, under demo/dense/", path)
					}
					if _, n, ok := spanAttr(s, "tileflight.storage.bytes"); !ok || n <= 0 {
						t.Errorf("storage.read %s: tileflight.storage.bytes = %d (%v)", path, n, ok)
					}
					if parent != nil && bytes.Equal(parent.SpanId, planID) {
						count["storage.read under plan"]++
					}
				}
			}
			for _, name := range []string{"plan", "encode", "storage.read", "storage.read under plan"} {
				if count[name] == 0 {
					t.Errorf("no %s span in the DoGet's trace: %v", name, count)
				}
			}
		})
	}
}

func TestOTLPEndpointRejected(t *testing.T) {
	for _, bad := range []string{"nohostport", "ftp://127.0.0.1:4317", "http://127.0.0.1", ":4317"} {
		var logs bytes.Buffer
		code := runServe(context.Background(), []string{"-data", t.TempDir(), "-listen", "127.0.0.1:0", "-otlp-endpoint", bad}, &logs, nil)
		if code == 0 || !bytes.Contains(logs.Bytes(), []byte("-otlp-endpoint")) {
			t.Errorf("-otlp-endpoint %q: exit %d, log %s", bad, code, logs.String())
		}
	}
}
