package main

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	aflight "github.com/apache/arrow-go/v18/arrow/flight"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	rpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
)

func TestParseSize(t *testing.T) {
	cases := []struct {
		in   string
		want int64
		ok   bool
	}{
		{"1048576", 1 << 20, true},
		{"0", 0, true},
		{"512MiB", 512 << 20, true},
		{"1GiB", 1 << 30, true},
		{"1 GiB", 1 << 30, true},
		{"1.5GiB", 3 << 29, true},
		{"64KiB", 64 << 10, true},
		{"1GB", 1e9, true},
		{"10MB", 10e6, true},
		{"", 0, false},
		{"-1", 0, false},
		{"-1GiB", 0, false},
		{"lots", 0, false},
		{"1XB", 0, false},
		{"99999999999EiB", 0, false},
	}
	for _, c := range cases {
		got, err := parseSize(c.in)
		if (err == nil) != c.ok || (c.ok && got != c.want) {
			t.Errorf("parseSize(%q) = %d, %v; want %d ok=%v", c.in, got, err, c.want, c.ok)
		}
	}
	for _, n := range []int64{0, 1, 1000, 1024, 64 << 20, 3 << 29, 1 << 30, 5 << 40} {
		back, err := parseSize(formatSize(n))
		if err != nil || back != n {
			t.Errorf("formatSize(%d) = %q parses to %d, %v", n, formatSize(n), back, err)
		}
	}
}

func TestSizesInFlagsAndEnvironment(t *testing.T) {
	env := map[string]string{"TILEFLIGHT_MEMORY_BUDGET": "1GiB", "TILEFLIGHT_MAX_PUT_BYTES": "2048"}
	c, err := parseServeFlags([]string{"-max-fragment-bytes", "64MiB", "-max-message-bytes", "16 MiB"}, &bytes.Buffer{}, func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	if c.memoryBudget != 1<<30 || c.maxPutBytes != 2048 || c.maxFragBytes != 64<<20 || c.maxMessageBytes != 16<<20 {
		t.Fatalf("%+v", c)
	}
	env["TILEFLIGHT_MEMORY_BUDGET"] = "1 GigaParsec"
	if _, err := parseServeFlags(nil, &bytes.Buffer{}, func(k string) string { return env[k] }); err == nil || !strings.Contains(err.Error(), "TILEFLIGHT_MEMORY_BUDGET") {
		t.Fatalf("bad size in environment: %v", err)
	}
}

// TestVersionAndUsageErrors: -version prints the version and exits 0; a
// bad flag is reported once (by the flag package, with the usage), exit 2.
func TestVersionAndUsageErrors(t *testing.T) {
	var out, errb bytes.Buffer
	if code := runServeOut(context.Background(), []string{"-version"}, &out, &errb, nil); code != 0 {
		t.Fatalf("-version: exit %d: %s", code, errb.String())
	}
	if !regexp.MustCompile(`^flightd \S+ \(commit \S+, go`).MatchString(out.String()) {
		t.Fatalf("-version printed %q", out.String())
	}
	out.Reset()
	errb.Reset()
	if code := runServeOut(context.Background(), []string{"-no-such-flag"}, &out, &errb, nil); code != 2 {
		t.Fatalf("bad flag: exit %d", code)
	}
	if n := strings.Count(errb.String(), "no-such-flag"); n != 1 {
		t.Fatalf("the error is printed %d times:\n%s", n, errb.String())
	}
}

func TestConsoleLogsWithoutColourOffTerminal(t *testing.T) {
	var buf bytes.Buffer
	c := &serveConfig{logFormat: "console", logLevel: "info", getenv: func(string) string { return "" }}
	log, err := newLogger(c, &buf)
	if err != nil {
		t.Fatal(err)
	}
	log.Warn().Str("k", "v").Msg("hello")
	if strings.Contains(buf.String(), "\x1b[") || !strings.Contains(buf.String(), "hello") {
		t.Fatalf("console log to a buffer: %q", buf.String())
	}
}

func freePort(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// TestMetricsReflectionAndAccessLog runs the daemon with -metrics-listen
// and checks what an operator relies on: reflection lists the Flight and
// health services, the metrics show the calls made, storage traffic and
// runtime figures, and the access log names the peer.
func TestMetricsReflectionAndAccessLog(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	maddr := freePort(t)
	ready := make(chan string, 1)
	done := make(chan int, 1)
	var logs syncBuffer
	go func() {
		done <- runServeOut(ctx, []string{"-data", t.TempDir(), "-demo", "-listen", "127.0.0.1:0", "-log-format", "json", "-metrics-listen", maddr}, io.Discard, &logs, ready)
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

	// Reflection: the services a grpcurl user would see.
	rs, err := rpb.NewServerReflectionClient(conn).ServerReflectionInfo(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := rs.Send(&rpb.ServerReflectionRequest{MessageRequest: &rpb.ServerReflectionRequest_ListServices{}}); err != nil {
		t.Fatal(err)
	}
	resp, err := rs.Recv()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range resp.GetListServicesResponse().GetService() {
		names = append(names, s.Name)
	}
	for _, want := range []string{"arrow.flight.protocol.FlightService", "grpc.health.v1.Health"} {
		if !strings.Contains(strings.Join(names, " "), want) {
			t.Errorf("reflection lists %v, missing %s", names, want)
		}
	}
	_ = rs.CloseSend()

	// A few calls: a listing and a read.
	fc := aflight.NewFlightServiceClient(conn)
	lf, err := fc.ListFlights(ctx, &aflight.Criteria{})
	if err != nil {
		t.Fatal(err)
	}
	var first *aflight.FlightInfo
	for {
		fi, err := lf.Recv()
		if err != nil {
			break
		}
		if first == nil {
			first = fi
		}
	}
	if first == nil {
		t.Fatal("no demo arrays")
	}
	g, err := fc.DoGet(ctx, first.Endpoint[0].Ticket)
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := g.Recv(); err != nil {
			break
		}
	}

	res, err := http.Get("http://" + maddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	for _, want := range []string{
		`grpc_server_handled_total{grpc_code="OK",grpc_method="ListFlights"`,
		`grpc_server_handling_seconds_bucket{grpc_method="DoGet"`,
		`tileflight_rows_total{direction="out",method="/arrow.flight.protocol.FlightService/DoGet"}`,
		`tileflight_arrow_bytes_total{direction="out"`,
		`tileflight_storage_requests_total{op="get_range",result="ok"}`,
		`tileflight_storage_bytes_total{direction="read"}`,
		`tileflight_metadata_cache_misses_total`,
		`tileflight_memory_budget_in_use_bytes 0`,
		`tileflight_doput_aborted_total 0`,
		`tileflight_streams_running 0`,
		`go_goroutines`,
		`process_open_fds`,
		`process_resident_memory_bytes`,
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	if t.Failed() {
		t.Logf("metrics:\n%s", body)
	}
	cancel()
	<-done
	if !regexp.MustCompile(`"peer":"127\.0\.0\.1:\d+".*"method":"/arrow.flight.protocol.FlightService/DoGet"`).MatchString(logs.String()) {
		t.Errorf("access log without the peer:\n%s", logs.String())
	}
}

// syncBuffer is a bytes.Buffer safe for the daemon's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// FuzzParseSize: any string either fails or gives a non-negative size
// whose printed form reads back the same.
func FuzzParseSize(f *testing.F) {
	for _, s := range []string{"512MiB", "1GiB", "1 GB", "1048576", "1.5GiB", "-1", "", "9999999999999EiB", "0x10", "1e3"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := parseSize(s)
		if err != nil {
			return
		}
		if v < 0 {
			t.Fatalf("%q: %d", s, v)
		}
		if back, err := parseSize(formatSize(v)); err != nil || back != v {
			t.Fatalf("%q = %d prints as %q, which reads back as %d, %v", s, v, formatSize(v), back, err)
		}
	})
}
