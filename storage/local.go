package storage

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"strconv"
	"strings"
	"syscall"

	"github.com/tileflight/tileflight/errkind"
)

// tempPrefix marks Put's in-flight files. List hides them, so a crash in
// the middle of a Put leaves litter but never a visible partial object.
const tempPrefix = ".tfput-"

// Local is a Store over a directory of the local filesystem. Every access
// goes through an os.Root, so neither a key nor a symlink inside the tree
// can reach outside the root directory.
type Local struct {
	root *os.Root
	dir  string
	sync SyncPolicy
}

// SyncPolicy says how far a Local store's Put goes to make an object
// durable. Every policy keeps Put atomic: an object appears whole under
// its key (a rename) or not at all, and a Put that returned is seen by
// every later Get, in this process and any other, also after the writing
// process is killed (the data is in the kernel's page cache). The
// policies differ only on a power loss or kernel crash.
type SyncPolicy int

const (
	// SyncAlways flushes every object's file to the disk before it is
	// renamed into place, and its directory after: an object whose Put
	// returned survives a power loss. The default.
	SyncAlways SyncPolicy = iota
	// SyncNever leaves flushing to the kernel (within its dirty-page
	// writeback, about 30 s on Linux by default): a power loss or kernel
	// crash may lose the last writes, including ones Put reported done,
	// and may leave a committed write whose files the disk never got.
	SyncNever
)

// ParseSyncPolicy reads "always" or "never".
func ParseSyncPolicy(s string) (SyncPolicy, error) {
	switch s {
	case "always":
		return SyncAlways, nil
	case "never":
		return SyncNever, nil
	}
	return 0, fmt.Errorf("fsync policy %q: want always or never", s)
}

func (p SyncPolicy) String() string {
	if p == SyncNever {
		return "never"
	}
	return "always"
}

// SetSync sets the store's SyncPolicy (SyncAlways until set). Set it
// before the store is shared.
func (l *Local) SetSync(p SyncPolicy) { l.sync = p }

// SyncPolicy returns the store's SyncPolicy.
func (l *Local) SyncPolicy() SyncPolicy { return l.sync }

// fsync flushes f when the policy says so.
func (l *Local) fsync(f *os.File) error {
	if l.sync == SyncNever {
		return nil
	}
	return f.Sync()
}

// syncDir flushes the directory dir (relative to the root) when the
// policy says so; a failure does not undo the Put that asked.
func (l *Local) syncDir(dir string) {
	if l.sync == SyncNever {
		return
	}
	if d, err := l.root.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
}

var _ Store = (*Local)(nil)

// NewLocal opens (and creates if missing) the directory root as a store.
func NewLocal(root string) (*Local, error) {
	if err := os.MkdirAll(root, 0o755); err != nil {
		return nil, fmt.Errorf("storage: create root %q: %w", root, err)
	}
	r, err := os.OpenRoot(root)
	if err != nil {
		return nil, fmt.Errorf("storage: open root %q: %w", root, err)
	}
	return &Local{root: r, dir: root}, nil
}

// Root returns the directory the store was opened on.
func (l *Local) Root() string { return l.dir }

// Close releases the root directory handle.
func (l *Local) Close() error { return l.root.Close() }

// wrap turns an os error for key into one that names the key and wraps
// ErrNotFound or ErrInvalidPath where that is what happened; a full,
// read-only or failing disk gets its errkind (errkind.FromOS), so that it
// is reported as such rather than as a bug.
func (l *Local) wrap(op, key string, err error) error {
	err = l.relative(err)
	switch {
	case errors.Is(err, fs.ErrNotExist), errors.Is(err, syscall.ENOTDIR):
		return notFound(op, key)
	case isEscape(err):
		return fmt.Errorf("storage: %s %q: %w: %v", op, key, ErrInvalidPath, err)
	}
	return errkind.FromOS(fmt.Errorf("storage: %s %q: %w", op, key, err))
}

// relative makes a path error name its file relative to the root: an
// open file's errors name it by its full path, the data directory's
// included, and clients are told keys relative to the root only.
func (l *Local) relative(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		pe.Path = strings.TrimPrefix(pe.Path, strings.TrimSuffix(l.dir, "/")+"/")
	}
	return err
}

// isEscape recognises os.Root's refusal to follow a path out of the root.
// The standard library does not export that error, so its text is matched.
func isEscape(err error) bool {
	return err != nil && strings.Contains(err.Error(), "path escapes from parent")
}

func (l *Local) Get(ctx context.Context, key string) ([]byte, error) {
	if err := ctxErr(ctx, "get", key); err != nil {
		return nil, err
	}
	if _, err := CleanKey(key); err != nil {
		return nil, fmt.Errorf("storage: get: %w", err)
	}
	b, err := l.root.ReadFile(key)
	if err != nil {
		if errors.Is(err, syscall.EISDIR) {
			return nil, notFound("get", key)
		}
		return nil, l.wrap("get", key, err)
	}
	return b, nil
}

func (l *Local) GetRange(ctx context.Context, key string, off, n int64) ([]byte, error) {
	if err := ctxErr(ctx, "get range", key); err != nil {
		return nil, err
	}
	if _, err := CleanKey(key); err != nil {
		return nil, fmt.Errorf("storage: get range: %w", err)
	}
	f, err := l.root.Open(key)
	if err != nil {
		return nil, l.wrap("get range", key, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, l.wrap("get range", key, err)
	}
	if fi.IsDir() {
		return nil, notFound("get range", key)
	}
	if err := checkRange(key, off, n, fi.Size()); err != nil {
		return nil, err
	}
	buf := make([]byte, n)
	if _, err := f.ReadAt(buf, off); err != nil {
		// The file shrank between Stat and ReadAt.
		return nil, errkind.FromOS(fmt.Errorf("storage: get range %q [%d, %d): %w", key, off, off+n, l.relative(err)))
	}
	return buf, nil
}

func (l *Local) Put(ctx context.Context, key string, data []byte) error {
	if err := ctxErr(ctx, "put", key); err != nil {
		return err
	}
	if _, err := CleanKey(key); err != nil {
		return fmt.Errorf("storage: put: %w", err)
	}
	dir := path.Dir(key)
	// The usual case first: the key's directory exists (every file of a
	// fragment but its first), and the object is renamed into it.
	tmp, err := l.writeTemp(key, data)
	if err != nil {
		return err
	}
	if err := ctxErr(ctx, "put", key); err != nil {
		l.root.Remove(tmp)
		return err
	}
	err = l.root.Rename(tmp, key)
	if err != nil && dir != "." && (errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR)) {
		// The directory is missing: it appears with the object.
		l.root.Remove(tmp)
		staged, serr := l.putNewDir(key, data)
		if serr != nil || staged {
			return serr
		}
		if merr := l.root.MkdirAll(dir, 0o755); merr != nil {
			return l.wrap("put", key, merr)
		}
		var werr error
		if tmp, werr = l.writeTemp(key, data); werr != nil {
			return werr
		}
		err = l.root.Rename(tmp, key)
	}
	if err != nil {
		l.root.Remove(tmp)
		return l.wrap("put", key, err)
	}
	// Make the rename itself durable; failure here does not undo the Put.
	l.syncDir(dir)
	return nil
}

// writeTemp writes data into a new temporary file at the root (synced as
// the policy says) and returns its name; on failure nothing is left.
// The temporary file lives at the root, not beside the key: TileDB lists
// an array's __fragments and __commits and fails on names it cannot
// parse, so a crash may not leave litter there.
func (l *Local) writeTemp(key string, data []byte) (string, error) {
	tmp := tempName()
	f, err := l.root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return "", l.wrap("put", key, err)
	}
	_, err = f.Write(data)
	if err == nil {
		err = l.fsync(f)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		l.root.Remove(tmp)
		return "", l.wrap("put", key, err)
	}
	return tmp, nil
}

// tempName is a fresh name at the root for an object or directory being
// staged. List hides it; renaming it into place is atomic because it is
// on the same filesystem as every key (a data directory with other
// filesystems mounted inside it is not supported).
// The name carries the writing process's id (".tfput-<pid>-<random>"), so
// that CleanTemp never takes a live process's entry for litter.
func tempName() string {
	var rnd [8]byte
	rand.Read(rnd[:])
	return tempPrefix + strconv.Itoa(os.Getpid()) + "-" + hex.EncodeToString(rnd[:])
}

// putNewDir writes key when its directory does not exist yet, so that the
// directory appears together with the object: the missing directories
// and the file are made inside a hidden staging directory at the root,
// which is then renamed into place as the topmost missing one. Without it a
// crash between creating "a/__schema/" and renaming the schema file into
// it leaves an empty __schema directory, which TileDB takes for an array
// it then cannot open (and refuses to create again). It reports false
// when the directory already exists (the caller then writes the file the
// usual way) or when another Put made it meanwhile.
func (l *Local) putNewDir(key string, data []byte) (bool, error) {
	dir := path.Dir(key)
	// Find the topmost missing directory on the way to dir.
	top := ""
	for d := dir; d != "."; d = path.Dir(d) {
		fi, err := l.root.Stat(d)
		if err == nil {
			if !fi.IsDir() {
				return false, nil // let the usual path report it
			}
			break
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return false, nil
		}
		top = d
	}
	if top == "" {
		return false, nil
	}
	parent := path.Dir(top)
	if parent != "." {
		if err := l.root.MkdirAll(parent, 0o755); err != nil {
			return false, l.wrap("put", key, err)
		}
	}
	stage := tempName()
	rel := strings.TrimPrefix(key, top+"/")
	if err := l.root.MkdirAll(path.Join(stage, path.Dir(rel)), 0o755); err != nil {
		return false, l.wrap("put", key, err)
	}
	ok := false
	defer func() {
		if !ok {
			l.root.RemoveAll(stage)
		}
	}()
	f, err := l.root.OpenFile(path.Join(stage, rel), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return false, l.wrap("put", key, err)
	}
	_, err = f.Write(data)
	if err == nil {
		err = l.fsync(f)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return false, l.wrap("put", key, err)
	}
	if err := l.root.Rename(stage, top); err != nil {
		// Another Put made the directory meanwhile: write the usual way.
		return false, nil
	}
	ok = true
	l.syncDir(parent)
	return true, nil
}

func (l *Local) List(ctx context.Context, dir string) ([]Entry, error) {
	if err := ctxErr(ctx, "list", dir); err != nil {
		return nil, err
	}
	d, err := cleanDir(dir)
	if err != nil {
		return nil, fmt.Errorf("storage: list: %w", err)
	}
	name := d
	if name == "" {
		name = "."
	}
	f, err := l.root.Open(name)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
			return []Entry{}, nil
		}
		return nil, l.wrap("list", dir, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, l.wrap("list", dir, err)
	}
	if !fi.IsDir() {
		return []Entry{}, nil
	}
	des, err := f.ReadDir(-1)
	if err != nil {
		return nil, l.wrap("list", dir, err)
	}
	out := make([]Entry, 0, len(des))
	for _, de := range des {
		if strings.HasPrefix(de.Name(), tempPrefix) {
			continue
		}
		var info fs.FileInfo
		if de.Type()&fs.ModeSymlink != 0 {
			// Resolve through the root: a link out of the tree, or a
			// dangling one, is simply not part of the store.
			info, err = l.root.Stat(path.Join(name, de.Name()))
			if err != nil {
				continue
			}
		} else if info, err = de.Info(); err != nil {
			continue // removed since ReadDir
		}
		e := Entry{Name: de.Name(), IsDir: info.IsDir(), ModTime: info.ModTime()}
		if !e.IsDir {
			if !info.Mode().IsRegular() {
				continue
			}
			e.Size = info.Size()
		}
		out = append(out, e)
	}
	sortEntries(out)
	return out, nil
}

func (l *Local) Delete(ctx context.Context, key string) error {
	if err := ctxErr(ctx, "delete", key); err != nil {
		return err
	}
	if _, err := CleanKey(key); err != nil {
		return fmt.Errorf("storage: delete: %w", err)
	}
	fi, err := l.root.Lstat(key)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
			return nil
		}
		return l.wrap("delete", key, err)
	}
	if fi.IsDir() {
		return fmt.Errorf("storage: delete %q: is a directory (use DeletePrefix)", key)
	}
	if err := l.root.Remove(key); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return l.wrap("delete", key, err)
	}
	return nil
}

func (l *Local) DeletePrefix(ctx context.Context, dir string) error {
	if err := ctxErr(ctx, "delete prefix", dir); err != nil {
		return err
	}
	d, err := cleanDir(dir)
	if err != nil {
		return fmt.Errorf("storage: delete prefix: %w", err)
	}
	if d != "" {
		// Moved out of the tree first, so that the prefix disappears at
		// once: a crash in the middle of removing files one by one would
		// leave a torn directory (an array with some of its commits, or an
		// empty __schema/ that TileDB takes for an array it cannot open).
		// A crash after the rename leaves hidden litter at the root.
		trash := tempName()
		switch err := l.root.Rename(d, trash); {
		case err == nil:
			_ = l.root.RemoveAll(trash) // the prefix is gone either way
			return nil
		case errors.Is(err, fs.ErrNotExist):
			return nil
		}
		if err := l.root.RemoveAll(d); err != nil {
			return l.wrap("delete prefix", dir, err)
		}
		return nil
	}
	// The root itself stays; only its contents go.
	f, err := l.root.Open(".")
	if err != nil {
		return l.wrap("delete prefix", dir, err)
	}
	des, err := f.ReadDir(-1)
	f.Close()
	if err != nil {
		return l.wrap("delete prefix", dir, err)
	}
	for _, de := range des {
		if err := ctxErr(ctx, "delete prefix", dir); err != nil {
			return err
		}
		if err := l.root.RemoveAll(de.Name()); err != nil {
			return l.wrap("delete prefix", de.Name(), err)
		}
	}
	return nil
}

func (l *Local) Stat(ctx context.Context, key string) (Entry, error) {
	if err := ctxErr(ctx, "stat", key); err != nil {
		return Entry{}, err
	}
	name := key
	if key == "" {
		name = "."
	} else if _, err := CleanKey(key); err != nil {
		return Entry{}, fmt.Errorf("storage: stat: %w", err)
	}
	fi, err := l.root.Stat(name)
	if err != nil {
		return Entry{}, l.wrap("stat", key, err)
	}
	e := Entry{Name: path.Base(key), IsDir: fi.IsDir(), ModTime: fi.ModTime()}
	if key == "" {
		e.Name = ""
	}
	if !e.IsDir {
		e.Size = fi.Size()
	}
	return e, nil
}
