//go:build unix

package storage

import (
	"context"
	"fmt"
	"syscall"
)

// Map maps the whole object key read-only into memory (see Mapper).
func (l *Local) Map(ctx context.Context, key string) ([]byte, func() error, error) {
	if err := ctxErr(ctx, "map", key); err != nil {
		return nil, nil, err
	}
	if _, err := CleanKey(key); err != nil {
		return nil, nil, fmt.Errorf("storage: map: %w", err)
	}
	f, err := l.root.Open(key)
	if err != nil {
		return nil, nil, l.wrap("map", key, err)
	}
	defer f.Close() // the mapping outlives the descriptor
	fi, err := f.Stat()
	if err != nil {
		return nil, nil, l.wrap("map", key, err)
	}
	if fi.IsDir() {
		return nil, nil, notFound("map", key)
	}
	if fi.Size() == 0 || int64(int(fi.Size())) != fi.Size() {
		return nil, nil, fmt.Errorf("storage: map %q: %d bytes cannot be mapped", key, fi.Size())
	}
	b, err := syscall.Mmap(int(f.Fd()), 0, int(fi.Size()), syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		return nil, nil, fmt.Errorf("storage: map %q: %w", key, err)
	}
	return b, func() error { return syscall.Munmap(b) }, nil
}

// MapID identifies the current version of object key (see Mapper): its
// file's device, inode, size and modification time.
func (l *Local) MapID(ctx context.Context, key string) (string, error) {
	if _, err := CleanKey(key); err != nil {
		return "", fmt.Errorf("storage: map: %w", err)
	}
	fi, err := l.root.Stat(key)
	if err != nil {
		return "", l.wrap("map", key, err)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok || fi.IsDir() {
		return "", fmt.Errorf("storage: map %q: not a regular file", key)
	}
	return fmt.Sprintf("%d:%d:%d:%d", st.Dev, st.Ino, fi.Size(), fi.ModTime().UnixNano()), nil
}
