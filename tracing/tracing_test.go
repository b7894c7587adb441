package tracing

import (
	"context"
	"strings"
	"testing"

	"github.com/tileflight/tileflight/storage"
)

func TestEndpointOptions(t *testing.T) {
	for _, tc := range []struct {
		ep      string
		wantErr string
	}{
		{"127.0.0.1:4317", ""},
		{"collector.local:4317", ""},
		{"[::1]:4317", ""},
		{"http://127.0.0.1:4317", ""},
		{"https://otel.example.com:443", ""},
		{"127.0.0.1", "want HOST:PORT"},
		{":4317", "want HOST:PORT"},
		{"ftp://127.0.0.1:4317", "want HOST:PORT"},
		{"http://", "want HOST:PORT"},
		{"https://otel.example.com", "needs a port"},
	} {
		_, err := endpointOptions(tc.ep)
		if tc.wantErr == "" && err != nil {
			t.Errorf("%q: %v", tc.ep, err)
		}
		if tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), "-otlp-endpoint")) {
			t.Errorf("%q: error %v, want one naming -otlp-endpoint with %q", tc.ep, err, tc.wantErr)
		}
	}
}

func FuzzEndpointOptions(f *testing.F) {
	for _, s := range []string{"127.0.0.1:4317", "http://h:1", "https://[::1]:4317", "://", "h:"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, ep string) {
		opts, err := endpointOptions(ep)
		if (err == nil) == (opts == nil) {
			t.Fatalf("%q: options %v with error %v", ep, opts, err)
		}
	})
}

// Off (a nil Provider), nothing is wrapped and nothing is added to the
// gRPC server; Start outside a recording span starts nothing.
func TestOffIsNothing(t *testing.T) {
	var p *Provider
	st := storage.NewMem()
	if p.WrapStore(st) != storage.Store(st) || p.ServerOptions() != nil || p.Shutdown(context.Background()) != nil {
		t.Fatal("a nil Provider changed something")
	}
	p, err := Setup(context.Background(), Config{})
	if p != nil || err != nil {
		t.Fatalf("Setup without an endpoint: %v %v", p, err)
	}
	ctx := context.Background()
	got, span := Start(ctx, "x")
	if got != ctx || span.IsRecording() {
		t.Fatal("Start under no span started one")
	}
}

// The wrapper keeps the optional interfaces of what it wraps.
func TestWrapStoreKeepsInterfaces(t *testing.T) {
	p := &Provider{}
	local, err := storage.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range []storage.Store{storage.NewMem(), local} {
		w := p.WrapStore(st)
		_, innerRR := st.(storage.RangeReader)
		_, innerMap := st.(storage.Mapper)
		_, rr := w.(storage.RangeReader)
		_, m := w.(storage.Mapper)
		if rr != innerRR || m != innerMap {
			t.Errorf("%T: RangeReader %v Mapper %v, wrapped %v %v", st, innerRR, innerMap, rr, m)
		}
		if _, ok := w.(storage.TempCleaner); !ok {
			t.Errorf("%T wrapped is not a TempCleaner", st)
		}
		if c, ok := w.(storage.Creator); !ok {
			t.Errorf("%T wrapped is not a Creator", st)
		} else if err := c.Create(context.Background(), "lease", []byte("1")); err != nil {
			t.Errorf("%T: Create: %v", st, err)
		}
		if _, ok := w.(storage.DirPutter); !ok {
			t.Errorf("%T wrapped is not a DirPutter", st)
		}
		if err := storage.PutDir(context.Background(), w, "d", []storage.File{{Name: "x", Data: []byte("1")}}); err != nil {
			t.Errorf("%T: PutDir: %v", st, err)
		}
		if err := w.Put(context.Background(), "a/b", []byte("xyz")); err != nil {
			t.Fatal(err)
		}
		b, err := w.GetRange(context.Background(), "a/b", 1, 2)
		if err != nil || string(b) != "yz" {
			t.Errorf("%T: GetRange %q %v", st, b, err)
		}
	}
}

// The cost of a span where tracing is off: what each encoded batch pays.
func BenchmarkStartOff(b *testing.B) {
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		_, span := Start(ctx, "encode", KeyBytes.Int64(1))
		span.End()
	}
}
