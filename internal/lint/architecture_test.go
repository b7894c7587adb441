package lint

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// docSections returns docs/architecture.md split by "## " headings.
func docSections(t *testing.T) map[string]string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot(t), "docs", "architecture.md"))
	if err != nil {
		t.Fatal(err)
	}
	sections := map[string]string{}
	var name string
	for _, line := range strings.SplitAfter(string(b), "\n") {
		if h, ok := strings.CutPrefix(line, "## "); ok {
			name = strings.TrimSpace(h)
			continue
		}
		sections[name] += line
	}
	return sections
}

// A package map row: "| `reader/dense` | what it owns |".
var mapRow = regexp.MustCompile("(?m)^\\| `([a-z0-9_./]+)` \\|")

// TestPackageMapIsTrue: docs/architecture.md's package map lists every
// package of the module exactly once, and nothing that is not one.
func TestPackageMapIsTrue(t *testing.T) {
	pkgs := packages(t)
	section, ok := docSections(t)["Package map"]
	if !ok {
		t.Fatal(`docs/architecture.md has no "## Package map" section`)
	}
	seen := map[string]int{}
	for _, m := range mapRow.FindAllStringSubmatch(section, -1) {
		seen[m[1]]++
	}
	for _, p := range sortedKeys(pkgs) {
		switch seen[p] {
		case 0:
			t.Errorf("package %s is missing from docs/architecture.md's package map", p)
		case 1:
		default:
			t.Errorf("package %s is listed %d times in the package map", p, seen[p])
		}
	}
	for _, p := range sortedKeys(seen) {
		if pkgs[p] == nil {
			t.Errorf("the package map lists %s, which go list does not know", p)
		}
	}
}

// The read path's chain: a line in a fenced block of "## Read path" such
// as "cmd/flightd -> mux -> flightsvc -> reader".
var chainLine = regexp.MustCompile(`(?m)^[a-z0-9_/]+( -> [a-z0-9_/]+)+$`)

// TestReadPathIsTrue: each step of the read path's chain is a direct
// import in the code, so the map cannot describe a path that no longer
// exists.
func TestReadPathIsTrue(t *testing.T) {
	pkgs := packages(t)
	section, ok := docSections(t)["Read path"]
	if !ok {
		t.Fatal(`docs/architecture.md has no "## Read path" section`)
	}
	chains := chainLine.FindAllString(section, -1)
	if len(chains) == 0 {
		t.Fatal(`"## Read path" has no chain line "a -> b -> c"`)
	}
	for _, chain := range chains {
		steps := strings.Split(chain, " -> ")
		for i := 0; i+1 < len(steps); i++ {
			from, to := steps[i], steps[i+1]
			p := pkgs[from]
			if p == nil {
				t.Errorf("read path: %s is not a package", from)
				continue
			}
			if !contains(p.Imports, to) {
				t.Errorf("read path: %s does not import %s", from, to)
			}
		}
	}
}
