package storage

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"time"
)

// TempCleaner is implemented by stores whose writes stage data under
// temporary names that a killed process leaves behind (Local's hidden
// ".tfput-*" entries at the root: a Put's file, a new directory being
// staged, a dropped array on its way out). Object stores have none: an S3
// PUT is atomic and leaves nothing when interrupted.
type TempCleaner interface {
	// CleanTemp removes the temporary entries a dead process left: those
	// not written by a live process and untouched for olderThan. It
	// returns their names and bytes.
	CleanTemp(ctx context.Context, olderThan time.Duration) (TempCleaned, error)
}

// TempCleaned is what CleanTemp removed.
type TempCleaned struct {
	Names []string `json:"names"`
	Bytes int64    `json:"bytes"`
}

var _ TempCleaner = (*Local)(nil)

// CleanTemp removes the ".tfput-*" entries at the root that no live write
// owns. An entry is litter when the process named in it is not running
// (names without a process id, from before it was recorded, count as
// such) and nothing in it changed for olderThan: a write in progress
// keeps touching its entry, so the age protects writers of another
// machine or pid namespace sharing the directory, whose ids mean nothing
// here. This process's own entries are never removed.
func (l *Local) CleanTemp(ctx context.Context, olderThan time.Duration) (TempCleaned, error) {
	var out TempCleaned
	f, err := l.root.Open(".")
	if err != nil {
		return out, l.wrap("clean temporary files", ".", err)
	}
	des, err := f.ReadDir(-1)
	f.Close()
	if err != nil {
		return out, l.wrap("clean temporary files", ".", err)
	}
	cutoff := time.Now().Add(-olderThan)
	var errs []error
	for _, de := range des {
		if err := ctx.Err(); err != nil {
			return out, err
		}
		name := de.Name()
		if !strings.HasPrefix(name, tempPrefix) {
			continue
		}
		if pid, ok := tempPID(name); ok && (pid == os.Getpid() || processAlive(pid)) {
			continue
		}
		newest, size, err := l.newest(name)
		if err != nil {
			if !errors.Is(err, fs.ErrNotExist) { // gone meanwhile: its writer finished
				errs = append(errs, err)
			}
			continue
		}
		if newest.After(cutoff) {
			continue
		}
		if err := l.root.RemoveAll(name); err != nil {
			errs = append(errs, l.wrap("clean temporary files", name, err))
			continue
		}
		out.Names = append(out.Names, name)
		out.Bytes += size
	}
	return out, errors.Join(errs...)
}

// tempPID is the process id in a temporary entry's name.
func tempPID(name string) (int, bool) {
	rest := strings.TrimPrefix(name, tempPrefix)
	i := strings.IndexByte(rest, '-')
	if i <= 0 {
		return 0, false
	}
	pid, err := strconv.Atoi(rest[:i])
	return pid, err == nil && pid > 0
}

// newest is the latest modification time in the tree at name and its
// size in bytes.
func (l *Local) newest(name string) (time.Time, int64, error) {
	var newest time.Time
	var size int64
	err := fs.WalkDir(l.root.FS(), name, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		if fi.ModTime().After(newest) {
			newest = fi.ModTime()
		}
		if !d.IsDir() {
			size += fi.Size()
		}
		return nil
	})
	if err != nil {
		return time.Time{}, 0, fmt.Errorf("storage: clean temporary files: %w", err)
	}
	return newest, size, nil
}
