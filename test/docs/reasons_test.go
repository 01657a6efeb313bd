// Package docs checks that the documentation keeps up with the code: every
// condition and event reason the manager sets is explained in
// docs/troubleshooting.md.
package docs

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// root is the repository root, from this package.
const root = "../.."

// TestEveryReasonDocumented finds the reasons the manager can set, the
// constants named *Reason declared in api/v1alpha1 and controllers and
// those of other packages (Flux's, fluxcd/pkg's) that controllers use,
// and fails for each one docs/troubleshooting.md does not name in
// backquotes.
func TestEveryReasonDocumented(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join(root, "docs", "troubleshooting.md"))
	if err != nil {
		t.Fatal(err)
	}
	reasons := map[string]string{} // value -> where it comes from
	used := map[string]map[string]bool{}
	for _, dir := range []string{"api/v1alpha1", "controllers"} {
		for name, value := range reasonConstants(t, filepath.Join(root, dir)) {
			reasons[value] = dir + "." + name
		}
		for path, names := range reasonSelectors(t, filepath.Join(root, dir)) {
			if used[path] == nil {
				used[path] = map[string]bool{}
			}
			for name := range names {
				used[path][name] = true
			}
		}
	}
	for path, names := range used {
		consts := reasonConstants(t, packageDir(t, path))
		for name := range names {
			value, ok := consts[name]
			if !ok {
				t.Errorf("%s.%s: no string constant of that name in %s", path, name, packageDir(t, path))
				continue
			}
			reasons[value] = path + "." + name
		}
	}
	if len(reasons) < 40 {
		t.Fatalf("found only %d reasons; the search is broken: %v", len(reasons), reasons)
	}
	for value, from := range reasons {
		if !strings.Contains(string(doc), "`"+value+"`") {
			t.Errorf("reason %q (%s) is not in docs/troubleshooting.md: add a row saying what it means and what to do", value, from)
		}
	}
}

// goFiles parses the Go files of dir, but its tests.
func goFiles(t *testing.T, dir string) []*ast.File {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var files []*ast.File
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), filepath.Join(dir, e.Name()), nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	return files
}

// reasonConstants returns the string constants of dir named *Reason (or
// *reason), by name.
func reasonConstants(t *testing.T, dir string) map[string]string {
	t.Helper()
	consts := map[string]string{}
	for _, f := range goFiles(t, dir) {
		for _, decl := range f.Decls {
			gen, ok := decl.(*ast.GenDecl)
			if !ok || gen.Tok != token.CONST {
				continue
			}
			for _, spec := range gen.Specs {
				vs := spec.(*ast.ValueSpec)
				for i, name := range vs.Names {
					if !strings.HasSuffix(strings.ToLower(name.Name), "reason") || i >= len(vs.Values) {
						continue
					}
					if lit, ok := vs.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
						value, err := strconv.Unquote(lit.Value)
						if err != nil {
							t.Fatal(err)
						}
						consts[name.Name] = value
					}
				}
			}
		}
	}
	return consts
}

// reasonSelectors returns the names *Reason that the files of dir take from
// other packages, by import path.
func reasonSelectors(t *testing.T, dir string) map[string]map[string]bool {
	t.Helper()
	used := map[string]map[string]bool{}
	for _, f := range goFiles(t, dir) {
		imports := map[string]string{}
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			name := filepath.Base(path)
			if imp.Name != nil {
				name = imp.Name.Name
			}
			imports[name] = path
		}
		ast.Inspect(f, func(n ast.Node) bool {
			sel, ok := n.(*ast.SelectorExpr)
			if !ok || !strings.HasSuffix(sel.Sel.Name, "Reason") {
				return true
			}
			if x, ok := sel.X.(*ast.Ident); ok && imports[x.Name] != "" {
				path := imports[x.Name]
				if used[path] == nil {
					used[path] = map[string]bool{}
				}
				used[path][sel.Sel.Name] = true
			}
			return true
		})
	}
	return used
}

// packageDir returns the directory of the package of import path path.
func packageDir(t *testing.T, path string) string {
	t.Helper()
	cmd := exec.Command("go", "list", "-f", "{{.Dir}}", path)
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list %s: %v", path, err)
	}
	return strings.TrimSpace(string(out))
}
