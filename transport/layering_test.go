package transport

import (
	"go/build"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The package comment's rule: of the module's own packages, transport
// and its subpackages import only errkind and each other.
func TestImportsStayBelowTheService(t *testing.T) {
	const module = "github.com/tileflight/tileflight/"
	allowed := func(p string) bool {
		return p == module+"errkind" || p == module+"transport" || strings.HasPrefix(p, module+"transport/")
	}
	checked := 0
	err := filepath.WalkDir(".", func(dir string, d os.DirEntry, err error) error {
		switch {
		case err != nil:
			return err
		case !d.IsDir():
			return nil
		case d.Name() == "testdata":
			return filepath.SkipDir
		}
		pkg, err := build.ImportDir(dir, 0)
		if _, ok := err.(*build.NoGoError); ok {
			return nil
		}
		if err != nil {
			return err
		}
		checked++
		for _, imports := range [][]string{pkg.Imports, pkg.TestImports, pkg.XTestImports} {
			for _, p := range imports {
				if strings.HasPrefix(p, module) && !allowed(p) {
					t.Errorf("%s imports %s: transport imports only errkind and its own subpackages (package comment)", dir, p)
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked < 3 { // transport, sendconn, ipcbody
		t.Fatalf("checked %d packages, want transport and its subpackages", checked)
	}
}
