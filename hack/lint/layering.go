package main

import (
	"strconv"
	"strings"

	"golang.org/x/tools/go/analysis"
)

// layer is one layering rule of DESIGN.md: files whose path (from the
// module's root) is in applies may not import deny.
type layer struct {
	name    string
	applies func(path string) bool
	deny    []string
	why     string
}

// layers are the layering of the code (DESIGN.md, issue 20).
var layers = []layer{
	{
		name: "engines",
		applies: func(p string) bool {
			return strings.HasPrefix(p, "internal/") && !under(p, "internal/cli", "internal/testenv")
		},
		deny: []string{"controllers", "internal/cli"},
		why:  "engines know nothing of the controllers or the CLI; a controller calls an engine, never the reverse",
	},
	{
		name: "read-model",
		applies: func(p string) bool {
			return !isTest(p) && !under(p, "internal/cli", "internal/dashboard", "internal/fleet", "hack")
		},
		deny: []string{"internal/fleet"},
		why:  "internal/fleet is the read model of the CLI and its dashboard; controllers and engines use the engine that owns the rule (images of applied objects are internal/apply's)",
	},
	{
		name: "production",
		applies: func(p string) bool {
			return !isTest(p) && !under(p, "internal/testenv", "test", "hack")
		},
		deny: []string{"internal/testenv"},
		why:  "test servers and helpers are for tests only",
	},
}

// layering reports an import that a layer denies.
var layering = &analysis.Analyzer{
	Name: "layering",
	Doc:  "reports imports that break the layering of the code (DESIGN.md)",
	Run: func(pass *analysis.Pass) (any, error) {
		for _, f := range pass.Files {
			path := relativePath(pass.Pkg.Path(), pass.Fset.Position(f.Pos()).Filename)
			for _, spec := range f.Imports {
				imported, _ := strconv.Unquote(spec.Path.Value)
				for _, l := range layers {
					if denied := l.denies(path, imported); denied {
						pass.Reportf(spec.Pos(), "%s: %s may not import %s: %s", l.name, path, imported, l.why)
					}
				}
			}
		}
		return nil, nil
	},
}

// denies tells whether the layer keeps the file at path from importing
// imported.
func (l layer) denies(path, imported string) bool {
	if !l.applies(path) {
		return false
	}
	for _, d := range l.deny {
		if imported == module+"/"+d || strings.HasPrefix(imported, module+"/"+d+"/") {
			return true
		}
	}
	return false
}

// under tells whether path is in one of dirs.
func under(path string, dirs ...string) bool {
	for _, d := range dirs {
		if strings.HasPrefix(path, d+"/") {
			return true
		}
	}
	return false
}

func isTest(path string) bool { return strings.HasSuffix(path, "_test.go") }
