// Command legacygen writes the synthetic format v2 arrays of package
// legacygen into OUTDIR (python_tests/test_legacy_synthetic.py runs it).
//
//	go run ./cmd/legacygen OUTDIR
package main

import (
	"fmt"
	"os"

	"github.com/tileflight/tileflight/internal/legacygen"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: legacygen OUTDIR")
		os.Exit(2)
	}
	if err := legacygen.Write(os.Args[1]); err != nil {
		fmt.Fprintln(os.Stderr, "legacygen:", err)
		os.Exit(1)
	}
}
