//go:build unix

package storage

import (
	"errors"
	"syscall"
)

// processAlive reports whether a process with this id runs (one of
// another user counts: EPERM).
func processAlive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}
