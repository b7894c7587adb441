package errkind

import (
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"syscall"
	"testing"
)

func TestFromOS(t *testing.T) {
	pathErr := func(e syscall.Errno) error {
		return fmt.Errorf("storage: put %q: %w", "a/__fragments/x", &fs.PathError{Op: "write", Path: ".tfput-1", Err: e})
	}
	plain := errors.New("something else")
	kinded := Errorf(NotFound, "array %q", "a")
	cases := []struct {
		name   string
		err    error
		kind   error
		prefix string
	}{
		{"ENOSPC", pathErr(syscall.ENOSPC), ResourceExhausted, "storage is full: "},
		{"EDQUOT", pathErr(syscall.EDQUOT), ResourceExhausted, "storage quota exceeded: "},
		{"EROFS", pathErr(syscall.EROFS), FailedPrecondition, "storage is read-only: "},
		{"EIO", pathErr(syscall.EIO), DataLoss, "storage I/O error: "},
		{"other errno", pathErr(syscall.EPERM), nil, ""},
		{"not an OS error", plain, nil, ""},
		{"already of a kind", kinded, NotFound, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := FromOS(tc.err)
			if Of(got) != tc.kind {
				t.Fatalf("kind %v, want %v", Of(got), tc.kind)
			}
			if tc.prefix == "" {
				if got != tc.err {
					t.Fatalf("changed an error it has no kind for: %v", got)
				}
				return
			}
			if !strings.HasPrefix(got.Error(), tc.prefix) || !strings.HasSuffix(got.Error(), tc.err.Error()) {
				t.Fatalf("message %q", got)
			}
			if !errors.Is(got, tc.err) {
				t.Fatal("the cause is no longer wrapped")
			}
		})
	}
	if FromOS(nil) != nil {
		t.Fatal("nil")
	}
}
