//go:build linux

package sqlsvc

import (
	"os"
	"syscall"
	"testing"
)

// TestEngineQuiet: running statements writes nothing to stderr, even with
// go-mysql-server's analyzer asked to trace through the environment
// (DEBUG_ANALYZER, which makes it log every rule it runs at info level):
// the daemon logs calls itself, in its own format (newEngine).
func TestEngineQuiet(t *testing.T) {
	t.Setenv("DEBUG_ANALYZER", "1")
	c, _ := serveSQL(t)
	f, err := os.CreateTemp(t.TempDir(), "stderr")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	saved, err := syscall.Dup(2)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(saved)
	if err := syscall.Dup3(int(f.Fd()), 2, 0); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		"SELECT x, y, v FROM dense WHERE x < 3 ORDER BY v DESC LIMIT 2",
		"SELECT count(*), sum(v) FROM dense GROUP BY x",
		"SELECT d.x, p.s FROM dense d JOIN g.pts p ON d.x = p.k",
		"EXPLAIN SELECT * FROM g.pts WHERE k > 3",
		"SELECT nope FROM dense",
	} {
		rows(t, c, q)
	}
	if err := syscall.Dup3(saved, 2, 0); err != nil {
		t.Fatal(err)
	}
	out, err := os.ReadFile(f.Name())
	if err != nil {
		t.Fatal(err)
	}
	if len(out) > 0 {
		t.Fatalf("statements wrote %d bytes to stderr:\n%.2000s", len(out), out)
	}
}
