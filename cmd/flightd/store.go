package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	"github.com/tileflight/tileflight/storage"
	"github.com/tileflight/tileflight/storage/s3"
)

// s3Flags are the object-store settings -data s3://bucket/prefix uses;
// credentials come from the standard AWS environment and files.
type s3Flags struct {
	endpoint    string
	region      string
	pathStyle   bool
	maxAttempts int
	timeout     time.Duration
}

func (f *s3Flags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.endpoint, "s3-endpoint", "", "S3 endpoint URL for -data s3://... on an S3-compatible server (http://127.0.0.1:9000); default AWS, or AWS_ENDPOINT_URL_S3")
	fs.StringVar(&f.region, "s3-region", "", "S3 region (default AWS_REGION or the AWS config's, else us-east-1)")
	fs.BoolVar(&f.pathStyle, "s3-path-style", false, "address the bucket in the path (host/bucket/key), as MinIO and most self-hosted servers want")
	fs.IntVar(&f.maxAttempts, "s3-max-attempts", 6, "tries per S3 request; throttling, 5xx, stalls and cut bodies are retried with backoff")
	fs.DurationVar(&f.timeout, "s3-timeout", 60*time.Second, "longest one S3 request attempt (body included) may take before it is retried")
}

func (f *s3Flags) options(bucket, prefix string) s3.Options {
	return s3.Options{Bucket: bucket, Prefix: prefix, Endpoint: f.endpoint, Region: f.region, PathStyle: f.pathStyle,
		MaxAttempts: f.maxAttempts, AttemptTimeout: f.timeout}
}

// openStore opens -data: an s3:// URL or a local directory (created if
// missing). close releases it.
func openStore(ctx context.Context, data string, f *s3Flags) (storage.Store, func(), error) {
	if s3.IsURL(data) {
		bucket, prefix, err := s3.ParseURL(data)
		if err != nil {
			return nil, nil, err
		}
		st, err := s3.Open(ctx, f.options(bucket, prefix))
		if err != nil {
			return nil, nil, err
		}
		return st, func() {}, nil
	}
	if strings.Contains(data, "://") {
		return nil, nil, fmt.Errorf("%q: only local directories and s3://bucket/prefix are supported", data)
	}
	if err := os.MkdirAll(data, 0o755); err != nil {
		return nil, nil, fmt.Errorf("data directory: %w", err)
	}
	st, err := storage.NewLocal(data)
	if err != nil {
		return nil, nil, fmt.Errorf("data directory %s: %w", data, err)
	}
	return st, func() { st.Close() }, nil
}

// openArrayPath opens the store holding the array at p (a local path or
// s3://bucket/prefix/array) and returns the array's key in it.
func openArrayPath(ctx context.Context, p string, f *s3Flags) (storage.Store, string, func(), error) {
	if s3.IsURL(p) {
		bucket, prefix, err := s3.ParseURL(p)
		if err != nil {
			return nil, "", nil, err
		}
		if prefix == "" {
			return nil, "", nil, fmt.Errorf("%q: name an array (s3://bucket/prefix/array)", p)
		}
		dir, name := path.Split(prefix)
		st, err := s3.Open(ctx, f.options(bucket, strings.TrimSuffix(dir, "/")))
		if err != nil {
			return nil, "", nil, err
		}
		return st, name, func() {}, nil
	}
	abs, err := filepath.Abs(p)
	if err != nil {
		return nil, "", nil, err
	}
	st, err := storage.NewLocal(filepath.Dir(abs))
	if err != nil {
		return nil, "", nil, err
	}
	return st, filepath.Base(abs), func() { st.Close() }, nil
}

// setFsync applies -fsync to a local data directory (an S3 store's
// objects are durable once written, whatever the flag).
func setFsync(st storage.Store, policy string) error {
	p, err := storage.ParseSyncPolicy(policy)
	if err != nil {
		return fmt.Errorf("-fsync: %w", err)
	}
	if l, ok := st.(*storage.Local); ok {
		l.SetSync(p)
	}
	return nil
}
