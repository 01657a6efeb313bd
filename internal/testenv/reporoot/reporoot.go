// Package reporoot finds the root of the uprev repository for tests and
// the demo, which read its config/ and run the programs of its bin/.
//
// It looks up from the working directory, where `go test` runs each
// package's tests and `make demo` runs the demo, for the go.mod of uprev's
// module. It does not use the source path compiled into the binary:
// builds with -trimpath (make test, make build) keep none, so that the
// build cache holds across clones and worktrees.
package reporoot

import (
	"bufio"
	"os"
	"path/filepath"
	"strings"
	"sync"
)

// module is the module path on the first line of uprev's go.mod.
const module = "github.com/uprev-dev/uprev"

// Dir returns the repository root: the nearest directory at or above the
// working directory whose go.mod declares uprev's module. Outside the
// repository it returns the working directory, so that a missing file is
// reported under a path the user can see.
var Dir = sync.OnceValue(func() string {
	wd, err := os.Getwd()
	if err != nil {
		return "."
	}
	for dir := wd; ; {
		if declaresModule(filepath.Join(dir, "go.mod")) {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return wd
		}
		dir = parent
	}
})

// declaresModule reports whether the go.mod at path is uprev's (the
// nested modules, hack/lint and test/controlplane, are not).
func declaresModule(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer func() { _ = f.Close() }()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if fields := strings.Fields(s.Text()); len(fields) == 2 && fields[0] == "module" {
			return fields[1] == module
		}
	}
	return false
}
