// Command uprev-lint is the project's linter: go vet's analyzers,
// staticcheck (with its simple, style and quickfix checks), unused,
// errcheck, ineffassign, gosec, bodyclose, and the layering rules
// (layering.go). `make lint` runs it as `go vet -vettool`, so it needs
// nothing but this small module built, and go's build cache keeps its
// work: from empty caches it builds a quarter of the packages
// golangci-lint did (issue 35). Findings a rule does not apply to are
// dropped where exclusions.go says, each with why.
package main

import (
	"encoding/json"
	"os"
	"strings"

	"golang.org/x/tools/go/analysis"
	"golang.org/x/tools/go/analysis/unitchecker"
)

func main() {
	analyzers := append(vetAnalyzers(), staticcheckAnalyzers()...)
	analyzers = append(analyzers, unusedAnalyzer(), layering)
	analyzers = append(analyzers, others()...)
	if thirdParty(os.Args) {
		unitchecker.Main(dependencyAnalyzers(analyzers)...)
	}
	for _, a := range analyzers {
		excluding(a)
	}
	unitchecker.Main(analyzers...)
}

// excluding makes a report only the findings that exclusions.go keeps,
// each ending with the name of its check.
func excluding(a *analysis.Analyzer) {
	run := a.Run
	a.Run = func(pass *analysis.Pass) (any, error) {
		filtered := *pass
		filtered.Report = func(d analysis.Diagnostic) {
			if !excluded(pass, a.Name, d) {
				d.Message += " (" + a.Name + ")"
				pass.Report(d)
			}
		}
		return run(&filtered)
	}
}

// thirdParty tells whether go vet asks only for the facts of a package
// of another module than uprev and the standard library's: uprev's own
// packages and the standard library's get every check's facts.
func thirdParty(args []string) bool {
	if len(args) < 2 || !strings.HasSuffix(args[len(args)-1], ".cfg") {
		return false
	}
	data, err := os.ReadFile(args[len(args)-1])
	if err != nil {
		return false // unitchecker.Main says why
	}
	var unit struct {
		ModulePath string
		VetxOnly   bool
	}
	if json.Unmarshal(data, &unit) != nil {
		return false
	}
	return unit.VetxOnly && unit.ModulePath != "" && unit.ModulePath != "std" && unit.ModulePath != module
}
