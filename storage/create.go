package storage

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
)

// ErrExists is returned (wrapped) by Creator.Create when the key exists
// already. It matches fs.ErrExist with errors.Is.
var ErrExists = fs.ErrExist

// Creator is implemented by stores that can write an object only if its
// key does not exist yet, as one atomic step: of several callers
// creating one key at once, exactly one succeeds and the others get
// ErrExists. Leases (who compacts an array in a cluster) rest on it.
// Local uses a hard link of a complete file, Mem a check under its lock,
// S3 a PUT with If-None-Match: *.
type Creator interface {
	Create(ctx context.Context, key string, data []byte) error
}

var (
	_ Creator = (*Local)(nil)
	_ Creator = (*Mem)(nil)
)

// Create writes key only when it does not exist: the data goes to a
// complete hidden file first, which is then hard-linked to key (link(2)
// fails when key exists, atomically) and unlinked.
func (l *Local) Create(ctx context.Context, key string, data []byte) error {
	if err := ctxErr(ctx, "create", key); err != nil {
		return err
	}
	if _, err := CleanKey(key); err != nil {
		return fmt.Errorf("storage: create: %w", err)
	}
	if dir := path.Dir(key); dir != "." {
		if err := l.root.MkdirAll(dir, 0o755); err != nil {
			return l.wrap("create", key, err)
		}
	}
	tmp := tempName()
	f, err := l.root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return l.wrap("create", key, err)
	}
	defer l.root.Remove(tmp)
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return l.wrap("create", key, err)
	}
	if err := l.root.Link(tmp, key); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("storage: create %q: %w", key, ErrExists)
		}
		return l.wrap("create", key, err)
	}
	if d, err := l.root.Open(path.Dir(key)); err == nil {
		d.Sync()
		d.Close()
	}
	return nil
}

// Create writes key only when it does not exist.
func (m *Mem) Create(ctx context.Context, key string, data []byte) error {
	if err := ctxErr(ctx, "create", key); err != nil {
		return err
	}
	if _, err := CleanKey(key); err != nil {
		return fmt.Errorf("storage: create: %w", err)
	}
	// The check and the write are one step for callers of Create: creates
	// are serialized here (Put takes mu itself).
	m.createMu.Lock()
	defer m.createMu.Unlock()
	m.mu.Lock()
	_, ok := m.objs[key]
	m.mu.Unlock()
	if ok {
		return fmt.Errorf("storage: create %q: %w", key, ErrExists)
	}
	return m.Put(ctx, key, data)
}
