// Package monitoring checks the alerts of config/monitoring with the real
// promtool: the rules parse, and each alert fires on the series it is
// meant for, after its `for`, and on no other.
package monitoring

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/uprev-dev/uprev/internal/testenv/reporoot"
)

// promtool returns the path of bin/promtool, failing the test with how to
// build it when it is missing.
func promtool(t *testing.T) string {
	t.Helper()
	path := filepath.Join(reporoot.Dir(), "bin", "promtool")
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("%s is missing: run `make promtool` (builds Prometheus's promtool from the Go module proxy into bin/): %v", path, err)
	}
	return path
}

// run runs promtool with args in dir and fails the test with its output
// when it fails.
func run(t *testing.T, dir string, args ...string) {
	t.Helper()
	cmd := exec.Command(promtool(t), args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("promtool %v: %v\n%s", args, err, out)
	}
	t.Logf("promtool %v:\n%s", args, out)
}

func TestAlertRules(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(reporoot.Dir(), "config", "monitoring", "prometheusrule.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var rule struct {
		APIVersion string         `json:"apiVersion"`
		Kind       string         `json:"kind"`
		Metadata   map[string]any `json:"metadata"`
		Spec       struct {
			Groups []any `json:"groups"`
		} `json:"spec"`
	}
	if err := yaml.UnmarshalStrict(raw, &rule); err != nil {
		t.Fatalf("reading the PrometheusRule: %v", err)
	}
	if rule.APIVersion != "monitoring.coreos.com/v1" || rule.Kind != "PrometheusRule" || len(rule.Spec.Groups) == 0 {
		t.Fatalf("not a PrometheusRule with groups: %s %s, %d groups", rule.APIVersion, rule.Kind, len(rule.Spec.Groups))
	}
	// A rules file is the PrometheusRule's spec.
	rules, err := yaml.Marshal(map[string]any{"groups": rule.Spec.Groups})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "rules.yaml"), rules, 0o644); err != nil {
		t.Fatal(err)
	}
	tests, err := os.ReadFile("rules_test.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "rules_test.yaml"), tests, 0o644); err != nil {
		t.Fatal(err)
	}
	run(t, dir, "check", "rules", "rules.yaml")
	run(t, dir, "test", "rules", "rules_test.yaml")
}
