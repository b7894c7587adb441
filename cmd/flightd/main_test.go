package main

import (
	"bytes"
	"context"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/tileflight/tileflight/storage"
	"github.com/tileflight/tileflight/transport/sendconn"
)

func TestFlagsWithEnvironmentFallback(t *testing.T) {
	env := map[string]string{"TILEFLIGHT_DATA": "/env/data", "TILEFLIGHT_LISTEN": "127.0.0.1:1", "TILEFLIGHT_LOG_FORMAT": "json"}
	getenv := func(k string) string { return env[k] }
	c, err := parseServeFlags([]string{"-listen", "127.0.0.1:2"}, &bytes.Buffer{}, getenv)
	if err != nil {
		t.Fatal(err)
	}
	if c.data != "/env/data" || c.listen != "127.0.0.1:2" || c.logFormat != "json" || c.fsync != "always" {
		t.Fatalf("%+v", c)
	}
	if c, err := parseServeFlags([]string{"-fsync", "never"}, &bytes.Buffer{}, getenv); err != nil || c.fsync != "never" {
		t.Fatalf("-fsync never: %+v %v", c, err)
	}
	for _, bad := range [][]string{{"-log-format", "xml"}, {"-tls-cert", "c.pem"}, {"stray"}, {"-fsync", "sometimes"}, {"-fsync", ""}} {
		if _, err := parseServeFlags(bad, &bytes.Buffer{}, getenv); err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
	keyFile := t.TempDir() + "/key"
	if err := os.WriteFile(keyFile, []byte("0123456789abcdeF0123456789abcdeF\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err = parseServeFlags([]string{"-encryption-key-file", keyFile, "-max-fragment-bytes", "4096"}, &bytes.Buffer{}, getenv)
	if err != nil || c.key != "0123456789abcdeF0123456789abcdeF" || c.maxFragBytes != 4096 {
		t.Fatalf("key file: %+v %v", c, err)
	}
	for _, bad := range [][]string{
		{"-encryption-key", "short"},
		{"-encryption-key", "0123456789abcdeF0123456789abcdeF", "-encryption-key-file", keyFile},
		{"-encryption-key-file", keyFile + ".missing"},
		{"-max-fragment-bytes", "0"},
		{"-compact-after", "-1"},
		{"-compact-after", "1"},
		{"-compact-after", "64", "-compact-workers", "0"},
		{"-compact-lease", "1s"},
	} {
		if _, err := parseServeFlags(bad, &bytes.Buffer{}, getenv); err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
	c, err = parseServeFlags([]string{"-compact-after", "64", "-compact-workers", "2", "-compact-lease", "30s"}, &bytes.Buffer{}, getenv)
	if err != nil || c.compactAfter != 64 || c.compactWorkers != 2 || c.compactLease != 30*time.Second {
		t.Fatalf("compaction flags: %+v %v", c, err)
	}
	env["TILEFLIGHT_MEMORY_BUDGET"] = "lots"
	if _, err := parseServeFlags(nil, &bytes.Buffer{}, getenv); err == nil || !strings.Contains(err.Error(), "TILEFLIGHT_MEMORY_BUDGET") {
		t.Errorf("bad environment value: %v", err)
	}
}

func TestServeReadyHealthAndDrain(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan string, 1)
	var logs bytes.Buffer
	done := make(chan int, 1)
	go func() {
		done <- runServe(ctx, []string{"-data", t.TempDir(), "-listen", "127.0.0.1:0", "-log-format", "json"}, &logs, ready)
	}()
	var addr string
	select {
	case addr = <-ready:
	case code := <-done:
		t.Fatalf("exited %d: %s", code, logs.String())
	case <-time.After(10 * time.Second):
		t.Fatal("not ready")
	}
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	resp, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
	if err != nil || resp.Status != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("health: %v %v", resp, err)
	}
	cancel()
	select {
	case code := <-done:
		if code != 0 {
			t.Fatalf("exit %d", code)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("did not stop")
	}
	if !strings.Contains(logs.String(), "grpc://"+addr) {
		t.Fatalf("ready line with grpc://%s missing from logs:\n%s", addr, logs.String())
	}
}

// -zero-copy-send (TILEFLIGHT_ZERO_COPY_SEND) is on by default and, off,
// leaves sendconn out: the daemon's connections are then not Conns.
func TestZeroCopySendFlag(t *testing.T) {
	for _, tc := range []struct {
		args []string
		env  string
		want bool
	}{
		{nil, "", true},
		{[]string{"-zero-copy-send=false"}, "", false},
		{nil, "false", false},
		{[]string{"-zero-copy-send=true"}, "false", true}, // the command line wins
	} {
		getenv := func(k string) string {
			if k == "TILEFLIGHT_ZERO_COPY_SEND" {
				return tc.env
			}
			return ""
		}
		c, err := parseServeFlags(tc.args, &bytes.Buffer{}, getenv)
		if err != nil || c.zeroCopySend != tc.want {
			t.Fatalf("%v with TILEFLIGHT_ZERO_COPY_SEND=%q: zero-copy-send %v (%v), want %v", tc.args, tc.env, c != nil && c.zeroCopySend, err, tc.want)
		}
	}
	for _, on := range []bool{true, false} {
		ctx, cancel := context.WithCancel(context.Background())
		ready := make(chan string, 1)
		done := make(chan int, 1)
		var logs bytes.Buffer
		go func() {
			done <- runServe(ctx, []string{"-data", t.TempDir(), "-listen", "127.0.0.1:0", "-log-format", "json",
				"-zero-copy-send=" + strconv.FormatBool(on)}, &logs, ready)
		}()
		var addr string
		select {
		case addr = <-ready:
		case code := <-done:
			t.Fatalf("exited %d: %s", code, logs.String())
		case <-time.After(10 * time.Second):
			t.Fatal("not ready")
		}
		before := sendconn.Totals().Conns
		conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{}); err != nil {
			t.Fatal(err)
		}
		conn.Close()
		if got, want := sendconn.Totals().Conns-before, map[bool]int64{true: 1, false: 0}[on]; got != want {
			t.Errorf("-zero-copy-send=%v: %d connections served as sendconn.Conns, want %d", on, got, want)
		}
		cancel()
		if code := <-done; code != 0 {
			t.Fatalf("exit %d: %s", code, logs.String())
		}
	}
}

// TestSetFsync: -fsync reaches a local store and an unknown policy is
// refused.
func TestSetFsync(t *testing.T) {
	l, err := storage.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if l.SyncPolicy() != storage.SyncAlways {
		t.Fatalf("a new local store syncs %v, want always", l.SyncPolicy())
	}
	if err := setFsync(l, "never"); err != nil || l.SyncPolicy() != storage.SyncNever {
		t.Fatalf("setFsync never: %v, policy %v", err, l.SyncPolicy())
	}
	if err := setFsync(l, "later"); err == nil || l.SyncPolicy() != storage.SyncNever {
		t.Errorf("-fsync later: %v, policy %v", err, l.SyncPolicy())
	}
	if err := setFsync(storage.NewMem(), "always"); err != nil {
		t.Errorf("a store without a policy: %v", err)
	}
}
