// Package s3 is a storage.Store over an S3-compatible object store (AWS S3,
// MinIO, Ceph RGW, R2, moto): s3://bucket/prefix.
//
// It gives the same guarantees and error kinds as the local store: a
// missing object wraps storage.ErrNotFound, a read past the end or a body
// cut short wraps io.ErrUnexpectedEOF (DataLoss above), a malformed key
// storage.ErrInvalidPath. Object stores have no directories, so "a
// directory" is a prefix with keys below it, and the filesystem rules the
// other stores keep (no key below an object, no object over a directory)
// are checked before each Put.
//
// Reads are what this package is about. Small ranged reads (tiles, metadata
// sections) are served from aligned blocks fetched once and shared by every
// nearby read (coalescing: one GET for many tiles); large reads are split
// into parts fetched in parallel; every read is bounded (ranges and the
// whole-object limit) and retried with backoff when the server throttles,
// fails with a 5xx, stalls or cuts a body short. Nothing here relies on
// rename, locking or listing order: S3's single-object PUT is atomic, and
// that is the only consistency the layers above use.
package s3

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"path"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"
	"golang.org/x/sync/errgroup"

	"github.com/tileflight/tileflight/errkind"
	"github.com/tileflight/tileflight/storage"
)

// Options configures a Store. Zero values take the defaults named.
type Options struct {
	// Bucket and Prefix locate the store's root (ParseURL fills them).
	Bucket, Prefix string
	// Endpoint is the S3 endpoint URL for S3-compatible servers
	// (http://127.0.0.1:9000); empty: AWS, or AWS_ENDPOINT_URL_S3 /
	// AWS_ENDPOINT_URL from the environment.
	Endpoint string
	// Region; empty: AWS_REGION / the shared config's, else us-east-1.
	Region string
	// PathStyle addresses buckets as http://host/bucket/key instead of
	// http://bucket.host/key (MinIO, moto and most self-hosted servers).
	PathStyle bool
	// MaxAttempts is how many times one request is tried (default 6).
	MaxAttempts int
	// MaxBackoff caps the wait between attempts (default 5s).
	MaxBackoff time.Duration
	// AttemptTimeout bounds one attempt at one request, body included
	// (default 60s); a stalled server is retried, not waited on forever.
	AttemptTimeout time.Duration
	// BlockSize is the aligned block small ranged reads are served from
	// (default 1 MiB); reads of at least half a block go straight to the
	// server.
	BlockSize int64
	// CacheBytes bounds the blocks kept for nearby reads (default 64 MiB).
	CacheBytes int64
	// PartSize is the largest single GET; larger reads are split into
	// parts fetched in parallel (default 8 MiB).
	PartSize int64
	// Concurrency bounds the GETs in flight at once (default 32).
	Concurrency int
	// MaxObjectBytes bounds a whole-object Get (default 2 GiB).
	MaxObjectBytes int64
	// HTTPClient, if set, replaces the default transport (tests).
	HTTPClient *http.Client
}

func (o *Options) defaults() {
	if o.MaxAttempts <= 0 {
		o.MaxAttempts = 6
	}
	if o.MaxBackoff <= 0 {
		o.MaxBackoff = 5 * time.Second
	}
	if o.AttemptTimeout <= 0 {
		o.AttemptTimeout = 60 * time.Second
	}
	if o.BlockSize <= 0 {
		o.BlockSize = 1 << 20
	}
	if o.CacheBytes <= 0 {
		o.CacheBytes = 64 << 20
	}
	if o.PartSize <= 0 {
		o.PartSize = 8 << 20
	}
	if o.Concurrency <= 0 {
		o.Concurrency = 32
	}
	if o.MaxObjectBytes <= 0 {
		o.MaxObjectBytes = 2 << 30
	}
}

// IsURL reports whether s names an object store rather than a directory.
func IsURL(s string) bool { return strings.HasPrefix(s, "s3://") }

// ParseURL splits s3://bucket/prefix into its bucket and prefix (without
// slashes at either end).
func ParseURL(s string) (bucket, prefix string, err error) {
	u, err := url.Parse(s)
	if err != nil || u.Scheme != "s3" {
		return "", "", fmt.Errorf("%q: want s3://bucket/prefix", s)
	}
	if u.Host == "" {
		return "", "", fmt.Errorf("%q: no bucket", s)
	}
	if u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return "", "", fmt.Errorf("%q: want s3://bucket/prefix (no query, fragment or user)", s)
	}
	prefix = strings.Trim(u.Path, "/")
	if prefix != "" {
		if _, err := storage.CleanKey(prefix); err != nil {
			return "", "", fmt.Errorf("%q: prefix: %w", s, err)
		}
	}
	return u.Host, prefix, nil
}

// Store is a storage.Store over one bucket and prefix.
type Store struct {
	opt    Options
	client *awss3.Client
	root   string // prefix + "/" or ""
	sem    chan struct{}
	blocks *blockCache

	dirMu sync.Mutex
	dirs  map[string]bool // prefixes known to be directories, not objects
}

var _ storage.Store = (*Store)(nil)

// Open connects to the bucket. Credentials come from the standard AWS
// chain: AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY / AWS_SESSION_TOKEN,
// AWS_PROFILE with ~/.aws/credentials and ~/.aws/config, web identity,
// then the instance or container role. Open checks that the bucket is
// reachable so that a wrong endpoint or key fails at start, not at the
// first query.
func Open(ctx context.Context, opt Options) (*Store, error) {
	opt.defaults()
	if opt.Bucket == "" {
		return nil, errors.New("s3: no bucket")
	}
	loads := []func(*config.LoadOptions) error{
		config.WithRetryer(func() aws.Retryer {
			return retry.NewStandard(func(o *retry.StandardOptions) {
				o.MaxAttempts = opt.MaxAttempts
				o.MaxBackoff = opt.MaxBackoff
				// A client-side retry quota would turn a burst of 503s from
				// a busy server into failed queries; backoff is enough.
				o.RateLimiter = ratelimit.None
			})
		}),
	}
	if opt.Region != "" {
		loads = append(loads, config.WithRegion(opt.Region))
	}
	if opt.HTTPClient != nil {
		loads = append(loads, config.WithHTTPClient(opt.HTTPClient))
	} else {
		// The SDK's buildable client, so that AWS_CA_BUNDLE and the
		// shared config's ca_bundle still apply (TLS to private servers).
		loads = append(loads, config.WithHTTPClient(awshttp.NewBuildableClient().
			WithDialerOptions(func(d *net.Dialer) { d.Timeout = 10 * time.Second }).
			WithTransportOptions(func(tr *http.Transport) {
				tr.MaxIdleConns = 4 * opt.Concurrency
				tr.MaxIdleConnsPerHost = 2 * opt.Concurrency
				tr.ResponseHeaderTimeout = opt.AttemptTimeout
			})))
	}
	cfg, err := config.LoadDefaultConfig(ctx, loads...)
	if err != nil {
		return nil, fmt.Errorf("s3: AWS configuration: %w", err)
	}
	if cfg.Region == "" {
		cfg.Region = "us-east-1"
	}
	client := awss3.NewFromConfig(cfg, func(o *awss3.Options) {
		if opt.Endpoint != "" {
			o.BaseEndpoint = aws.String(opt.Endpoint)
		}
		o.UsePathStyle = opt.PathStyle
		// Ranged GETs carry no whole-object checksum; saying so on every
		// read would flood the log.
		o.DisableLogOutputChecksumValidationSkipped = true
	})
	s := &Store{
		opt: opt, client: client, sem: make(chan struct{}, opt.Concurrency),
		blocks: newBlockCache(opt.CacheBytes), dirs: map[string]bool{},
	}
	if opt.Prefix != "" {
		s.root = strings.Trim(opt.Prefix, "/") + "/"
	}
	if _, err := s.client.HeadBucket(ctx, &awss3.HeadBucketInput{Bucket: aws.String(opt.Bucket)}); err != nil {
		return nil, fmt.Errorf("s3: bucket %q: %w", opt.Bucket, s.classify(err))
	}
	return s, nil
}

// URL names the store as s3://bucket/prefix.
func (s *Store) URL() string { return "s3://" + path.Join(s.opt.Bucket, s.opt.Prefix) }

// String is the URL (for logs and cache keys).
func (s *Store) String() string { return s.URL() }

func (s *Store) objKey(key string) string { return s.root + key }

func (s *Store) dirPrefix(dir string) string {
	if dir == "" {
		return s.root
	}
	return s.root + dir + "/"
}

// acquire takes one of the GET slots, so that a query's many parallel tile
// reads and a large read's parts share a bounded number of connections.
func (s *Store) acquire(ctx context.Context) (func(), error) {
	select {
	case s.sem <- struct{}{}:
		return func() { <-s.sem }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// classify wraps an SDK error in the storage package's kinds.
func (s *Store) classify(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	var nsk *types.NoSuchKey
	var nf *types.NotFound
	if errors.As(err, &nsk) || errors.As(err, &nf) {
		return fmt.Errorf("%w (%v)", storage.ErrNotFound, err)
	}
	var ae smithy.APIError
	if errors.As(err, &ae) {
		switch ae.ErrorCode() {
		case "NoSuchKey", "NotFound":
			return fmt.Errorf("%w (%v)", storage.ErrNotFound, err)
		case "InvalidRange":
			return fmt.Errorf("%w (%v)", io.ErrUnexpectedEOF, err)
		case "NoSuchBucket":
			return fmt.Errorf("%w: no such bucket %q", storage.ErrUnavailable, s.opt.Bucket)
		case "QuotaExceeded", "XMinioAdminBucketQuotaExceeded", "XMinioStorageFull", "InsufficientStorage":
			// The store's equivalents of ENOSPC and EDQUOT (Ceph RGW,
			// MinIO): the write may succeed once space is freed.
			return errkind.Errorf(errkind.ResourceExhausted, "storage is full (S3 quota or capacity): %v", err)
		case "SlowDown", "Throttling", "ThrottlingException", "RequestLimitExceeded", "TooManyRequests", "ServiceUnavailable":
			// Throttled past every retry: the client may retry later.
			return fmt.Errorf("%w: S3 is throttling requests: %v", storage.ErrUnavailable, err)
		}
	}
	if httpStatus(err) == http.StatusInsufficientStorage {
		return errkind.Errorf(errkind.ResourceExhausted, "storage is full (S3 507 Insufficient Storage): %v", err)
	}
	if code := httpStatus(err); code == http.StatusNotFound {
		return fmt.Errorf("%w (%v)", storage.ErrNotFound, err)
	} else if code == http.StatusRequestedRangeNotSatisfiable {
		return fmt.Errorf("%w (%v)", io.ErrUnexpectedEOF, err)
	} else if code == http.StatusForbidden || code == http.StatusUnauthorized {
		return fmt.Errorf("%w: access denied (check the AWS credentials): %v", storage.ErrUnavailable, err)
	} else if code >= 500 || code == http.StatusTooManyRequests {
		return fmt.Errorf("%w: %v", storage.ErrUnavailable, err)
	}
	var ne net.Error
	if errors.As(err, &ne) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		return fmt.Errorf("%w: %v", storage.ErrUnavailable, err)
	}
	var mx *retry.MaxAttemptsError
	if errors.As(err, &mx) {
		return fmt.Errorf("%w: %v", storage.ErrUnavailable, err)
	}
	return err
}

func httpStatus(err error) int {
	var re interface{ HTTPStatusCode() int }
	if errors.As(err, &re) {
		return re.HTTPStatusCode()
	}
	return 0
}

func wrapErr(op, key string, err error) error {
	return fmt.Errorf("storage: %s %q: %w", op, key, err)
}

func ctxErr(ctx context.Context, op, key string) error {
	if err := ctx.Err(); err != nil {
		return wrapErr(op, key, err)
	}
	return nil
}

// errShort marks a body that ended before its Content-Length: retried like
// a 5xx, and reported as io.ErrUnexpectedEOF (DataLoss) when it persists.
var errShort = errors.New("body cut short")

// get issues one GET (whole object when rng is ""), reads the body fully
// under the attempt timeout and retries the failures the SDK's own retryer
// cannot see: a body cut short, a connection reset or a stall mid-body.
// It returns the bytes, the object's total size and its ETag.
func (s *Store) get(ctx context.Context, key, rng string, want int64) ([]byte, int64, string, error) {
	release, err := s.acquire(ctx)
	if err != nil {
		return nil, 0, "", err
	}
	defer release()
	var last error
	for attempt := 0; attempt < s.opt.MaxAttempts; attempt++ {
		if attempt > 0 {
			if err := sleepBackoff(ctx, attempt, s.opt.MaxBackoff); err != nil {
				return nil, 0, "", err
			}
		}
		b, size, etag, err, retryable := s.getOnce(ctx, key, rng, want)
		if err == nil {
			return b, size, etag, nil
		}
		if !retryable || ctx.Err() != nil {
			return nil, 0, "", err
		}
		last = err
	}
	if errors.Is(last, errShort) {
		return nil, 0, "", fmt.Errorf("%w after %d attempts: %v", io.ErrUnexpectedEOF, s.opt.MaxAttempts, last)
	}
	return nil, 0, "", fmt.Errorf("%w after %d attempts: %v", storage.ErrUnavailable, s.opt.MaxAttempts, last)
}

func (s *Store) getOnce(ctx context.Context, key, rng string, want int64) (b []byte, size int64, etag string, err error, retryable bool) {
	actx, cancel := context.WithTimeout(ctx, s.opt.AttemptTimeout)
	defer cancel()
	in := &awss3.GetObjectInput{Bucket: aws.String(s.opt.Bucket), Key: aws.String(s.objKey(key))}
	if rng != "" {
		in.Range = aws.String(rng)
	}
	out, err := s.client.GetObject(actx, in)
	if err != nil {
		if ctx.Err() == nil && actx.Err() != nil {
			return nil, 0, "", fmt.Errorf("attempt timed out after %v: %w", s.opt.AttemptTimeout, storage.ErrUnavailable), true
		}
		// The SDK has already retried what it can; what is left is final.
		return nil, 0, "", s.classify(err), false
	}
	defer out.Body.Close()
	n := aws.ToInt64(out.ContentLength)
	if out.ContentLength == nil || n < 0 {
		return nil, 0, "", fmt.Errorf("%w: response without a Content-Length", storage.ErrUnavailable), true
	}
	if want >= 0 && n > want {
		return nil, 0, "", fmt.Errorf("server sent %d bytes for a %d-byte range", n, want), false
	}
	if rng == "" && n > s.opt.MaxObjectBytes {
		return nil, 0, "", fmt.Errorf("object of %d bytes is larger than the %d-byte limit on whole-object reads", n, s.opt.MaxObjectBytes), false
	}
	size = n
	if out.ContentRange != nil {
		if total, ok := parseContentRangeTotal(*out.ContentRange); ok {
			size = total
		}
	}
	b = make([]byte, n)
	got, rerr := io.ReadFull(out.Body, b)
	if rerr != nil {
		if ctx.Err() != nil {
			return nil, 0, "", ctx.Err(), false
		}
		if actx.Err() != nil {
			return nil, 0, "", fmt.Errorf("attempt timed out after %v mid-body (%d of %d bytes): %w", s.opt.AttemptTimeout, got, n, storage.ErrUnavailable), true
		}
		return nil, 0, "", fmt.Errorf("%w: %d of %d bytes: %v", errShort, got, n, rerr), true
	}
	return b, size, aws.ToString(out.ETag), nil, false
}

// parseContentRangeTotal reads the total of "bytes a-b/total".
func parseContentRangeTotal(cr string) (int64, bool) {
	i := strings.LastIndexByte(cr, '/')
	if i < 0 || cr[i+1:] == "*" {
		return 0, false
	}
	n, err := strconv.ParseInt(cr[i+1:], 10, 64)
	return n, err == nil && n >= 0
}

func sleepBackoff(ctx context.Context, attempt int, maxWait time.Duration) error {
	d := min(maxWait, time.Duration(50<<min(attempt, 10))*time.Millisecond)
	// Full jitter, so that parallel readers that failed together do not
	// come back together.
	d = time.Duration(float64(d) * (0.5 + 0.5*jitter()))
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Get returns the whole object (at most MaxObjectBytes).
func (s *Store) Get(ctx context.Context, key string) ([]byte, error) {
	if err := ctxErr(ctx, "get", key); err != nil {
		return nil, err
	}
	if _, err := storage.CleanKey(key); err != nil {
		return nil, fmt.Errorf("storage: get: %w", err)
	}
	b, _, _, err := s.get(ctx, key, "", -1)
	if err != nil {
		return nil, wrapErr("get", key, err)
	}
	return b, nil
}

// GetRange returns n bytes at off: from shared blocks when the read is
// small, straight from the server (in parallel parts) when it is large.
func (s *Store) GetRange(ctx context.Context, key string, off, n int64) ([]byte, error) {
	if err := ctxErr(ctx, "get range", key); err != nil {
		return nil, err
	}
	if _, err := storage.CleanKey(key); err != nil {
		return nil, fmt.Errorf("storage: get range: %w", err)
	}
	if off < 0 || n < 0 {
		return nil, fmt.Errorf("storage: %q: invalid range offset %d length %d", key, off, n)
	}
	if n == 0 {
		// Nothing to fetch, but the key must exist and off be inside it.
		e, err := s.Stat(ctx, key)
		if err == nil && e.IsDir {
			err = wrapErr("get range", key, storage.ErrNotFound)
		}
		if err != nil {
			return nil, err
		}
		if off > e.Size {
			return nil, pastEnd(key, off, n, e.Size)
		}
		return []byte{}, nil
	}
	var b []byte
	var err error
	if n >= s.opt.BlockSize/2 {
		b, err = s.getDirect(ctx, key, off, n)
	} else {
		b, err = s.getBlocks(ctx, key, off, n)
	}
	if err != nil {
		return nil, err
	}
	return b, nil
}

func pastEnd(key string, off, n, size int64) error {
	return fmt.Errorf("storage: %q: range [%d, %d) past the end of the %d-byte object: %w", key, off, off+n, size, io.ErrUnexpectedEOF)
}

func rangeHeader(off, n int64) string { return fmt.Sprintf("bytes=%d-%d", off, off+n-1) }

// getDirect reads [off, off+n) in parts of at most PartSize, in parallel.
func (s *Store) getDirect(ctx context.Context, key string, off, n int64) ([]byte, error) {
	buf := make([]byte, n)
	g, gctx := errgroup.WithContext(ctx)
	for p := int64(0); p < n; p += s.opt.PartSize {
		po, pn := off+p, min(s.opt.PartSize, n-p)
		dst := buf[p : p+pn]
		g.Go(func() error {
			b, size, _, err := s.get(gctx, key, rangeHeader(po, pn), pn)
			if err != nil {
				if errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, errShort) {
					return wrapErr("get range", key, fmt.Errorf("range [%d, %d) starts past the end of the object: %w", off, off+n, io.ErrUnexpectedEOF))
				}
				return wrapErr("get range", key, err)
			}
			if int64(len(b)) < pn {
				return pastEnd(key, off, n, size)
			}
			copy(dst, b)
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	return buf, nil
}

// getBlocks serves a small read from the aligned blocks it touches.
func (s *Store) getBlocks(ctx context.Context, key string, off, n int64) ([]byte, error) {
	bs := s.opt.BlockSize
	first, last := off/bs, (off+n-1)/bs
	for try := 0; ; try++ {
		blks := make([]*block, last-first+1)
		g, gctx := errgroup.WithContext(ctx)
		for i := first; i <= last; i++ {
			g.Go(func() error {
				b, err := s.block(gctx, key, i)
				blks[i-first] = b
				return err
			})
		}
		if err := g.Wait(); err != nil {
			return nil, err
		}
		// A range over two blocks must come from one version of the
		// object; if it was replaced between the fetches, fetch again.
		same := true
		for _, b := range blks[1:] {
			// A block past the end (no data, no ETag) has nothing to mix.
			same = same && (b.etag == "" || b.etag == blks[0].etag)
		}
		if !same && try == 0 {
			s.blocks.dropKey(key)
			continue
		}
		if !same {
			return nil, wrapErr("get range", key, fmt.Errorf("%w: the object changed during the read", storage.ErrUnavailable))
		}
		size := blks[0].size
		if off+n > size {
			return nil, pastEnd(key, off, n, size)
		}
		out := make([]byte, n)
		w := int64(0)
		for i, b := range blks {
			start := (first + int64(i)) * bs
			lo := max(off, start) - start
			hi := min(off+n, start+int64(len(b.data))) - start
			w += int64(copy(out[w:], b.data[lo:hi]))
		}
		if w != n {
			return nil, pastEnd(key, off, n, size)
		}
		return out, nil
	}
}

// block returns block i of key, from the cache or fetched once for all
// the reads waiting on it.
func (s *Store) block(ctx context.Context, key string, i int64) (*block, error) {
	return s.blocks.get(ctx, key, i, func(ctx context.Context) (*block, error) {
		bs := s.opt.BlockSize
		b, size, etag, err := s.get(ctx, key, rangeHeader(i*bs, bs), bs)
		if err != nil {
			if errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, errShort) && i > 0 {
				// 416: the block starts past the end. Learn the size so the
				// caller can say how far past.
				e, serr := s.Stat(ctx, key)
				if serr != nil {
					return nil, serr
				}
				return &block{size: e.Size}, nil
			}
			return nil, wrapErr("get range", key, err)
		}
		return &block{data: b, size: size, etag: etag}, nil
	})
}

func (s *Store) headObject(ctx context.Context, key string) (*awss3.HeadObjectOutput, error) {
	out, err := s.client.HeadObject(ctx, &awss3.HeadObjectInput{Bucket: aws.String(s.opt.Bucket), Key: aws.String(s.objKey(key))})
	if err != nil {
		return nil, s.classify(err)
	}
	return out, nil
}

// hasChildren reports whether any key lies below dir.
func (s *Store) hasChildren(ctx context.Context, dir string) (bool, error) {
	out, err := s.client.ListObjectsV2(ctx, &awss3.ListObjectsV2Input{
		Bucket: aws.String(s.opt.Bucket), Prefix: aws.String(s.dirPrefix(dir)), MaxKeys: aws.Int32(1),
	})
	if err != nil {
		return false, s.classify(err)
	}
	return len(out.Contents) > 0, nil
}

// maxKnownDirs bounds the directories Put remembers to have checked.
const maxKnownDirs = 4096

// Put stores the object with one PUT, which S3 makes visible whole or not
// at all. Before it, the filesystem rules are checked: no ancestor of key
// is an object and key is not a directory.
func (s *Store) Put(ctx context.Context, key string, data []byte) error {
	if err := ctxErr(ctx, "put", key); err != nil {
		return err
	}
	if _, err := storage.CleanKey(key); err != nil {
		return fmt.Errorf("storage: put: %w", err)
	}
	g, gctx := errgroup.WithContext(ctx)
	for d := path.Dir(key); d != "."; d = path.Dir(d) {
		s.dirMu.Lock()
		known := s.dirs[d]
		s.dirMu.Unlock()
		if known {
			break // its ancestors were checked with it
		}
		g.Go(func() error {
			_, err := s.headObject(gctx, d)
			switch {
			case err == nil:
				return fmt.Errorf("storage: put %q: %q is an object, not a directory", key, d)
			case errors.Is(err, storage.ErrNotFound):
				return nil
			}
			return wrapErr("put", key, err)
		})
	}
	g.Go(func() error {
		dir, err := s.hasChildren(gctx, key)
		if err != nil {
			return wrapErr("put", key, err)
		}
		if dir {
			return fmt.Errorf("storage: put %q: is a directory", key)
		}
		return nil
	})
	if err := g.Wait(); err != nil {
		return err
	}
	s.blocks.dropKey(key)
	_, err := s.client.PutObject(ctx, &awss3.PutObjectInput{
		Bucket: aws.String(s.opt.Bucket), Key: aws.String(s.objKey(key)),
		Body: bytes.NewReader(data), ContentLength: aws.Int64(int64(len(data))),
	})
	if err != nil {
		return wrapErr("put", key, s.classify(err))
	}
	s.blocks.dropKey(key)
	s.dirMu.Lock()
	if len(s.dirs) > maxKnownDirs {
		// Every DoPut makes a new fragment directory: start over rather
		// than grow for the life of the daemon.
		clear(s.dirs)
	}
	for d := path.Dir(key); d != "."; d = path.Dir(d) {
		s.dirs[d] = true
	}
	s.dirMu.Unlock()
	return nil
}

// List returns the immediate children of dir, sorted by name.
func (s *Store) List(ctx context.Context, dir string) ([]storage.Entry, error) {
	if err := ctxErr(ctx, "list", dir); err != nil {
		return nil, err
	}
	d, err := cleanDir(dir)
	if err != nil {
		return nil, fmt.Errorf("storage: list: %w", err)
	}
	prefix := s.dirPrefix(d)
	out := []storage.Entry{}
	seen := map[string]bool{}
	p := awss3.NewListObjectsV2Paginator(s.client, &awss3.ListObjectsV2Input{
		Bucket: aws.String(s.opt.Bucket), Prefix: aws.String(prefix), Delimiter: aws.String("/"),
	})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, wrapErr("list", dir, s.classify(err))
		}
		for _, cp := range page.CommonPrefixes {
			name := strings.TrimSuffix(strings.TrimPrefix(aws.ToString(cp.Prefix), prefix), "/")
			if !validName(name) || seen[name] {
				continue
			}
			seen[name] = true
			out = append(out, storage.Entry{Name: name, IsDir: true})
		}
		for _, o := range page.Contents {
			name := strings.TrimPrefix(aws.ToString(o.Key), prefix)
			// "dir/" marker objects some tools create are not entries.
			if !validName(name) || seen[name] {
				continue
			}
			seen[name] = true
			out = append(out, storage.Entry{Name: name, Size: aws.ToInt64(o.Size), ModTime: aws.ToTime(o.LastModified)})
		}
	}
	// Objects and prefixes arrive in two lists; and whatever order a
	// server keeps, callers get names sorted.
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

func validName(n string) bool {
	return n != "" && n != "." && n != ".." && !strings.Contains(n, "/")
}

func cleanDir(dir string) (string, error) {
	dir = strings.TrimSuffix(dir, "/")
	if dir == "" {
		return "", nil
	}
	if _, err := storage.CleanKey(dir); err != nil {
		return "", err
	}
	return dir, nil
}

// Delete removes one object; a missing key is not an error, a directory is.
func (s *Store) Delete(ctx context.Context, key string) error {
	if err := ctxErr(ctx, "delete", key); err != nil {
		return err
	}
	if _, err := storage.CleanKey(key); err != nil {
		return fmt.Errorf("storage: delete: %w", err)
	}
	if _, err := s.headObject(ctx, key); errors.Is(err, storage.ErrNotFound) {
		dir, err := s.hasChildren(ctx, key)
		if err != nil {
			return wrapErr("delete", key, err)
		}
		if dir {
			return fmt.Errorf("storage: delete %q: is a directory (use DeletePrefix)", key)
		}
		return nil
	} else if err != nil {
		return wrapErr("delete", key, err)
	}
	s.blocks.dropKey(key)
	_, err := s.client.DeleteObject(ctx, &awss3.DeleteObjectInput{Bucket: aws.String(s.opt.Bucket), Key: aws.String(s.objKey(key))})
	if err != nil {
		return wrapErr("delete", key, s.classify(err))
	}
	return nil
}

// DeletePrefix removes every object under dir, 1000 per request.
func (s *Store) DeletePrefix(ctx context.Context, dir string) error {
	if err := ctxErr(ctx, "delete prefix", dir); err != nil {
		return err
	}
	d, err := cleanDir(dir)
	if err != nil {
		return fmt.Errorf("storage: delete prefix: %w", err)
	}
	prefix := s.dirPrefix(d)
	s.blocks.dropPrefix(d)
	p := awss3.NewListObjectsV2Paginator(s.client, &awss3.ListObjectsV2Input{
		Bucket: aws.String(s.opt.Bucket), Prefix: aws.String(prefix),
	})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return wrapErr("delete prefix", dir, s.classify(err))
		}
		if len(page.Contents) == 0 {
			continue
		}
		ids := make([]types.ObjectIdentifier, 0, len(page.Contents))
		for _, o := range page.Contents {
			ids = append(ids, types.ObjectIdentifier{Key: o.Key})
		}
		out, err := s.client.DeleteObjects(ctx, &awss3.DeleteObjectsInput{
			Bucket: aws.String(s.opt.Bucket), Delete: &types.Delete{Objects: ids, Quiet: aws.Bool(true)},
		})
		if err != nil {
			return wrapErr("delete prefix", dir, s.classify(err))
		}
		if len(out.Errors) > 0 {
			e := out.Errors[0]
			return wrapErr("delete prefix", dir, fmt.Errorf("%d objects not deleted, first %q: %s %s",
				len(out.Errors), aws.ToString(e.Key), aws.ToString(e.Code), aws.ToString(e.Message)))
		}
	}
	s.dirMu.Lock()
	for k := range s.dirs {
		if d == "" || k == d || strings.HasPrefix(k, d+"/") {
			delete(s.dirs, k)
		}
	}
	s.dirMu.Unlock()
	return nil
}

// Stat returns the entry for an object, or for a prefix with keys below
// it (a directory).
func (s *Store) Stat(ctx context.Context, key string) (storage.Entry, error) {
	if err := ctxErr(ctx, "stat", key); err != nil {
		return storage.Entry{}, err
	}
	if key == "" {
		return storage.Entry{IsDir: true}, nil
	}
	if _, err := storage.CleanKey(key); err != nil {
		return storage.Entry{}, fmt.Errorf("storage: stat: %w", err)
	}
	out, err := s.headObject(ctx, key)
	if err == nil {
		return storage.Entry{Name: path.Base(key), Size: aws.ToInt64(out.ContentLength), ModTime: aws.ToTime(out.LastModified)}, nil
	}
	if !errors.Is(err, storage.ErrNotFound) {
		return storage.Entry{}, wrapErr("stat", key, err)
	}
	dir, err := s.hasChildren(ctx, key)
	if err != nil {
		return storage.Entry{}, wrapErr("stat", key, err)
	}
	if !dir {
		return storage.Entry{}, wrapErr("stat", key, storage.ErrNotFound)
	}
	return storage.Entry{Name: path.Base(key), IsDir: true}, nil
}

// Options returns the options the store was opened with (defaults filled).
func (s *Store) Options() Options { return s.opt }

var _ storage.Creator = (*Store)(nil)

// Create writes key only when it does not exist, with one PUT carrying
// If-None-Match: * (S3's conditional write; MinIO, R2 and moto honour it
// too): 412 Precondition Failed, or 409 when a concurrent conditional
// write of the key is in progress, is storage.ErrExists. A retried
// request whose first attempt landed also sees ErrExists: callers that
// need to know read the object back.
func (s *Store) Create(ctx context.Context, key string, data []byte) error {
	if err := ctxErr(ctx, "create", key); err != nil {
		return err
	}
	if _, err := storage.CleanKey(key); err != nil {
		return fmt.Errorf("storage: create: %w", err)
	}
	s.blocks.dropKey(key)
	_, err := s.client.PutObject(ctx, &awss3.PutObjectInput{
		Bucket: aws.String(s.opt.Bucket), Key: aws.String(s.objKey(key)),
		Body: bytes.NewReader(data), ContentLength: aws.Int64(int64(len(data))),
		IfNoneMatch: aws.String("*"),
	})
	if err != nil {
		var ae smithy.APIError
		if errors.As(err, &ae) {
			switch ae.ErrorCode() {
			case "PreconditionFailed", "ConditionalRequestConflict":
				return fmt.Errorf("storage: create %q: %w", key, storage.ErrExists)
			}
		}
		return wrapErr("create", key, s.classify(err))
	}
	s.blocks.dropKey(key)
	return nil
}
