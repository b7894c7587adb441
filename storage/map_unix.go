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
		return nil, nil, wrap("map", key, err)
	}
	defer f.Close() // the mapping outlives the descriptor
	fi, err := f.Stat()
	if err != nil {
		return nil, nil, wrap("map", key, err)
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
