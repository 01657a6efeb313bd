package controllers

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// clusterGlobals are the variables startSuite sets: a test that reads one
// needs the control plane and the manager.
var clusterGlobals = []string{"k8s", "apiServer", "testCluster", "storagePath", "githubReleases"}

// TestClusterTestsStartTheCluster: every test and benchmark of this package
// that reaches the cluster, itself or through a helper of the package's
// tests, starts it (useCluster, or a helper that calls it, newNamespace
// among them). One that did not would work in a whole-package run, after
// another test started the cluster, and fail with a nil client when run
// alone.
func TestClusterTestsStartTheCluster(t *testing.T) {
	files, err := filepath.Glob("*_test.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	funcs := map[string]*ast.FuncDecl{}
	for _, name := range files {
		f, err := parser.ParseFile(fset, name, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		if f.Name.Name != "controllers" {
			continue
		}
		for _, d := range f.Decls {
			if fn, ok := d.(*ast.FuncDecl); ok && fn.Body != nil {
				funcs[fn.Name.Name] = fn
			}
		}
	}
	reaches := closure(funcs, func(name string) bool { return slices.Contains(clusterGlobals, name) })
	starts := closure(funcs, func(name string) bool { return name == "useCluster" })
	var missing []string
	for name, fn := range funcs {
		if (strings.HasPrefix(name, "Test") || strings.HasPrefix(name, "Benchmark")) && reaches[name] && !starts[name] {
			missing = append(missing, fset.Position(fn.Pos()).String()+": "+name)
		}
	}
	slices.Sort(missing)
	if len(missing) > 0 {
		t.Errorf("these reach the cluster but never start it; call useCluster(t) first:\n%s", strings.Join(missing, "\n"))
	}
}

// closure returns the functions of funcs whose bodies name an identifier
// that base holds for, or call (by name) a function that does. Names the
// function declares itself (its variables, closures among them) are its
// own, not the package's.
func closure(funcs map[string]*ast.FuncDecl, base func(string) bool) map[string]bool {
	names := map[string][]string{}
	for name, fn := range funcs {
		local := map[string]bool{}
		ast.Inspect(fn, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.AssignStmt:
				if n.Tok == token.DEFINE {
					for _, l := range n.Lhs {
						if id, ok := l.(*ast.Ident); ok {
							local[id.Name] = true
						}
					}
				}
			case *ast.ValueSpec:
				for _, id := range n.Names {
					local[id.Name] = true
				}
			case *ast.Field:
				for _, id := range n.Names {
					local[id.Name] = true
				}
			}
			return true
		})
		ast.Inspect(fn.Body, func(n ast.Node) bool {
			if id, ok := n.(*ast.Ident); ok && !local[id.Name] {
				names[name] = append(names[name], id.Name)
			}
			return true
		})
	}
	in := map[string]bool{}
	for changed := true; changed; {
		changed = false
		for name := range funcs {
			if in[name] {
				continue
			}
			for _, id := range names[name] {
				if base(id) || (in[id] && id != name) {
					in[name], changed = true, true
					break
				}
			}
		}
	}
	return in
}
