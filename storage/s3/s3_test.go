package s3_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tileflight/tileflight/errkind"
	"github.com/tileflight/tileflight/internal/s3test"
	"github.com/tileflight/tileflight/storage"
	"github.com/tileflight/tileflight/storage/s3"
)

func TestMain(m *testing.M) {
	code := m.Run()
	s3test.Stop()
	os.Exit(code)
}

func TestParseURL(t *testing.T) {
	for _, c := range []struct {
		in, bucket, prefix string
		ok                 bool
	}{
		{"s3://b", "b", "", true},
		{"s3://b/", "b", "", true},
		{"s3://b/p/q", "b", "p/q", true},
		{"s3://b/p/q/", "b", "p/q", true},
		{"s3:///p", "", "", false},
		{"s3://b/a/../c", "", "", false},
		{"s3://b/a//c", "", "", false},
		{"s3://b/p?x=1", "", "", false},
		{"s3://u@b/p", "", "", false},
		{"http://b/p", "", "", false},
		{"/data", "", "", false},
	} {
		b, p, err := s3.ParseURL(c.in)
		if (err == nil) != c.ok || b != c.bucket || p != c.prefix {
			t.Errorf("ParseURL(%q) = %q, %q, %v", c.in, b, p, err)
		}
	}
}

func FuzzParseURL(f *testing.F) {
	for _, s := range []string{"s3://b/p", "s3://b", "s3://b/a/../c", "s3://%zz", "s3://b/p?q#f"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		b, p, err := s3.ParseURL(s)
		if err != nil {
			return
		}
		if b == "" || strings.HasPrefix(p, "/") || strings.HasSuffix(p, "/") {
			t.Fatalf("ParseURL(%q) = %q, %q", s, b, p)
		}
		if p != "" {
			if _, err := storage.CleanKey(p); err != nil {
				t.Fatalf("ParseURL(%q) prefix %q: %v", s, p, err)
			}
		}
	})
}

// faultProxy sits between the store and moto and misbehaves on demand:
// fault is asked about every request and answers what to do with it.
type faultProxy struct {
	target string
	fault  func(r *http.Request, n int64) string // "", "503", "slowdown", "truncate", "stall"
	count  atomic.Int64
	gets   atomic.Int64
}

func (p *faultProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	n := p.count.Add(1)
	if r.Method == http.MethodGet && r.URL.Query().Get("list-type") == "" {
		p.gets.Add(1)
	}
	action := ""
	if p.fault != nil {
		action = p.fault(r, n)
	}
	switch action {
	case "503":
		w.WriteHeader(http.StatusServiceUnavailable)
		io.WriteString(w, `<?xml version="1.0"?><Error><Code>ServiceUnavailable</Code><Message>injected</Message></Error>`)
		return
	case "slowdown":
		w.WriteHeader(http.StatusServiceUnavailable)
		io.WriteString(w, `<?xml version="1.0"?><Error><Code>SlowDown</Code><Message>injected</Message></Error>`)
		return
	case "quota":
		w.WriteHeader(http.StatusForbidden)
		io.WriteString(w, `<?xml version="1.0"?><Error><Code>QuotaExceeded</Code><Message>injected</Message></Error>`)
		return
	case "full":
		w.WriteHeader(http.StatusInsufficientStorage)
		io.WriteString(w, `<?xml version="1.0"?><Error><Code>XMinioStorageFull</Code><Message>injected</Message></Error>`)
		return
	case "stall":
		select {
		case <-time.After(5 * time.Second):
		case <-r.Context().Done():
		}
		return
	}
	body, _ := io.ReadAll(r.Body)
	req, _ := http.NewRequestWithContext(r.Context(), r.Method, p.target+r.URL.RequestURI(), bytes.NewReader(body))
	req.Header = r.Header.Clone()
	req.Host = r.Host
	req.ContentLength = int64(len(body))
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		w.WriteHeader(http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	for k, v := range resp.Header {
		w.Header()[k] = v
	}
	w.Header().Set("Content-Length", strconv.Itoa(len(data)))
	w.WriteHeader(resp.StatusCode)
	if action == "truncate" && len(data) > 1 {
		w.Write(data[:len(data)/2])
		if f, ok := w.(http.Flusher); ok {
			f.Flush()
		}
		panic(http.ErrAbortHandler) // the connection drops mid-body
	}
	w.Write(data)
}

func newProxied(t *testing.T, fault func(r *http.Request, n int64) string, tweak func(*s3.Options)) (*s3.Store, *faultProxy, string) {
	t.Helper()
	ep := s3test.Endpoint(t)
	bucket := s3test.NewBucket(t)
	p := &faultProxy{target: ep}
	srv := httptest.NewServer(p)
	t.Cleanup(srv.Close)
	opt := s3.Options{Bucket: bucket, Prefix: "x", Endpoint: srv.URL, Region: s3test.Region, PathStyle: true,
		MaxBackoff: 50 * time.Millisecond, AttemptTimeout: 2 * time.Second}
	if tweak != nil {
		tweak(&opt)
	}
	st, err := s3.Open(context.Background(), opt)
	if err != nil {
		t.Fatal(err)
	}
	p.fault = fault
	proxies.Store(st, p)
	return st, p, bucket
}

func isGet(r *http.Request) bool {
	return r.Method == http.MethodGet && r.URL.Query().Get("list-type") == ""
}

func TestFaults(t *testing.T) {
	ctx := context.Background()
	data := bytes.Repeat([]byte("0123456789abcdef"), 1<<14) // 256 KiB
	cases := []struct {
		name  string
		fault func(failed *atomic.Int64) func(r *http.Request, n int64) string
		want  error // nil: the read succeeds after retries
	}{
		{"503 twice then fine", firstN(2, "503"), nil},
		{"SlowDown (throttling) twice then fine", firstN(2, "slowdown"), nil},
		{"body truncated twice then fine", firstN(2, "truncate"), nil},
		{"stalled once then fine", firstN(1, "stall"), nil},
		{"503 forever is Unavailable", always("503"), storage.ErrUnavailable},
		{"truncated forever is a short read", always("truncate"), io.ErrUnexpectedEOF},
	}
	for _, c := range cases {
		for _, op := range []string{"get", "range-small", "range-large"} {
			t.Run(c.name+"/"+op, func(t *testing.T) {
				var failed atomic.Int64
				st, _, _ := newProxied(t, nil, func(o *s3.Options) {
					o.MaxAttempts = 4
					o.AttemptTimeout = 500 * time.Millisecond
					o.PartSize = 64 << 10
				})
				if err := st.Put(ctx, "obj", data); err != nil {
					t.Fatal(err)
				}
				setFault(st, c.fault(&failed))
				var got, want []byte
				var err error
				switch op {
				case "get":
					got, err = st.Get(ctx, "obj")
					want = data
				case "range-small":
					got, err = st.GetRange(ctx, "obj", 1000, 333)
					want = data[1000:1333]
				case "range-large":
					got, err = st.GetRange(ctx, "obj", 7, 200<<10)
					want = data[7 : 7+200<<10]
				}
				if c.want == nil {
					if err != nil || !bytes.Equal(got, want) {
						t.Fatalf("got %d bytes, %v", len(got), err)
					}
					if failed.Load() == 0 {
						t.Fatal("no fault was injected")
					}
					return
				}
				if !errors.Is(err, c.want) {
					t.Fatalf("want %v, got %v", c.want, err)
				}
				if !strings.Contains(err.Error(), "obj") {
					t.Fatalf("error does not name the key: %v", err)
				}
			})
		}
	}
}

// proxies maps a store to its fault proxy, so that a case can switch the
// fault on after its setup went through cleanly.
var proxies sync.Map

func setFault(st *s3.Store, f func(r *http.Request, n int64) string) {
	p, _ := proxies.Load(st)
	p.(*faultProxy).fault = f
}

func firstN(n int64, action string) func(*atomic.Int64) func(*http.Request, int64) string {
	return func(failed *atomic.Int64) func(*http.Request, int64) string {
		return func(r *http.Request, _ int64) string {
			if isGet(r) && failed.Load() < n {
				failed.Add(1)
				return action
			}
			return ""
		}
	}
}

func always(action string) func(*atomic.Int64) func(*http.Request, int64) string {
	return func(failed *atomic.Int64) func(*http.Request, int64) string {
		return func(r *http.Request, _ int64) string {
			if isGet(r) {
				failed.Add(1)
				return action
			}
			return ""
		}
	}
}

// TestPutFailsWhole: a PUT the server keeps refusing fails, and leaves
// neither the new object nor a part of it.
func TestPutFailsWhole(t *testing.T) {
	ctx := context.Background()
	st, _, _ := newProxied(t, nil, func(o *s3.Options) { o.MaxAttempts = 3 })
	if err := st.Put(ctx, "a/old", []byte("old")); err != nil {
		t.Fatal(err)
	}
	setFault(st, func(r *http.Request, _ int64) string {
		if r.Method == http.MethodPut {
			return "503"
		}
		return ""
	})
	err := st.Put(ctx, "a/new", bytes.Repeat([]byte("n"), 1000))
	if !errors.Is(err, storage.ErrUnavailable) {
		t.Fatalf("want ErrUnavailable, got %v", err)
	}
	setFault(st, nil)
	if _, err := st.Stat(ctx, "a/new"); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("failed put left an object: %v", err)
	}
}

// TestCoalescing: many small reads of nearby tiles, made concurrently as
// the reader makes them, cost one GET per block, not one per read.
func TestCoalescing(t *testing.T) {
	ctx := context.Background()
	const block = 256 << 10
	st, p, _ := newProxied(t, nil, func(o *s3.Options) { o.BlockSize = block })
	data := make([]byte, 4*block)
	for i := range data {
		data[i] = byte(i * 7)
	}
	if err := st.Put(ctx, "frag/a0.tdb", data); err != nil {
		t.Fatal(err)
	}
	p.gets.Store(0)
	const tile = 4 << 10
	var wg sync.WaitGroup
	errs := make(chan error, len(data)/tile)
	for off := 0; off < len(data); off += tile {
		wg.Add(1)
		go func() {
			defer wg.Done()
			b, err := st.GetRange(ctx, "frag/a0.tdb", int64(off), tile)
			if err == nil && !bytes.Equal(b, data[off:off+tile]) {
				err = errors.New("wrong bytes")
			}
			if err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if n := p.gets.Load(); n != 4 {
		t.Fatalf("%d tile reads took %d GETs, want 4 (one per block)", len(data)/tile, n)
	}
	// A range across a block boundary, and one running past the end.
	if b, err := st.GetRange(ctx, "frag/a0.tdb", block-10, 20); err != nil || !bytes.Equal(b, data[block-10:block+10]) {
		t.Fatalf("straddling read: %v", err)
	}
	if _, err := st.GetRange(ctx, "frag/a0.tdb", int64(len(data))-10, 20); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("read past the end: %v", err)
	}
	if _, err := st.GetRange(ctx, "frag/a0.tdb", int64(len(data))+block, 20); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("read past the end: %v", err)
	}
	// A Put through the store replaces what the blocks held.
	if err := st.Put(ctx, "frag/a0.tdb", bytes.Repeat([]byte{9}, 100)); err != nil {
		t.Fatal(err)
	}
	if b, err := st.GetRange(ctx, "frag/a0.tdb", 0, 10); err != nil || !bytes.Equal(b, bytes.Repeat([]byte{9}, 10)) {
		t.Fatalf("read after replace: %v %v", b, err)
	}
}

// TestMaxObjectBytes: a whole-object read is bounded.
func TestMaxObjectBytes(t *testing.T) {
	ctx := context.Background()
	st := s3test.Open(t, "", func(o *s3.Options) { o.MaxObjectBytes = 100 })
	if err := st.Put(ctx, "big", make([]byte, 101)); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Get(ctx, "big"); err == nil || !strings.Contains(err.Error(), "limit") {
		t.Fatalf("want the limit named, got %v", err)
	}
}

func TestOpenFailsFast(t *testing.T) {
	s3test.Endpoint(t)
	_, err := s3.Open(context.Background(), s3.Options{Bucket: "no-such-bucket-here", Endpoint: s3test.Endpoint(t), PathStyle: true, MaxAttempts: 1})
	if err == nil {
		t.Fatal("opened a missing bucket")
	}
}

// A store out of quota or capacity refuses a Put as ResourceExhausted
// saying the storage is full; one that throttles past every retry is
// Unavailable. Neither is left unclassified (Internal).
func TestPutQuotaAndThrottling(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		action string
		kind   error
		msg    string
	}{
		{"quota", errkind.ResourceExhausted, "storage is full"},
		{"full", errkind.ResourceExhausted, "storage is full"},
		{"slowdown", storage.ErrUnavailable, "throttling"},
		{"503", storage.ErrUnavailable, ""},
	}
	for _, c := range cases {
		t.Run(c.action, func(t *testing.T) {
			st, _, _ := newProxied(t, func(r *http.Request, _ int64) string {
				if r.Method == http.MethodPut {
					return c.action
				}
				return ""
			}, func(o *s3.Options) { o.MaxAttempts = 2 })
			err := st.Put(ctx, "obj", []byte("data"))
			if !errors.Is(err, c.kind) || !strings.Contains(err.Error(), c.msg) {
				t.Fatalf("got %v, want %v saying %q", err, c.kind, c.msg)
			}
		})
	}
}
