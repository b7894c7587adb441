package s3_test

import (
	"context"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/tileflight/tileflight/internal/s3test"
	"github.com/tileflight/tileflight/storage/s3"
)

// authRecorder forwards to moto and remembers the access key ids that
// signed the requests (moto itself does not check signatures).
type authRecorder struct {
	fp   *faultProxy
	mu   sync.Mutex
	keys map[string]bool
}

func (a *authRecorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if h := r.Header.Get("Authorization"); h != "" {
		if i := strings.Index(h, "Credential="); i >= 0 {
			k, _, _ := strings.Cut(h[i+len("Credential="):], "/")
			a.mu.Lock()
			a.keys[k] = true
			a.mu.Unlock()
		}
	}
	a.fp.ServeHTTP(w, r)
}

// TestTLSAndSharedCredentials: an https endpoint whose certificate is
// trusted through AWS_CA_BUNDLE, and credentials taken from a shared
// credentials file and profile instead of the environment.
func TestTLSAndSharedCredentials(t *testing.T) {
	ep := s3test.Endpoint(t)
	bucket := s3test.NewBucket(t)
	rec := &authRecorder{fp: &faultProxy{target: ep}, keys: map[string]bool{}}
	srv := httptest.NewTLSServer(rec)
	defer srv.Close()
	dir := t.TempDir()
	ca := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	creds := filepath.Join(dir, "credentials")
	if err := os.WriteFile(creds, []byte("[tf-test]\naws_access_key_id = AKIDFROMFILE\naws_secret_access_key = secretfromfile\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for k, v := range map[string]string{
		"AWS_CA_BUNDLE": ca, "AWS_SHARED_CREDENTIALS_FILE": creds, "AWS_PROFILE": "tf-test",
		"AWS_CONFIG_FILE":   filepath.Join(dir, "no-config"),
		"AWS_ACCESS_KEY_ID": "", "AWS_SECRET_ACCESS_KEY": "",
	} {
		old, had := os.LookupEnv(k)
		if v == "" {
			os.Unsetenv(k)
		} else {
			os.Setenv(k, v)
		}
		defer func() {
			if had {
				os.Setenv(k, old)
			} else {
				os.Unsetenv(k)
			}
		}()
	}
	ctx := context.Background()
	st, err := s3.Open(ctx, s3.Options{Bucket: bucket, Endpoint: srv.URL, Region: s3test.Region, PathStyle: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Put(ctx, "k", []byte("over TLS")); err != nil {
		t.Fatal(err)
	}
	if b, err := st.Get(ctx, "k"); err != nil || string(b) != "over TLS" {
		t.Fatalf("got %q, %v", b, err)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.keys) != 1 || !rec.keys["AKIDFROMFILE"] {
		t.Fatalf("requests signed with %v, want only the file's AKIDFROMFILE", rec.keys)
	}
	// Without the CA bundle the server's certificate is refused.
	os.Setenv("AWS_CA_BUNDLE", filepath.Join(dir, "missing.pem"))
	if _, err := s3.Open(ctx, s3.Options{Bucket: bucket, Endpoint: srv.URL, Region: s3test.Region, PathStyle: true, MaxAttempts: 1}); err == nil {
		t.Fatal("opened with a CA bundle that does not exist")
	}
	os.Unsetenv("AWS_CA_BUNDLE")
	if _, err := s3.Open(ctx, s3.Options{Bucket: bucket, Endpoint: srv.URL, Region: s3test.Region, PathStyle: true, MaxAttempts: 1}); err == nil {
		t.Fatal("trusted a self-signed certificate without the bundle")
	}
}
