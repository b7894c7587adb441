package storage

import (
	"context"
	"fmt"

	"github.com/tileflight/tileflight/errkind"
)

// RangeReader is a Store that can read a range into the caller's buffer,
// so that a reader of many ranges reuses its buffers instead of
// allocating (and zeroing) one per read.
type RangeReader interface {
	// ReadRange fills dst with the len(dst) bytes starting at off, with
	// GetRange's errors.
	ReadRange(ctx context.Context, key string, off int64, dst []byte) error
}

// ReadRange fills dst from key at off: through st's ReadRange when it has
// one, else by GetRange and a copy.
func ReadRange(ctx context.Context, st Store, key string, off int64, dst []byte) error {
	if rr, ok := st.(RangeReader); ok {
		return rr.ReadRange(ctx, key, off, dst)
	}
	b, err := st.GetRange(ctx, key, off, int64(len(dst)))
	if err != nil {
		return err
	}
	copy(dst, b)
	return nil
}

// ReadRange is GetRange into dst (see RangeReader).
func (l *Local) ReadRange(ctx context.Context, key string, off int64, dst []byte) error {
	if err := ctxErr(ctx, "get range", key); err != nil {
		return err
	}
	if _, err := CleanKey(key); err != nil {
		return fmt.Errorf("storage: get range: %w", err)
	}
	f, err := l.root.Open(key)
	if err != nil {
		return l.wrap("get range", key, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return l.wrap("get range", key, err)
	}
	if fi.IsDir() {
		return notFound("get range", key)
	}
	n := int64(len(dst))
	if err := checkRange(key, off, n, fi.Size()); err != nil {
		return err
	}
	if _, err := f.ReadAt(dst, off); err != nil {
		// The file shrank between Stat and ReadAt.
		return errkind.FromOS(fmt.Errorf("storage: get range %q [%d, %d): %w", key, off, off+n, l.relative(err)))
	}
	return nil
}

// Mapper is a Store that can map a whole object into memory read-only, so
// that a reader touching scattered parts of a large object reads them
// without copying (the local store on Unix). A mapping sees the object as
// it is while mapped: a store's own writes replace objects (a new file),
// so a mapped one stays intact; an object truncated in place by another
// program makes reads of the lost pages fault, which the reader must turn
// into an error (runtime/debug.SetPanicOnFault).
type Mapper interface {
	// Map returns the object's bytes and the function that unmaps them.
	Map(ctx context.Context, key string) ([]byte, func() error, error)
	// MapID identifies the object's current version: a replaced object
	// (a new file) has another ID, so a cached mapping is never reused
	// for it.
	MapID(ctx context.Context, key string) (string, error)
}
