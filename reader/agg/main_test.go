package agg_test

import (
	"testing"

	"github.com/tileflight/tileflight/reader/internal/readtest"
)

// TestMain: see readtest.Main (poisoned buffers).
func TestMain(m *testing.M) { readtest.Main(m) }
