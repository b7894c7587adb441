package lint

import (
	"strings"
	"testing"
)

// A layer rule: no package at or below From may import a package at or
// below any of Forbid (module-relative directories, or full paths of
// other modules), except the packages listed in Allow. Why is what a
// reader of a failure needs to know.
type layerRule struct {
	From   string
	Forbid []string
	Allow  []string
	Why    string
}

// engine is every package that does the work of a query or a write;
// services and the transport sit above it, the format below it.
var engine = []string{"tdbarray", "reader", "writer", "lifecycle", "compact", "query", "arrowconv"}

// services are the RPC-facing packages.
var services = []string{"flightsvc", "sqlsvc", "mux", "transport", "cmd"}

var layerRules = []layerRule{
	{From: "format", Forbid: concat([]string{"storage", "filters", "b2nd", "internal/cache"}, engine, services),
		Why: "format/* only turns bytes into structures and back: no I/O, no policy (I/O belongs to tdbarray and writer)"},
	{From: "filters", Forbid: concat([]string{"storage", "b2nd"}, engine, services),
		Why: "filters transform bytes; they know neither where bytes live nor who asked"},
	{From: "b2nd/chunk", Forbid: concat([]string{"storage"}, engine, services),
		Why: "a .b2nd chunk is bytes in, bytes out"},
	{From: "b2nd/frame", Forbid: concat([]string{"storage"}, engine, services),
		Why: "a .b2nd frame is bytes in, bytes out"},
	{From: "b2nd", Forbid: concat(engine, services), Why: "the .b2nd format sits below the engine"},
	{From: "storage", Forbid: concat([]string{"format", "filters", "b2nd"}, engine, services),
		Why: "storage moves objects; it knows no format"},
	{From: "errkind", Forbid: []string{"."}, Allow: []string{"errkind"},
		Why: "errkind is the floor every package stands on: it imports nothing of the module"},
	{From: "query", Forbid: concat([]string{"storage", "tdbarray", "reader", "writer", "lifecycle"}, services),
		Why: "a query is parsed and checked without touching data"},
	{From: "arrowconv", Forbid: concat([]string{"storage", "tdbarray", "reader", "writer", "lifecycle", "query"}, services),
		Why: "arrowconv maps types and buffers; it opens nothing"},
	{From: "tdbarray", Forbid: concat([]string{"reader", "writer", "lifecycle", "arrowconv"}, services),
		Why: "opening an array holds no query or write logic"},
	{From: "reader", Forbid: concat([]string{"writer", "lifecycle"}, services),
		Why: "the read path never writes and never knows the RPC that asked"},
	{From: "writer", Forbid: concat([]string{"reader", "lifecycle"}, services),
		Why: "the write path never reads through the query engine and never knows the RPC that asked"},
	{From: "lifecycle", Forbid: concat([]string{"compact"}, services), Why: "array lifecycle (consolidate, vacuum, delete) is engine, not service"},
	{From: "compact", Forbid: services, Why: "automatic compaction is policy over lifecycle: it knows no RPC (the service only notifies it)"},
	{From: "transport", Forbid: concat([]string{"flightsvc", "sqlsvc", "mux", "storage", "tdbarray", "reader", "writer", "lifecycle", "query"}),
		Why: "the transport moves Arrow messages over gRPC; it knows nothing of arrays"},
	{From: "flightsvc", Forbid: []string{"sqlsvc", "mux", "cmd",
		"format/wire", "format/gentile", "format/pipeline", "filters/codecs", "b2nd/chunk"},
		Why: "the native service maps RPCs to the engine: no SQL, no format or codec internals"},
	{From: "sqlsvc", Forbid: []string{"flightsvc", "mux", "cmd", "storage", "filters", "b2nd", "reader", "writer", "lifecycle", "tdbarray", "transport"},
		Allow: []string{"sqlsvc/native"},
		Why:   "Flight SQL talks to the engine through its own narrow interface (sqlsvc/tables); only its adapter, sqlsvc/native, sees the engine"},
	{From: "internal", Forbid: concat(engine, services), Allow: []string{"internal/lint"},
		Why: "internal packages are helpers below the engine"},
	{From: ".", Forbid: []string{"github.com/sirupsen/logrus"},
		Why: "one logger (zerolog); go-mysql-server's logrus is kept quiet through its own API"},
}

func concat(lists ...[]string) []string {
	var out []string
	for _, l := range lists {
		out = append(out, l...)
	}
	return out
}

// TestLayering fails when a package imports what its layer forbids.
func TestLayering(t *testing.T) {
	pkgs := packages(t)
	for _, r := range layerRules {
		for _, path := range sortedKeys(pkgs) {
			if r.From != "." && !within(path, r.From) {
				continue
			}
			if contains(r.Allow, path) {
				continue
			}
			for _, imp := range pkgs[path].Imports {
				for _, f := range r.Forbid {
					if f == "." && isModule(imp) || f != "." && within(imp, f) {
						if within(imp, r.From) && r.From != "." && f != "." {
							continue // a layer may use its own packages
						}
						t.Errorf("%s imports %s: %s", path, imp, r.Why)
					}
				}
			}
		}
	}
}

// implementsParent lists the subpackages that import their parent because
// they implement the interface it defines (as io/fs's implementations do):
// the parent is the contract, not a caller.
var implementsParent = map[string]string{
	"storage/s3":      "storage.Store over an S3-compatible bucket",
	"storage/errorfs": "a storage.Store that injects faults, for tests",
	// A test helper may drive the package it sits below, as
	// net/http/httptest drives net/http; only tests import it (see
	// TestNothingImportsCommands).
	"reader/internal/readtest": "the helpers the reader packages' tests share, reading through reader.Open",
}

// TestNoImportOfAncestor: a subpackage never calls back up into its
// parent (reader/dense must not import reader), so that each directory
// level is a floor below the one above.
func TestNoImportOfAncestor(t *testing.T) {
	pkgs := packages(t)
	for _, path := range sortedKeys(pkgs) {
		if _, ok := implementsParent[path]; ok {
			continue
		}
		for _, imp := range pkgs[path].Imports {
			if imp != path && isModule(imp) && strings.HasPrefix(path, imp+"/") {
				t.Errorf("%s imports its ancestor %s", path, imp)
			}
		}
	}
}

// TestNothingImportsCommands: commands, benchmarks and test helpers are
// leaves; production code never depends on them.
func TestNothingImportsCommands(t *testing.T) {
	pkgs := packages(t)
	leaves := []string{"cmd", "benchmarks", "internal/fixtures", "internal/golden", "internal/s3test", "storage/errorfs", "reader/internal/readtest"}
	for _, path := range sortedKeys(pkgs) {
		if within(path, "cmd") || within(path, "benchmarks") || within(path, "internal/s3test") || within(path, "reader/internal/readtest") {
			continue // drivers may use test helpers
		}
		for _, imp := range pkgs[path].Imports {
			for _, l := range leaves {
				if within(imp, l) && !within(path, l) {
					t.Errorf("%s imports %s, which is a command or a test helper", path, imp)
				}
			}
		}
	}
}

// TestEveryPackageSaysWhatItOwns: each package has a package comment.
func TestEveryPackageSaysWhatItOwns(t *testing.T) {
	pkgs := packages(t)
	for _, path := range sortedKeys(pkgs) {
		p := pkgs[path]
		if within(path, "benchmarks") && p.Name != "main" {
			continue // test-only benchmark packages: their _test.go files say what they measure
		}
		if strings.TrimSpace(p.Doc) == "" {
			t.Errorf("%s has no package comment saying what it owns", path)
		}
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
