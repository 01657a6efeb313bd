package main

import (
	"go/ast"
	"go/token"
	"regexp"
	"strings"

	"golang.org/x/tools/go/analysis"
)

// module is the import path of the module linted.
const module = "github.com/uprev-dev/uprev"

// exclusion drops one linter's findings in files whose path (from the
// module's root) matches path and, when text is set, whose message
// contains it.
type exclusion struct {
	path   *regexp.Regexp
	linter string
	text   string
}

// exclusions are the rules that do not apply where they name, each with why.
var exclusions = []exclusion{
	// Tests, test servers and the demo run what the test names: files and
	// commands at paths it chose, temp files, self-signed TLS, fixed
	// secrets made up for the test.
	{path: regexp.MustCompile(`(_test\.go$|^internal/testenv/|^test/|^hack/)`), linter: "gosec"},
	// G304: the CLI reads files the user names on its command line
	// (templates, image lists); nothing reads a path an object chose.
	{path: regexp.MustCompile(`^internal/(cli|plan)/`), linter: "gosec", text: "G304"},
	// G404: the interval jitter and the registry's retry backoff spread
	// load; nothing depends on their being hard to guess.
	{path: regexp.MustCompile(`^(controllers/jitter\.go|internal/registry/transport\.go)$`), linter: "gosec", text: "G404"},
	// G124: the dashboard serves plain HTTP only (loopback, or with its
	// token elsewhere); a Secure cookie would never be sent back.
	{path: regexp.MustCompile(`^internal/dashboard/access\.go$`), linter: "gosec", text: "G124"},
	// G705: the object page is text/plain, and every answer carries nosniff
	// and a default-src 'self' policy (Server.ServeHTTP): a browser shows
	// what it echoes as text, never runs it.
	{path: regexp.MustCompile(`^internal/dashboard/server\.go$`), linter: "gosec", text: "G705"},
	// G101: names of headers and Secret keys, not credentials.
	{path: regexp.MustCompile(`^internal/webhook/`), linter: "gosec", text: "G101"},
}

// excluded tells whether linter's finding d is dropped: an exclusion
// covers it, it is in generated code, or its line says
// `//nolint:<linter> // why`.
func excluded(pass *analysis.Pass, linter string, d analysis.Diagnostic) bool {
	file := fileOf(pass, d.Pos)
	if file == nil {
		return false
	}
	if ast.IsGenerated(file) || nolint(pass.Fset, file, d.Pos, linter) {
		return true
	}
	path := relativePath(pass.Pkg.Path(), pass.Fset.Position(d.Pos).Filename)
	for _, e := range exclusions {
		if e.linter == linter && e.path.MatchString(path) && strings.Contains(d.Message, e.text) {
			return true
		}
	}
	return false
}

// relativePath is filename's path from the module's root, known from the
// package's import path (an external test package's ends in _test).
func relativePath(pkgPath, filename string) string {
	dir := strings.TrimSuffix(strings.TrimPrefix(pkgPath, module), "_test")
	dir = strings.TrimPrefix(dir, "/")
	base := filename[strings.LastIndex(filename, "/")+1:]
	if dir == "" {
		return base
	}
	return dir + "/" + base
}

// nolint tells whether the line of pos carries a //nolint comment that
// names linter.
func nolint(fset *token.FileSet, file *ast.File, pos token.Pos, linter string) bool {
	line := fset.Position(pos).Line
	for _, group := range file.Comments {
		for _, c := range group.List {
			if fset.Position(c.Slash).Line != line || !strings.HasPrefix(c.Text, "//nolint:") {
				continue
			}
			names, _, _ := strings.Cut(strings.TrimPrefix(c.Text, "//nolint:"), " ")
			for _, name := range strings.Split(names, ",") {
				if name == linter || isStaticcheck(linter) && name == "staticcheck" {
					return true
				}
			}
		}
	}
	return false
}

// isStaticcheck tells whether a check is one of staticcheck's (SA1019,
// S1000, ST1005, QF1001), which //nolint:staticcheck names together.
func isStaticcheck(name string) bool {
	return regexp.MustCompile(`^(SA|S|ST|QF)[0-9]{4}$`).MatchString(name)
}

// fileOf is the file of pass that holds pos.
func fileOf(pass *analysis.Pass, pos token.Pos) *ast.File {
	for _, f := range pass.Files {
		if f.FileStart <= pos && pos <= f.FileEnd {
			return f
		}
	}
	return nil
}

// positionOf is the token.Pos of a position in one of pass's files.
func positionOf(pass *analysis.Pass, p token.Position) token.Pos {
	for _, f := range pass.Files {
		tf := pass.Fset.File(f.Pos())
		if tf.Name() == p.Filename && p.Line >= 1 && p.Line <= tf.LineCount() {
			return tf.LineStart(p.Line) + token.Pos(p.Column-1)
		}
	}
	return token.NoPos
}
