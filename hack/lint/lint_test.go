package main

import (
	"testing"

	"github.com/kisielk/errcheck/errcheck"
	gosec "github.com/securego/gosec/v2/goanalysis"
	"golang.org/x/tools/go/analysis/analysistest"
)

// TestLayering shows each layering rule refusing an import, and the
// files it does not apply to (tests, the CLI, the demo) allowed.
func TestLayering(t *testing.T) {
	analysistest.Run(t, analysistest.TestData(), layering,
		"github.com/uprev-dev/uprev/internal/engine",
		"github.com/uprev-dev/uprev/internal/cli",
		"github.com/uprev-dev/uprev/hack/demo")
}

// TestExclusions shows findings kept and dropped: errcheck reports an
// error dropped out of sight but not one with //nolint:errcheck, nor in
// generated code; gosec's G304 is dropped in internal/plan and kept in
// internal/source.
func TestExclusions(t *testing.T) {
	excluding(errcheck.Analyzer)
	excluding(gosec.Analyzer)
	analysistest.Run(t, analysistest.TestData(), errcheck.Analyzer, "github.com/uprev-dev/uprev/internal/drop")
	analysistest.Run(t, analysistest.TestData(), gosec.Analyzer,
		"github.com/uprev-dev/uprev/internal/plan", "github.com/uprev-dev/uprev/internal/source")
}
