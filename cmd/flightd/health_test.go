package main

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/tileflight/tileflight/internal/s3test"
)

func TestMain(m *testing.M) {
	code := m.Run()
	s3test.Stop()
	os.Exit(code)
}

// startWithMetrics runs the daemon with args and a metrics port; it
// returns the metrics base URL and stops the daemon at the test's end.
func startWithMetrics(t *testing.T, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	maddr := freePort(t)
	ready := make(chan string, 1)
	done := make(chan int, 1)
	var logs syncBuffer
	args = append(args, "-listen", "127.0.0.1:0", "-log-format", "json", "-metrics-listen", maddr)
	go func() { done <- runServeOut(ctx, args, io.Discard, &logs, ready) }()
	select {
	case <-ready:
	case code := <-done:
		cancel()
		t.Fatalf("exited %d: %s", code, logs.String())
	case <-time.After(30 * time.Second):
		cancel()
		t.Fatal("not ready")
	}
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Error("daemon did not stop")
		}
	})
	return "http://" + maddr
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestHealthEndpointsLocal: /healthz and /readyz answer 200 on a daemon
// serving a directory, and /metrics carries the build and cache series.
func TestHealthEndpointsLocal(t *testing.T) {
	base := startWithMetrics(t, "-data", t.TempDir())
	for _, p := range []string{"/healthz", "/readyz"} {
		if code, body := get(t, base+p); code != 200 || strings.TrimSpace(body) != "ok" {
			t.Errorf("%s: %d %q", p, code, body)
		}
	}
	ver, _, _ := versionInfo()
	_, body := get(t, base+"/metrics")
	for _, want := range []string{`tileflight_build_info{commit=`, `version="` + ver + `"`, "tileflight_tile_cache_hits_total 0", "tileflight_tile_cache_misses_total 0", "tileflight_metadata_cache_hits_total"} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}

// TestHealthEndpointsS3: on S3 /readyz is 200 while the bucket answers and
// 503, naming the error, once it is gone; /healthz stays 200.
func TestHealthEndpointsS3(t *testing.T) {
	bucket := s3test.NewBucket(t)
	ep := s3test.Endpoint(t)
	base := startWithMetrics(t, "-data", "s3://"+bucket+"/arrays", "-s3-endpoint", ep, "-s3-path-style", "-s3-max-attempts", "1", "-s3-timeout", "2s")
	if code, body := get(t, base+"/readyz"); code != 200 {
		t.Fatalf("/readyz with the bucket: %d %q", code, body)
	}
	req, _ := http.NewRequest(http.MethodDelete, ep+"/"+bucket, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		t.Fatalf("delete bucket: %s", resp.Status)
	}
	code, body := get(t, base+"/readyz")
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "data unreachable") {
		t.Fatalf("/readyz without the bucket: %d %q", code, body)
	}
	if code, _ := get(t, base+"/healthz"); code != 200 {
		t.Fatalf("/healthz: %d", code)
	}
}

// TestReadyzReportsErrors: a failing check is a 503 with its error, and a store that hangs makes /readyz answer 503 within
// readyTimeout rather than hang the probe.
func TestReadyzReportsErrors(t *testing.T) {
	h := readyzHandler(func(ctx context.Context) error { return errors.New("disk on fire") })
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/readyz", nil))
	if rec.Code != 503 || !strings.Contains(rec.Body.String(), "disk on fire") {
		t.Fatalf("%d %q", rec.Code, rec.Body.String())
	}
	start := time.Now()
	h = readyzHandler(func(ctx context.Context) error { <-ctx.Done(); return ctx.Err() })
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/readyz", nil))
	if rec.Code != 503 || time.Since(start) > readyTimeout+time.Second {
		t.Fatalf("hanging store: %d after %v", rec.Code, time.Since(start))
	}
}
