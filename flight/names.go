package flight

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/tileflight/tileflight/array"
	"github.com/tileflight/tileflight/errkind"
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
	opt := array.Options{EncryptionKey: s.cfg.EncryptionKey}
	if ts != nil {
		opt.Start, opt.End = ts.Start, ts.End
	}
	a, err := array.Open(ctx, s.cfg.Store, name, opt)
	if err != nil {
		return nil, fmt.Errorf("array %q: %w", name, storageErr(err))
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
