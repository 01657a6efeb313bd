package main

import (
	"reflect"
	"slices"

	"github.com/gordonklaus/ineffassign/pkg/ineffassign"
	"github.com/kisielk/errcheck/errcheck"
	gosec "github.com/securego/gosec/v2/goanalysis"
	"github.com/timakin/bodyclose/passes/bodyclose"
	"golang.org/x/tools/go/analysis"
	"golang.org/x/tools/go/analysis/passes/appends"
	"golang.org/x/tools/go/analysis/passes/asmdecl"
	"golang.org/x/tools/go/analysis/passes/assign"
	"golang.org/x/tools/go/analysis/passes/atomic"
	"golang.org/x/tools/go/analysis/passes/bools"
	"golang.org/x/tools/go/analysis/passes/buildtag"
	"golang.org/x/tools/go/analysis/passes/cgocall"
	"golang.org/x/tools/go/analysis/passes/composite"
	"golang.org/x/tools/go/analysis/passes/copylock"
	"golang.org/x/tools/go/analysis/passes/defers"
	"golang.org/x/tools/go/analysis/passes/directive"
	"golang.org/x/tools/go/analysis/passes/errorsas"
	"golang.org/x/tools/go/analysis/passes/framepointer"
	"golang.org/x/tools/go/analysis/passes/hostport"
	"golang.org/x/tools/go/analysis/passes/httpresponse"
	"golang.org/x/tools/go/analysis/passes/ifaceassert"
	"golang.org/x/tools/go/analysis/passes/loopclosure"
	"golang.org/x/tools/go/analysis/passes/lostcancel"
	"golang.org/x/tools/go/analysis/passes/nilfunc"
	"golang.org/x/tools/go/analysis/passes/printf"
	"golang.org/x/tools/go/analysis/passes/shift"
	"golang.org/x/tools/go/analysis/passes/sigchanyzer"
	"golang.org/x/tools/go/analysis/passes/slog"
	"golang.org/x/tools/go/analysis/passes/stdmethods"
	"golang.org/x/tools/go/analysis/passes/stdversion"
	"golang.org/x/tools/go/analysis/passes/stringintconv"
	"golang.org/x/tools/go/analysis/passes/structtag"
	"golang.org/x/tools/go/analysis/passes/testinggoroutine"
	"golang.org/x/tools/go/analysis/passes/tests"
	"golang.org/x/tools/go/analysis/passes/timeformat"
	"golang.org/x/tools/go/analysis/passes/unmarshal"
	"golang.org/x/tools/go/analysis/passes/unreachable"
	"golang.org/x/tools/go/analysis/passes/unsafeptr"
	"golang.org/x/tools/go/analysis/passes/unusedresult"
	"golang.org/x/tools/go/analysis/passes/waitgroup"
	scconfig "honnef.co/go/tools/config"
	"honnef.co/go/tools/quickfix"
	"honnef.co/go/tools/simple"
	"honnef.co/go/tools/staticcheck"
	"honnef.co/go/tools/staticcheck/sa1019"
	"honnef.co/go/tools/stylecheck"
	"honnef.co/go/tools/unused"
)

// vetAnalyzers are go vet's own (cmd/vet's suite).
func vetAnalyzers() []*analysis.Analyzer {
	return []*analysis.Analyzer{
		appends.Analyzer, asmdecl.Analyzer, assign.Analyzer, atomic.Analyzer,
		bools.Analyzer, buildtag.Analyzer, cgocall.Analyzer, composite.Analyzer,
		copylock.Analyzer, defers.Analyzer, directive.Analyzer, errorsas.Analyzer,
		framepointer.Analyzer, hostport.Analyzer, httpresponse.Analyzer,
		ifaceassert.Analyzer, loopclosure.Analyzer, lostcancel.Analyzer,
		nilfunc.Analyzer, printf.Analyzer, shift.Analyzer, sigchanyzer.Analyzer,
		slog.Analyzer, stdmethods.Analyzer, stdversion.Analyzer,
		stringintconv.Analyzer, structtag.Analyzer, testinggoroutine.Analyzer,
		tests.Analyzer, timeformat.Analyzer, unmarshal.Analyzer,
		unreachable.Analyzer, unsafeptr.Analyzer, unusedresult.Analyzer,
		waitgroup.Analyzer,
	}
}

// dependencyAnalyzers are what runs on a third-party package: the
// checks whose facts about it are worth their cost, go vet's (printf
// wrappers, functions that never return) and staticcheck's deprecations
// (SA1019). The others would build staticcheck's IR of each of some
// 2,000 dependencies, most of a cold lint's time, for facts (purity,
// nil-ness) that only refine a few checks of uprev's own code. One
// analyzer that does nothing holds the other fact types of all, so that
// the facts the standard library's packages carry can still be read.
func dependencyAnalyzers(all []*analysis.Analyzer) []*analysis.Analyzer {
	cheap := append(vetAnalyzers(), sa1019.Analyzer)
	held := factTypes(cheap)
	others := &analysis.Analyzer{
		Name: "otherfacts",
		Doc:  "holds the fact types of the checks that do not run on third-party packages",
		Run:  func(*analysis.Pass) (any, error) { return nil, nil },
	}
	for t, fact := range factTypes(all) {
		if _, ok := held[t]; !ok {
			others.FactTypes = append(others.FactTypes, fact)
		}
	}
	return append(cheap, others)
}

// factTypes are the fact types of analyzers and of all they require.
func factTypes(analyzers []*analysis.Analyzer) map[reflect.Type]analysis.Fact {
	types := map[reflect.Type]analysis.Fact{}
	seen := map[*analysis.Analyzer]bool{}
	var walk func(a *analysis.Analyzer)
	walk = func(a *analysis.Analyzer) {
		if seen[a] {
			return
		}
		seen[a] = true
		for _, f := range a.FactTypes {
			types[reflect.TypeOf(f)] = f
		}
		for _, r := range a.Requires {
			walk(r)
		}
	}
	for _, a := range analyzers {
		walk(a)
	}
	return types
}

// skippedChecks are the staticcheck checks left out: golangci-lint's
// defaults, which this project linted with before. They ask for package
// comments, initialisms and receiver and error-string styles the code
// does not follow everywhere.
var skippedChecks = []string{"ST1000", "ST1003", "ST1016", "ST1020", "ST1021", "ST1022"}

// staticcheckAnalyzers are staticcheck's checks, its simple, style and
// quickfix ones too, but skippedChecks.
func staticcheckAnalyzers() []*analysis.Analyzer {
	config := scconfig.DefaultConfig
	config.Checks = append([]string{"all"}, prefixed("-", skippedChecks)...)
	scconfig.Analyzer.Run = func(*analysis.Pass) (any, error) { return &config, nil }
	var out []*analysis.Analyzer
	for _, a := range slices.Concat(staticcheck.Analyzers, simple.Analyzers, stylecheck.Analyzers, quickfix.Analyzers) {
		if !slices.Contains(skippedChecks, a.Analyzer.Name) {
			out = append(out, a.Analyzer)
		}
	}
	return out
}

func prefixed(prefix string, names []string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = prefix + n
	}
	return out
}

// unusedAnalyzer reports unexported names nothing uses, with
// staticcheck's default options: exported names, exported fields,
// parameters and local variables count as used, and so do writes to a
// field.
func unusedAnalyzer() *analysis.Analyzer {
	return &analysis.Analyzer{
		Name:     "unused",
		Doc:      "reports unused constants, variables, functions, types and fields",
		Requires: []*analysis.Analyzer{unused.Analyzer.Analyzer},
		Run:      reportUnused,
	}
}

func reportUnused(pass *analysis.Pass) (any, error) {
	result := pass.ResultOf[unused.Analyzer.Analyzer].(unused.Result)
	used := map[string]bool{}
	for _, obj := range result.Used {
		used[objectKey(obj)] = true
	}
	for _, obj := range result.Unused {
		if obj.Kind == "type param" || used[objectKey(obj)] {
			continue
		}
		pass.Report(analysis.Diagnostic{
			Pos:     positionOf(pass, obj.Position),
			Message: obj.Kind + " " + obj.Name + " is unused",
		})
	}
	return nil, nil
}

func objectKey(obj unused.Object) string {
	return obj.Position.String() + " " + obj.Name
}

// others are the remaining linters: errcheck, ineffassign, gosec and
// bodyclose.
func others() []*analysis.Analyzer {
	return []*analysis.Analyzer{errcheck.Analyzer, ineffassign.Analyzer, gosec.Analyzer, bodyclose.Analyzer}
}
