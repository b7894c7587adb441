// Package lint holds the tests that keep the house in order: the layering
// of the packages (which package may import which), written as a table of
// forbidden imports so that a leak fails `go test` instead of surfacing in a
// review months later, and the check that docs/architecture.md's package
// map and read path still describe the code as `go list` sees it.
//
// It has no code of its own; the tests shell out to `go list`, so they run
// wherever the Go toolchain that runs them is.
package lint
