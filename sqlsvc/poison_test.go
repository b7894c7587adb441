package sqlsvc

import (
	"os"
	"testing"

	"github.com/tileflight/tileflight/internal/bufpool"
)

// TestMain overwrites pooled tiles as they are recycled (sparse scans
// hand them to this package's records), so that a read of one after its
// release fails the tests instead of passing by luck.
func TestMain(m *testing.M) {
	bufpool.SetPoison(bufpool.Poison)
	os.Exit(m.Run())
}
