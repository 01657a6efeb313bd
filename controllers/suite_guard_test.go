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
// among them) before it first reaches it; so does every helper that starts
// it. One that did not would work in a whole-package run, after another
// test started the cluster, and fail with a nil client when run alone.
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
	isGlobal := func(name string) bool { return slices.Contains(clusterGlobals, name) }
	reaches := closure(funcs, isGlobal)
	starts := closure(funcs, func(name string) bool { return name == "useCluster" })
	var late []string
	for name, fn := range funcs {
		entry := strings.HasPrefix(name, "Test") || strings.HasPrefix(name, "Benchmark")
		if (!entry || !reaches[name]) && !starts[name] {
			continue
		}
		local := localNames(fn)
		for _, stmt := range fn.Body.List {
			names := packageNames(stmt, local)
			if slices.ContainsFunc(names, func(n string) bool { return n == "useCluster" || starts[n] }) {
				break
			}
			if i := slices.IndexFunc(names, func(n string) bool { return isGlobal(n) || reaches[n] }); i >= 0 {
				late = append(late, fset.Position(stmt.Pos()).String()+": "+name+" reaches the cluster ("+names[i]+") before it starts it")
				break
			}
		}
	}
	slices.Sort(late)
	if len(late) > 0 {
		t.Errorf("call useCluster first in these:\n%s", strings.Join(late, "\n"))
	}
}

// closure returns the functions of funcs whose bodies name an identifier
// that base holds for, or call (by name) a function that does.
func closure(funcs map[string]*ast.FuncDecl, base func(string) bool) map[string]bool {
	names := map[string][]string{}
	for name, fn := range funcs {
		names[name] = packageNames(fn.Body, localNames(fn))
	}
	in := map[string]bool{}
	for changed := true; changed; {
		changed = false
		for name := range funcs {
			if in[name] {
				continue
			}
			if slices.ContainsFunc(names[name], func(id string) bool { return base(id) || (in[id] && id != name) }) {
				in[name], changed = true, true
			}
		}
	}
	return in
}

// localNames are the names fn declares itself (its parameters, variables
// and closures), which are its own, not the package's.
func localNames(fn *ast.FuncDecl) map[string]bool {
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
	return local
}

// packageNames are the identifiers under node, in order, but the local ones.
func packageNames(node ast.Node, local map[string]bool) []string {
	var names []string
	ast.Inspect(node, func(n ast.Node) bool {
		if id, ok := n.(*ast.Ident); ok && !local[id.Name] {
			names = append(names, id.Name)
		}
		return true
	})
	return names
}
