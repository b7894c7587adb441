package storage

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// CleanTemp removes what a dead process left and only that: never this
// process's entries, never a running process's, never a recent one.
func TestCleanTemp(t *testing.T) {
	dir := t.TempDir()
	l, err := NewLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	// A pid that ran and exited.
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Skip("no `true` to run:", err)
	}
	dead := cmd.Process.Pid
	old := time.Now().Add(-2 * time.Hour)
	entries := []struct {
		name    string
		dir     bool
		age     time.Time
		removed bool
	}{
		{fmt.Sprintf("%s%d-aa", tempPrefix, dead), false, old, true},
		{fmt.Sprintf("%s%d-bb", tempPrefix, dead), true, old, true}, // a staged directory or a dropped array
		{tempPrefix + "0123456789abcdef", false, old, true},         // a name from before pids were recorded
		{fmt.Sprintf("%s%d-cc", tempPrefix, dead), false, time.Now(), false},
		{fmt.Sprintf("%s%d-dd", tempPrefix, os.Getpid()), false, old, false}, // this process's live write
		{fmt.Sprintf("%s%d-ee", tempPrefix, 1), false, old, false},           // a running process's
		{"a", true, old, false}, // not a temporary entry
	}
	for _, e := range entries {
		p := filepath.Join(dir, e.name)
		if e.dir {
			if err := os.MkdirAll(filepath.Join(p, "x", "__schema"), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(p, "x", "__schema", "f"), []byte("12345"), 0o644); err != nil {
				t.Fatal(err)
			}
			for _, q := range []string{filepath.Join(p, "x", "__schema", "f"), filepath.Join(p, "x", "__schema"), filepath.Join(p, "x")} {
				os.Chtimes(q, e.age, e.age)
			}
		} else if err := os.WriteFile(p, []byte("123"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(p, e.age, e.age); err != nil {
			t.Fatal(err)
		}
	}
	got, err := l.CleanTemp(context.Background(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		_, statErr := os.Stat(filepath.Join(dir, e.name))
		if gone := os.IsNotExist(statErr); gone != e.removed {
			t.Errorf("%s: removed %v, want %v", e.name, gone, e.removed)
		}
		if slices.Contains(got.Names, e.name) != e.removed {
			t.Errorf("%s: reported %v, want %v", e.name, !e.removed, e.removed)
		}
	}
	if got.Bytes != 3+5+3 {
		t.Errorf("reported %d bytes, want 11", got.Bytes)
	}
	// A Put's own temporary name carries this process's id.
	if pid, ok := tempPID(tempName()); !ok || pid != os.Getpid() {
		t.Errorf("tempName carries pid %d (%v)", pid, ok)
	}
}
