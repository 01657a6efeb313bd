package outbound

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/uprev-dev/uprev/internal/testenv/reporoot"
)

// forbidden are the ways out of the process that bypass this package: a
// client, transport or dialer made by hand, net/http's process-wide ones,
// and the dial functions. Each is named by import path and name.
var forbidden = map[string]map[string]string{
	"net/http": {
		"Client":           "an HTTP client made by hand",
		"Transport":        "an HTTP transport made by hand",
		"DefaultClient":    "net/http's default client",
		"DefaultTransport": "net/http's default transport",
		"Get":              "net/http's default client",
		"Head":             "net/http's default client",
		"Post":             "net/http's default client",
		"PostForm":         "net/http's default client",
	},
	"net": {
		"Dialer":      "a dialer made by hand",
		"Dial":        "a dial without the deny list",
		"DialTimeout": "a dial without the deny list",
	},
	"golang.org/x/crypto/ssh": {
		"Dial": "an SSH dial without the deny list",
	},
}

// exempt are the trees whose code is not the manager's: this package,
// the test servers and end-to-end suites, and the demo.
var exempt = []string{"internal/outbound/", "internal/testenv/", "test/", "hack/"}

// TestOneWayOut: no production file outside this package makes an HTTP
// client, transport or dialer of its own, or uses net/http's default ones,
// so that every call to a host an object names goes through the deny list,
// deadlines and bounds of this package. A type named in a declaration
// (a field of type *http.Client) is fine; making one is not.
func TestOneWayOut(t *testing.T) {
	root := reporoot.Dir()
	fset := token.NewFileSet()
	var found []string
	controllersRead := false
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if strings.HasPrefix(d.Name(), ".") && rel != "." || d.Name() == "bin" || d.Name() == "testdata" {
				return filepath.SkipDir
			}
			for _, e := range exempt {
				if rel+"/" == e {
					return filepath.SkipDir
				}
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		file, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		controllersRead = controllersRead || strings.HasPrefix(rel, "controllers/")
		for _, use := range forbiddenUses(file) {
			found = append(found, rel+":"+strconv.Itoa(fset.Position(use.pos).Line)+": "+use.what)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if !controllersRead {
		t.Fatalf("no file of controllers/ was read under %s: not the repository's root", root)
	}
	if len(found) > 0 {
		t.Errorf("calls out of the manager that bypass internal/outbound (use its Transport, Client or Dialer):\n%s", strings.Join(found, "\n"))
	}
}

// use is one forbidden use in a file.
type use struct {
	pos  token.Pos
	what string
}

// forbiddenUses returns the forbidden uses of file: composite literals of
// the forbidden types, and the forbidden functions and variables.
func forbiddenUses(file *ast.File) []use {
	imports := map[string]string{} // local name → import path
	for _, imp := range file.Imports {
		path, _ := strconv.Unquote(imp.Path.Value)
		name := path[strings.LastIndex(path, "/")+1:]
		if imp.Name != nil {
			name = imp.Name.Name
		}
		imports[name] = path
	}
	lookup := func(e ast.Expr) (string, string, bool) {
		sel, ok := e.(*ast.SelectorExpr)
		if !ok {
			return "", "", false
		}
		pkg, ok := sel.X.(*ast.Ident)
		if !ok {
			return "", "", false
		}
		why, ok := forbidden[imports[pkg.Name]][sel.Sel.Name]
		return pkg.Name + "." + sel.Sel.Name, why, ok
	}
	var uses []use
	types := map[ast.Expr]bool{} // type expressions, fine outside composite literals
	ast.Inspect(file, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.CompositeLit:
			if name, why, ok := lookup(n.Type); ok {
				uses = append(uses, use{n.Pos(), name + "{}: " + why})
			}
			types[n.Type] = true
		case *ast.Field:
			markTypes(n.Type, types)
		case *ast.ValueSpec:
			markTypes(n.Type, types)
		case *ast.TypeSpec:
			markTypes(n.Type, types)
		case *ast.TypeAssertExpr:
			markTypes(n.Type, types)
		case *ast.SelectorExpr:
			if types[n] {
				return true
			}
			if name, why, ok := lookup(n); ok && !isType(name) {
				uses = append(uses, use{n.Pos(), name + ": " + why})
			}
		}
		return true
	})
	return uses
}

// isType tells the forbidden names that are types, which may be named
// (as a field's or parameter's type) but not made.
func isType(name string) bool {
	_, typ, _ := strings.Cut(name, ".")
	return typ == "Client" || typ == "Transport" || typ == "Dialer"
}

// markTypes records the selector expressions inside a type expression.
func markTypes(e ast.Expr, types map[ast.Expr]bool) {
	if e == nil {
		return
	}
	ast.Inspect(e, func(n ast.Node) bool {
		if sel, ok := n.(*ast.SelectorExpr); ok {
			types[sel] = true
		}
		return true
	})
}

// TestOneWayOutFindsTheWaysAround: the check above finds each way around
// this package, so that it cannot pass by finding nothing.
func TestOneWayOutFindsTheWaysAround(t *testing.T) {
	src := `package p
import (
	"net"
	"net/http"
	gossh "golang.org/x/crypto/ssh"
)
type s struct{ c *http.Client; d net.Dialer }
func f(c *http.Client) {
	_ = &http.Client{}
	_ = http.DefaultTransport.(*http.Transport).Clone()
	_, _ = http.Get("http://x")
	_, _ = net.Dial("tcp", "x:1")
	_ = &net.Dialer{}
	_, _ = gossh.Dial("tcp", "x:22", nil)
}
`
	file, err := parser.ParseFile(token.NewFileSet(), "p.go", src, parser.SkipObjectResolution)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, u := range forbiddenUses(file) {
		got = append(got, u.what[:strings.Index(u.what, ":")])
	}
	want := []string{"http.Client{}", "http.DefaultTransport", "http.Get", "net.Dial", "net.Dialer{}", "gossh.Dial"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("found %q, want %q", got, want)
	}
}
