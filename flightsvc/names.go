package flightsvc

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/tileflight/tileflight/access"
	"github.com/tileflight/tileflight/errkind"
	"github.com/tileflight/tileflight/query"
	"github.com/tileflight/tileflight/reader/ndarray"
	"github.com/tileflight/tileflight/storage"
	"github.com/tileflight/tileflight/tdbarray"
)

// Listing limits: a data directory with a pathological tree costs bounded
// work per ListFlights call.
const (
	maxListDepth  = 16
	maxListArrays = 100000
)

// arrayEntry is one array found under the data directory.
type arrayEntry struct {
	Name string
	B2ND bool
}

// listArrays walks the store and returns the arrays whose name starts with
// prefix, sorted by name. Array directories are not descended into, and
// names that docs/protocol.md, "Queries, tickets and descriptors" would refuse (e.g. "__" segments) are skipped.
func (s *Service) listArrays(ctx context.Context, prefix string) ([]arrayEntry, error) {
	var out []arrayEntry
	who := access.FromContext(ctx)
	var walk func(dir string, depth int) error
	walk = func(dir string, depth int) error {
		if depth > maxListDepth || len(out) >= maxListArrays {
			return nil
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		entries, err := s.cfg.Store.List(ctx, dir)
		if err != nil {
			return err
		}
		for _, e := range entries {
			name := e.Name
			if dir != "" {
				name = dir + "/" + e.Name
			}
			if query.ValidateArrayName(name) != nil {
				continue
			}
			// Prune subtrees that cannot hold a name with the prefix, or
			// an array within the caller's reach.
			if !strings.HasPrefix(name, prefix) && !strings.HasPrefix(prefix, name+"/") {
				continue
			}
			if !who.Reaches(name) && !who.MayHoldReachable(name) {
				continue
			}
			if strings.HasSuffix(name, ".b2nd") {
				// A file is a contiguous frame, a directory a sparse one.
				if strings.HasPrefix(name, prefix) && who.Reaches(name) {
					out = append(out, arrayEntry{Name: name, B2ND: true})
				}
				continue
			}
			if !e.IsDir {
				continue
			}
			ok, err := tdbarray.IsArray(ctx, s.cfg.Store, name)
			if err != nil {
				return err
			}
			if ok {
				if strings.HasPrefix(name, prefix) && who.Reaches(name) {
					out = append(out, arrayEntry{Name: name})
				}
				continue
			}
			if err := walk(name, depth+1); err != nil {
				return err
			}
		}
		return nil
	}
	if err := walk("", 0); err != nil {
		return nil, storageErr(err)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// checkArray validates name and confirms an array lives there: NotFound if
// not, Unimplemented for Blosc2 NDArray files (not served yet).
func (s *Service) checkArray(ctx context.Context, name string) error {
	if err := s.checkName(ctx, name); err != nil {
		return err
	}
	if ndarray.IsB2ND(name) {
		if _, err := s.cfg.Store.Stat(ctx, name); err != nil {
			if errors.Is(err, storage.ErrNotFound) {
				return notFound(name)
			}
			return fmt.Errorf("array %q: %w", name, storageErr(err))
		}
		return nil
	}
	ok, err := tdbarray.IsArray(ctx, s.cfg.Store, name)
	if err != nil {
		return fmt.Errorf("array %q: %w", name, storageErr(err))
	}
	if !ok {
		return notFound(name)
	}
	return nil
}

// checkName validates an array name and refuses the array kinds that are
// not served yet; whether the array exists is left to whoever opens it
// (array.Open lists the directory anyway, so checking first would list it
// twice on every query).
//
// It is also where a caller's reach is enforced: an array outside the
// prefixes of the call's principal does not exist for it, whatever path
// the name arrived by (tickets made for another token included).
func (s *Service) checkName(ctx context.Context, name string) error {
	if err := query.ValidateArrayName(name); err != nil {
		return err
	}
	if !access.Reaches(ctx, name) {
		return notFound(name)
	}
	return nil
}

func notFound(name string) error {
	return errkind.Errorf(errkind.NotFound, "no such array %q under the data directory (list them with ListFlights or the list_arrays action)", name)
}

// openArray opens a TileDB array by name at the query's timestamp, with
// the daemon's key: generic tiles say themselves whether they are
// encrypted, so the key opens encrypted arrays and is ignored by the
// others, and the opened array's Encrypted field tells which it was.
func (s *Service) openArray(ctx context.Context, name string, ts *query.Timestamp) (*tdbarray.Array, error) {
	return s.openArrayOpt(ctx, name, ts, false)
}

// openForWrite opens name as a write needs it: its schema in force now
// (decoded schemas come from the metadata cache), not its fragments, so
// that a DoPut's open does not grow with the fragments the array holds.
func (s *Service) openForWrite(ctx context.Context, name string) (*tdbarray.Array, error) {
	return s.openArrayOpt(ctx, name, nil, true)
}

func (s *Service) openArrayOpt(ctx context.Context, name string, ts *query.Timestamp, schemaOnly bool) (*tdbarray.Array, error) {
	if err := s.checkName(ctx, name); err != nil {
		return nil, err
	}
	if ndarray.IsB2ND(name) {
		if ts != nil {
			return nil, errkind.Errorf(errkind.InvalidArgument, "array %q: a .b2nd array has no timestamps (no time travel): remove \"timestamp\"", name)
		}
		a, err := ndarray.OpenB2ND(ctx, s.cfg.Store, name)
		if err != nil {
			return nil, s.openErr(ctx, name, err)
		}
		return a, nil
	}
	opt := tdbarray.Options{EncryptionKey: s.cfg.EncryptionKey, Cache: s.cache, SchemaOnly: schemaOnly}
	if ts != nil {
		opt.Start, opt.End, opt.EndSet = ts.Start, ts.End, true
	}
	a, err := tdbarray.Open(ctx, s.cfg.Store, name, opt)
	if err != nil {
		return nil, s.openErr(ctx, name, err)
	}
	return a, nil
}

// keyOf is the key for an opened array's data tiles and for writes into
// it: the daemon's key for an encrypted array, none for the others (data
// tiles carry no header, and a tile loader or writer given a key treats
// every tile as encrypted).
func (s *Service) keyOf(a *tdbarray.Array) []byte {
	if a.Encrypted {
		return s.cfg.EncryptionKey
	}
	return nil
}

// storageErr classifies storage errors that carry no kind: a path the
// store refuses (a symlink out of the data directory, say) is the client's
// mistake, a missing object is NotFound.
func storageErr(err error) error {
	if err == nil || errkind.Of(err) != nil {
		return err
	}
	switch {
	case errors.Is(err, storage.ErrInvalidPath):
		return errkind.Wrap(errkind.InvalidArgument, err)
	case errors.Is(err, storage.ErrNotFound):
		return errkind.Wrap(errkind.NotFound, err)
	}
	return err
}

// writeKey is the key for a write that does not open the array
// (put_metadata, drop_array: neither needs the fragments, and a damaged
// array must stay droppable). Whether the array is encrypted comes from
// its schema file's generic tile header; TileDB encrypts all of an
// array's files or none. An encrypted array on a daemon without a key is
// FailedPrecondition before anything is touched; a schema that cannot be
// read is left for the writer to report (or, for a drop, to ignore).
func (s *Service) writeKey(ctx context.Context, name string) ([]byte, error) {
	file, encrypted := tdbarray.SchemaEncrypted(ctx, s.cfg.Store, name)
	if !encrypted {
		return nil, nil
	}
	if len(s.cfg.EncryptionKey) == 0 {
		return nil, s.openErr(ctx, name, fmt.Errorf("schema %s: %w", file, tdbarray.ErrKeyRequired))
	}
	return s.cfg.EncryptionKey, nil
}

// openErr wraps an error opening the array. An encrypted array that a
// daemon without a key cannot open is FailedPrecondition: the client did
// nothing wrong and only the operator can change it; so is a key that
// fails to decrypt (codeOf).
func (s *Service) openErr(ctx context.Context, name string, err error) error {
	if errors.Is(err, tdbarray.ErrKeyRequired) {
		return errkind.Errorf(errkind.FailedPrecondition, "array %q is encrypted, and this flightd has no key to open it (-encryption-key-file): %s", name, err.Error())
	}
	if errors.Is(err, tdbarray.ErrDecrypt) {
		return fmt.Errorf("array %q is encrypted, and this flightd's key does not open it (or the file was altered): %w", name, err)
	}
	if errkind.Of(err) == errkind.NotFound {
		// array.Open says NotFound only when the directory holds no array.
		return notFound(name)
	}
	return fmt.Errorf("array %q: %w", name, storageErr(err))
}
