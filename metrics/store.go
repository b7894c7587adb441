package metrics

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/tileflight/tileflight/storage"
)

// Store wraps a storage.Store and counts its requests, bytes and latency.
// It adds nothing else: errors and data pass through unchanged.
type Store struct {
	inner storage.Store
	m     *Metrics
}

// WrapStore returns s counted by m (s itself when m is nil). The wrapper
// keeps what s can do beyond storage.Store: reading a range into the
// caller's buffer (counted as a get_range), storing a directory in one
// step (put_dir), mapping objects into memory (storage.Mapper: not a
// request, not counted) and cleaning a dead process's temporary files.
func (m *Metrics) WrapStore(s storage.Store) storage.Store {
	if m == nil {
		return s
	}
	st := &Store{inner: s, m: m}
	if mp, ok := s.(storage.Mapper); ok {
		return &mapStore{st, mp}
	}
	return st
}

// mapStore is a Store over a storage.Mapper.
type mapStore struct {
	*Store
	storage.Mapper
}

// ReadRange implements storage.RangeReader: the wrapped store's when it
// has one (else GetRange and a copy), counted as a get_range.
func (s *Store) ReadRange(ctx context.Context, key string, off int64, dst []byte) error {
	start := time.Now()
	err := storage.ReadRange(ctx, s.inner, key, off, dst)
	s.done("get_range", start, err)
	if err == nil {
		s.m.storeBytes.WithLabelValues("read").Add(float64(len(dst)))
	}
	return err
}

// CleanTemp implements storage.TempCleaner: the wrapped store's, and
// nothing removed when it has none.
func (s *Store) CleanTemp(ctx context.Context, olderThan time.Duration) (storage.TempCleaned, error) {
	if tc, ok := s.inner.(storage.TempCleaner); ok {
		return tc.CleanTemp(ctx, olderThan)
	}
	return storage.TempCleaned{}, nil
}

// Unwrap returns the wrapped store.
func (s *Store) Unwrap() storage.Store { return s.inner }

func (s *Store) done(op string, start time.Time, err error) {
	result := "ok"
	switch {
	case err == nil:
	case errors.Is(err, storage.ErrNotFound):
		result = "not_found"
	default:
		result = "error"
	}
	s.m.storeReqs.WithLabelValues(op, result).Inc()
	s.m.storeLat.WithLabelValues(op).Observe(time.Since(start).Seconds())
}

// Get implements storage.Store.
func (s *Store) Get(ctx context.Context, key string) ([]byte, error) {
	start := time.Now()
	b, err := s.inner.Get(ctx, key)
	s.done("get", start, err)
	s.m.storeBytes.WithLabelValues("read").Add(float64(len(b)))
	return b, err
}

// GetRange implements storage.Store.
func (s *Store) GetRange(ctx context.Context, key string, off, n int64) ([]byte, error) {
	start := time.Now()
	b, err := s.inner.GetRange(ctx, key, off, n)
	s.done("get_range", start, err)
	s.m.storeBytes.WithLabelValues("read").Add(float64(len(b)))
	return b, err
}

// Put implements storage.Store.
func (s *Store) Put(ctx context.Context, key string, data []byte) error {
	start := time.Now()
	err := s.inner.Put(ctx, key, data)
	s.done("put", start, err)
	if err == nil {
		s.m.storeBytes.WithLabelValues("write").Add(float64(len(data)))
	}
	return err
}

// List implements storage.Store.
func (s *Store) List(ctx context.Context, dir string) ([]storage.Entry, error) {
	start := time.Now()
	e, err := s.inner.List(ctx, dir)
	s.done("list", start, err)
	return e, err
}

// Delete implements storage.Store.
func (s *Store) Delete(ctx context.Context, key string) error {
	start := time.Now()
	err := s.inner.Delete(ctx, key)
	s.done("delete", start, err)
	return err
}

// DeletePrefix implements storage.Store.
func (s *Store) DeletePrefix(ctx context.Context, dir string) error {
	start := time.Now()
	err := s.inner.DeletePrefix(ctx, dir)
	s.done("delete_prefix", start, err)
	return err
}

// Stat implements storage.Store.
func (s *Store) Stat(ctx context.Context, key string) (storage.Entry, error) {
	start := time.Now()
	e, err := s.inner.Stat(ctx, key)
	s.done("stat", start, err)
	return e, err
}

// PutDir implements storage.DirPutter: the inner store's one step when
// it has one, counted as one "put_dir" request with all the files' bytes.
func (s *Store) PutDir(ctx context.Context, dir string, files []storage.File) error {
	start := time.Now()
	err := storage.PutDir(ctx, s.inner, dir, files)
	s.done("put_dir", start, err)
	if err == nil {
		n := 0
		for _, f := range files {
			n += len(f.Data)
		}
		s.m.storeBytes.WithLabelValues("write").Add(float64(n))
	}
	return err
}

// Create implements storage.Creator when the wrapped store does; otherwise
// it fails with errors.ErrUnsupported.
func (s *Store) Create(ctx context.Context, key string, data []byte) error {
	c, ok := s.inner.(storage.Creator)
	if !ok {
		return fmt.Errorf("storage: create %q: %w", key, errors.ErrUnsupported)
	}
	start := time.Now()
	err := c.Create(ctx, key, data)
	s.done("create", start, err)
	if err == nil {
		s.m.storeBytes.WithLabelValues("write").Add(float64(len(data)))
	}
	return err
}
