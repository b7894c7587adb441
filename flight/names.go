package flight

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/tileflight/tileflight/array"
	"github.com/tileflight/tileflight/errkind"
	"github.com/tileflight/tileflight/filters/codecs"
	"github.com/tileflight/tileflight/format/gentile"
	"github.com/tileflight/tileflight/format/names"
	"github.com/tileflight/tileflight/query"
	"github.com/tileflight/tileflight/storage"
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
// names that DESIGN §3 would refuse (e.g. "__" segments) are skipped.
func (s *Service) listArrays(ctx context.Context, prefix string) ([]arrayEntry, error) {
	var out []arrayEntry
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
			// Prune subtrees that cannot hold a name with the prefix.
			if !strings.HasPrefix(name, prefix) && !strings.HasPrefix(prefix, name+"/") {
				continue
			}
			if !e.IsDir {
				if strings.HasSuffix(name, ".b2nd") && strings.HasPrefix(name, prefix) {
					out = append(out, arrayEntry{Name: name, B2ND: true})
				}
				continue
			}
			ok, err := array.IsArray(ctx, s.cfg.Store, name)
			if err != nil {
				return err
			}
			if ok {
				if strings.HasPrefix(name, prefix) {
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
	if err := query.ValidateArrayName(name); err != nil {
		return err
	}
	if strings.HasSuffix(name, ".b2nd") {
		if _, err := s.cfg.Store.Stat(ctx, name); err == nil {
			return errkind.Errorf(errkind.Unimplemented, "array %q: Blosc2 NDArray (.b2nd) files are not served yet", name)
		}
	}
	ok, err := array.IsArray(ctx, s.cfg.Store, name)
	if err != nil {
		return fmt.Errorf("array %q: %w", name, storageErr(err))
	}
	if !ok {
		return errkind.Errorf(errkind.NotFound, "no such array %q under the data directory (list them with ListFlights or the list_arrays action)", name)
	}
	return nil
}

// openArray opens a TileDB array by name at the query's timestamp.
func (s *Service) openArray(ctx context.Context, name string, ts *query.Timestamp) (*array.Array, error) {
	if err := s.checkArray(ctx, name); err != nil {
		return nil, err
	}
	key, err := s.keyFor(ctx, name)
	if err != nil {
		return nil, err
	}
	opt := array.Options{EncryptionKey: key}
	if ts != nil {
		opt.Start, opt.End = ts.Start, ts.End
	}
	a, err := array.Open(ctx, s.cfg.Store, name, opt)
	if err != nil {
		return nil, s.openErr(ctx, name, err)
	}
	return a, nil
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

// isEncrypted says whether the array's schema file (a generic tile) is
// encrypted, from its header; TileDB encrypts all of an array's files or
// none. A schema that cannot be read counts as not encrypted and is left
// for the open that follows to report.
func (s *Service) isEncrypted(ctx context.Context, name string) bool {
	files, err := s.cfg.Store.List(ctx, name+"/"+names.SchemaDir)
	if err != nil {
		return false
	}
	key := name + "/" + names.LegacySchemaFile
	for _, e := range files {
		if !e.IsDir {
			key = name + "/" + names.SchemaDir + "/" + e.Name
			break
		}
	}
	b, err := s.cfg.Store.Get(ctx, key) // schema files are small
	if err != nil {
		return false
	}
	h, err := gentile.DecodeHeader(b)
	return err == nil && h.EncryptionType != 0
}

// keyFor is the key to open the array with: the daemon's key for an
// encrypted array, none for the others (the reader given a key expects
// encrypted tiles). Without a key nothing need be looked at.
func (s *Service) keyFor(ctx context.Context, name string) ([]byte, error) {
	if len(s.cfg.EncryptionKey) == 0 || !s.isEncrypted(ctx, name) {
		return nil, nil
	}
	return s.cfg.EncryptionKey, nil
}

// openErr wraps an error opening the array. An encrypted array that a
// daemon without a key cannot open is FailedPrecondition: the client did
// nothing wrong and only the operator can change it; so is a key that
// fails to decrypt (codeOf).
func (s *Service) openErr(ctx context.Context, name string, err error) error {
	if errors.Is(err, gentile.ErrKeyRequired) {
		return errkind.Errorf(errkind.FailedPrecondition, "array %q is encrypted, and this flightd has no key to open it (-encryption-key-file): %s", name, err.Error())
	}
	if errors.Is(err, codecs.ErrDecrypt) {
		return fmt.Errorf("array %q is encrypted, and this flightd's key does not open it (or the file was altered): %w", name, err)
	}
	return fmt.Errorf("array %q: %w", name, storageErr(err))
}
