package storage

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"strings"
	"syscall"

	"github.com/tileflight/tileflight/errkind"
	"golang.org/x/sync/errgroup"
)

// File is one object of PutDir: its name inside the directory and its
// contents.
type File struct {
	Name string
	Data []byte
}

// DirPutter is a Store that can store a new directory of objects as one
// step: none of them is seen until all of them are.
type DirPutter interface {
	// PutDir stores files under the prefix dir, which must hold nothing
	// yet. On success every file is there; on failure none is seen (a
	// crash may leave hidden litter, as Put's).
	PutDir(ctx context.Context, dir string, files []File) error
}

// maxDirPuts bounds the objects PutDir stores at once on a store that
// is not a DirPutter.
const maxDirPuts = 8

// PutDir stores files under the new prefix dir: in one step on a
// DirPutter (a local directory: the files are written into a hidden
// directory, which is then renamed into place), otherwise as concurrent
// Puts (an object store: one round trip's wait instead of one per file),
// where a failure can leave some of the files in place. Callers use it
// for what nothing names yet, such as an uncommitted fragment.
func PutDir(ctx context.Context, st Store, dir string, files []File) error {
	for _, f := range files {
		if f.Name == "" || strings.Contains(f.Name, "/") {
			return fmt.Errorf("storage: put dir %q: %w: file name %q", dir, ErrInvalidPath, f.Name)
		}
	}
	if dp, ok := st.(DirPutter); ok {
		return dp.PutDir(ctx, dir, files)
	}
	if len(files) == 0 {
		return nil
	}
	// The first alone: a store with directories makes the directory once.
	if err := st.Put(ctx, Join(dir, files[0].Name), files[0].Data); err != nil {
		return err
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(maxDirPuts)
	for _, f := range files[1:] {
		g.Go(func() error { return st.Put(gctx, Join(dir, f.Name), f.Data) })
	}
	return g.Wait()
}

var _ DirPutter = (*Local)(nil)

// PutDir writes the files into a fresh hidden directory at the root
// (flushed as the SyncPolicy says, files concurrently), then renames it to
// dir: one rename makes them all appear, so a crash leaves either the
// whole directory or hidden litter that CleanTemp removes. The parent of
// dir is created if missing.
func (l *Local) PutDir(ctx context.Context, dir string, files []File) error {
	if err := ctxErr(ctx, "put dir", dir); err != nil {
		return err
	}
	d, err := CleanKey(dir)
	if err != nil {
		return fmt.Errorf("storage: put dir: %w", err)
	}
	stage := tempName()
	if err := l.root.Mkdir(stage, 0o755); err != nil {
		return l.wrap("put dir", dir, err)
	}
	ok := false
	defer func() {
		if !ok {
			l.root.RemoveAll(stage)
		}
	}()
	// Files are made one after the other (creating files in one
	// directory concurrently only contends for its lock) and flushed
	// concurrently, so that their syncs share the disk's round trips.
	opened := make([]*os.File, 0, len(files))
	defer func() {
		for _, f := range opened {
			f.Close()
		}
	}()
	for _, f := range files {
		h, err := l.root.OpenFile(path.Join(stage, f.Name), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if err != nil {
			return l.wrap("put", Join(d, f.Name), err)
		}
		opened = append(opened, h)
		if _, err := h.Write(f.Data); err != nil {
			return l.wrap("put", Join(d, f.Name), err)
		}
	}
	if l.sync != SyncNever {
		g := new(errgroup.Group)
		g.SetLimit(maxDirPuts)
		for i, h := range opened {
			g.Go(func() error {
				if err := h.Sync(); err != nil {
					return l.wrap("put", Join(d, files[i].Name), err)
				}
				return nil
			})
		}
		if err := g.Wait(); err != nil {
			return err
		}
	}
	for i, h := range opened {
		opened[i] = nil
		if err := h.Close(); err != nil {
			return l.wrap("put", Join(d, files[i].Name), err)
		}
	}
	opened = nil
	l.syncDir(stage)
	if err := ctxErr(ctx, "put dir", dir); err != nil {
		return err
	}
	err = l.root.Rename(stage, d)
	if err != nil && (errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR)) {
		if parent := path.Dir(d); parent != "." {
			if merr := l.root.MkdirAll(parent, 0o755); merr != nil {
				return l.wrap("put dir", dir, merr)
			}
			err = l.root.Rename(stage, d)
		}
	}
	if err != nil {
		if errors.Is(err, fs.ErrExist) || errors.Is(err, syscall.ENOTEMPTY) {
			return errkind.Errorf(errkind.AlreadyExists, "storage: put dir %q: it exists already", dir)
		}
		return l.wrap("put dir", dir, err)
	}
	ok = true
	l.syncDir(path.Dir(d))
	return nil
}
