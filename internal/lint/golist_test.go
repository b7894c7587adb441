package lint

import (
	"bytes"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"testing"
)

const module = "github.com/tileflight/tileflight"

// pkg is what the tests need of `go list -json`: the package's path
// relative to the module root ("" for none), its name and its non-test
// imports, module packages also relative.
type pkg struct {
	Path    string
	Name    string
	Imports []string // module-relative for module packages, full otherwise
	Doc     string
}

var (
	listOnce sync.Once
	listed   map[string]*pkg
	listErr  error
)

// repoRoot is the module's root directory (two levels above this file).
func repoRoot(t testing.TB) string {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("cannot find the test's own file")
	}
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// packages lists every package of the module once per test binary.
func packages(t testing.TB) map[string]*pkg {
	t.Helper()
	listOnce.Do(func() {
		cmd := exec.Command("go", "list", "-json", "./...")
		cmd.Dir = repoRoot(t)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			listErr = err
			if stderr.Len() > 0 {
				listErr = &listError{err: err, stderr: stderr.String()}
			}
			return
		}
		listed = map[string]*pkg{}
		dec := json.NewDecoder(bytes.NewReader(out))
		for dec.More() {
			var p struct {
				ImportPath string
				Name       string
				Doc        string
				Imports    []string
			}
			if err := dec.Decode(&p); err != nil {
				listErr = err
				return
			}
			q := &pkg{Path: rel(p.ImportPath), Name: p.Name, Doc: p.Doc}
			for _, imp := range p.Imports {
				q.Imports = append(q.Imports, rel(imp))
			}
			listed[q.Path] = q
		}
	})
	if listErr != nil {
		t.Fatalf("go list: %v", listErr)
	}
	return listed
}

type listError struct {
	err    error
	stderr string
}

func (e *listError) Error() string { return e.err.Error() + ": " + e.stderr }

// rel turns a module import path into the path below the module root;
// other paths are returned as they are.
func rel(importPath string) string {
	if importPath == module {
		return "."
	}
	if r, ok := strings.CutPrefix(importPath, module+"/"); ok {
		return r
	}
	return importPath
}

// isModule says whether an import path (as rel returns it) is the module's.
func isModule(p string) bool {
	return p == "." || !strings.Contains(strings.SplitN(p, "/", 2)[0], ".") && listed[p] != nil
}

// within reports whether p is the package dir or below it.
func within(p, dir string) bool {
	return p == dir || strings.HasPrefix(p, dir+"/")
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
