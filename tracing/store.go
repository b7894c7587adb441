package tracing

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/attribute"

	"github.com/tileflight/tileflight/storage"
)

// Attribute keys of the storage spans. Keys are relative to the data root
// (the store's own keys), never absolute paths.
const (
	KeyPath   = attribute.Key("tileflight.storage.path")
	KeyOffset = attribute.Key("tileflight.storage.offset")
	KeyBytes  = attribute.Key("tileflight.storage.bytes")
)

// WrapStore returns s with a span per read under a traced call: Get,
// GetRange and ReadRange (storage.read, with the path, offset and bytes),
// List and Stat. Writes and deletes pass through untraced (the call's span
// covers them). It keeps s's storage.RangeReader and storage.Mapper (a
// mapping is not a read: it is not traced). p nil: s itself.
func (p *Provider) WrapStore(s storage.Store) storage.Store {
	if p == nil {
		return s
	}
	t := &Store{Store: s}
	rr, isRR := s.(storage.RangeReader)
	m, isMap := s.(storage.Mapper)
	switch {
	case isRR && isMap:
		return &rangeMapStore{rangeStore{t, rr}, m}
	case isRR:
		return &rangeStore{t, rr}
	case isMap:
		return &mapStore{t, m}
	}
	return t
}

// Store is a storage.Store whose reads are traced (WrapStore).
type Store struct {
	storage.Store
}

// Unwrap returns the traced store.
func (s *Store) Unwrap() storage.Store { return s.Store }

// Get implements storage.Store.
func (s *Store) Get(ctx context.Context, key string) ([]byte, error) {
	ctx, span := Start(ctx, "storage.read", KeyPath.String(key))
	b, err := s.Store.Get(ctx, key)
	span.SetAttributes(KeyBytes.Int(len(b)))
	Fail(span, err)
	span.End()
	return b, err
}

// GetRange implements storage.Store.
func (s *Store) GetRange(ctx context.Context, key string, off, n int64) ([]byte, error) {
	ctx, span := Start(ctx, "storage.read", KeyPath.String(key), KeyOffset.Int64(off), KeyBytes.Int64(n))
	b, err := s.Store.GetRange(ctx, key, off, n)
	Fail(span, err)
	span.End()
	return b, err
}

// List implements storage.Store.
func (s *Store) List(ctx context.Context, dir string) ([]storage.Entry, error) {
	ctx, span := Start(ctx, "storage.list", KeyPath.String(dir))
	e, err := s.Store.List(ctx, dir)
	Fail(span, err)
	span.End()
	return e, err
}

// Stat implements storage.Store.
func (s *Store) Stat(ctx context.Context, key string) (storage.Entry, error) {
	ctx, span := Start(ctx, "storage.stat", KeyPath.String(key))
	e, err := s.Store.Stat(ctx, key)
	Fail(span, err)
	span.End()
	return e, err
}

type rangeStore struct {
	*Store
	rr storage.RangeReader
}

// ReadRange implements storage.RangeReader.
func (s *rangeStore) ReadRange(ctx context.Context, key string, off int64, dst []byte) error {
	ctx, span := Start(ctx, "storage.read", KeyPath.String(key), KeyOffset.Int64(off), KeyBytes.Int(len(dst)))
	err := s.rr.ReadRange(ctx, key, off, dst)
	Fail(span, err)
	span.End()
	return err
}

type mapStore struct {
	*Store
	storage.Mapper
}

type rangeMapStore struct {
	rangeStore
	storage.Mapper
}

// Create implements storage.Creator (the compaction lease's conditional
// create) when the wrapped store does; otherwise it fails with
// errors.ErrUnsupported.
func (s *Store) Create(ctx context.Context, key string, data []byte) error {
	c, ok := s.Store.(storage.Creator)
	if !ok {
		return fmt.Errorf("storage: create %q: %w", key, errors.ErrUnsupported)
	}
	return c.Create(ctx, key, data)
}

// PutDir implements storage.DirPutter: the wrapped store's one-step
// directory put when it has one, else its concurrent puts.
func (s *Store) PutDir(ctx context.Context, dir string, files []storage.File) error {
	return storage.PutDir(ctx, s.Store, dir, files)
}

// CleanTemp implements storage.TempCleaner: the wrapped store's, and
// nothing removed when it has none.
func (s *Store) CleanTemp(ctx context.Context, olderThan time.Duration) (storage.TempCleaned, error) {
	if tc, ok := s.Store.(storage.TempCleaner); ok {
		return tc.CleanTemp(ctx, olderThan)
	}
	return storage.TempCleaned{}, nil
}
