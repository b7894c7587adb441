// Package storage owns tileflight's view of where arrays live: an
// object-store-shaped interface (whole-object put, ranged get, list,
// delete, stat) with a local-filesystem implementation, an in-memory one,
// and an error-injecting wrapper for tests.
//
// Keys are slash-separated paths relative to the store's root, never
// starting with "/" and never containing "." or ".." segments. Correctness
// of everything above this package may not depend on rename or directory
// locking: a key becomes visible whole when Put returns, and that is all
// the consistency an S3-compatible store promises.
package storage

import (
	"context"
	"io/fs"
	"time"

	"github.com/tileflight/tileflight/errkind"
)

// ErrNotFound is returned (wrapped) when a key does not exist. It matches
// fs.ErrNotExist with errors.Is.
var ErrNotFound = fs.ErrNotExist

// ErrInvalidPath is returned (wrapped) for keys that are malformed or would
// escape the store's root.
// Kind: Internal until a caller wraps it with the kind it knows
// (errkind.Fallback): whether the user or the stored data is at fault.
var ErrInvalidPath error = errkind.New(errkind.Internal, errkind.Fallback, "invalid storage path")

// ErrUnavailable is returned (wrapped) when the store could not be reached
// or kept failing (an object store's 5xx or throttling after every retry,
// a timeout): the request may succeed later. gRPC: Unavailable.
var ErrUnavailable error = errkind.New(errkind.Unavailable, errkind.Overrides, "storage unavailable")

// Entry is one result of List.
type Entry struct {
	// Name is the last path segment (no slashes).
	Name string
	// IsDir is true for a common prefix ("directory"): keys exist below it.
	IsDir bool
	// Size is the object size in bytes (0 for directories).
	Size int64
	// ModTime is the last modification time where the store knows it.
	ModTime time.Time
}

// Store is an object store rooted somewhere. All methods are safe for
// concurrent use.
type Store interface {
	// Get returns the whole object.
	Get(ctx context.Context, key string) ([]byte, error)
	// GetRange returns n bytes starting at off. Reading past the end is an
	// error wrapping io.ErrUnexpectedEOF.
	GetRange(ctx context.Context, key string, off, n int64) ([]byte, error)
	// Put writes the whole object; readers see either the old object or the
	// complete new one, never a part.
	Put(ctx context.Context, key string, data []byte) error
	// List returns the immediate children of the prefix dir ("" = root),
	// sorted by name: objects, and directories for deeper keys. A missing
	// dir yields an empty list, not an error.
	List(ctx context.Context, dir string) ([]Entry, error)
	// Delete removes one object; deleting a missing key is not an error.
	Delete(ctx context.Context, key string) error
	// DeletePrefix removes every object under dir (recursively).
	DeletePrefix(ctx context.Context, dir string) error
	// Stat returns the entry for key (an object or a directory).
	Stat(ctx context.Context, key string) (Entry, error)
}
