// Package s3test starts a real S3-compatible server for tests: moto's
// server (moto[server] from PyPI, pinned in python_tests/requirements.txt)
// from the project's .venv, on a free loopback port, once per test
// process. Tests that need it skip, saying why, only when the venv has no
// moto_server; `make test` always installs it.
package s3test

import (
	"context"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/tileflight/tileflight/storage"
	"github.com/tileflight/tileflight/storage/s3"
)

var (
	once     sync.Once
	endpoint string
	startErr error
	cmd      *exec.Cmd
	buckets  atomic.Int64
)

// Credentials the tests give the AWS SDK (moto accepts any).
const (
	AccessKey = "testing"
	SecretKey = "testing"
	Region    = "us-east-1"
)

// motoPath finds .venv/bin/moto_server above the working directory.
func motoPath() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			p := filepath.Join(dir, ".venv", "bin", "moto_server")
			if _, err := os.Stat(p); err != nil {
				return "", fmt.Errorf("%s not found (run `make setup`, which installs moto[server] from python_tests/requirements.txt)", p)
			}
			return p, nil
		}
		up := filepath.Dir(dir)
		if up == dir {
			return "", fmt.Errorf("no go.mod above the working directory")
		}
		dir = up
	}
}

// SetEnv puts the test credentials in the environment, where the AWS
// SDK's standard chain (which the store uses) finds them.
func SetEnv() {
	os.Setenv("AWS_ACCESS_KEY_ID", AccessKey)
	os.Setenv("AWS_SECRET_ACCESS_KEY", SecretKey)
	os.Setenv("AWS_REGION", Region)
	os.Unsetenv("AWS_PROFILE")
	os.Unsetenv("AWS_SESSION_TOKEN")
}

// Endpoint starts the server if needed and returns its URL; it skips t
// when the venv has no moto_server.
func Endpoint(t testing.TB) string {
	t.Helper()
	once.Do(start)
	if startErr != nil {
		if strings.Contains(startErr.Error(), "not found") {
			t.Skipf("S3 tests need moto: %v", startErr)
		}
		t.Fatalf("starting moto: %v", startErr)
	}
	return endpoint
}

func start() {
	p, err := motoPath()
	if err != nil {
		startErr = err
		return
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		startErr = err
		return
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	SetEnv()
	cmd = exec.Command(p, "-H", "127.0.0.1", "-p", fmt.Sprint(port))
	// The server dies with the test binary even if nobody calls Stop.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	if err := cmd.Start(); err != nil {
		startErr = err
		return
	}
	endpoint = fmt.Sprintf("http://127.0.0.1:%d", port)
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		resp, err := http.Get(endpoint + "/")
		if err == nil {
			resp.Body.Close()
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	cmd.Process.Kill()
	startErr = fmt.Errorf("moto_server did not answer on %s within 30s", endpoint)
}

// Stop ends the server (for TestMain).
func Stop() {
	if cmd != nil && cmd.Process != nil {
		cmd.Process.Kill()
		cmd.Wait()
	}
}

// NewBucket creates a fresh bucket and returns its name.
func NewBucket(t testing.TB) string {
	t.Helper()
	ep := Endpoint(t)
	name := fmt.Sprintf("tf-test-%d-%d", os.Getpid(), buckets.Add(1))
	req, err := http.NewRequest(http.MethodPut, ep+"/"+name, nil)
	if err != nil {
		t.Fatal(err)
	}
	// moto does not check signatures, so a plain PUT creates the bucket.
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("create bucket %s: %s", name, resp.Status)
	}
	return name
}

// Open returns a store on a fresh bucket (under prefix, which may be "").
func Open(t testing.TB, prefix string, tweak func(*s3.Options)) *s3.Store {
	t.Helper()
	opt := s3.Options{Bucket: NewBucket(t), Prefix: prefix, Endpoint: Endpoint(t), Region: Region, PathStyle: true}
	if tweak != nil {
		tweak(&opt)
	}
	st, err := s3.Open(context.Background(), opt)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// UploadDir copies the local directory tree dir into st under prefix
// (as `aws s3 cp --recursive` would), so that arrays written by TileDB on
// disk can be read from the bucket.
func UploadDir(t testing.TB, st storage.Store, dir, prefix string) {
	t.Helper()
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return st.Put(context.Background(), storage.Join(prefix, filepath.ToSlash(rel)), b)
	})
	if err != nil {
		t.Fatalf("upload %s: %v", dir, err)
	}
}

// OpenBucket returns another store on st's bucket, rooted at prefix.
func OpenBucket(t testing.TB, st *s3.Store, prefix string) *s3.Store {
	t.Helper()
	opt := st.Options()
	opt.Prefix = prefix
	sub, err := s3.Open(context.Background(), opt)
	if err != nil {
		t.Fatal(err)
	}
	return sub
}
