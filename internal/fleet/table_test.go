package fleet

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"

	uprevv1 "github.com/uprev-dev/uprev/api/v1alpha1"
)

// updateGolden rewrites the golden files with what the tests render.
var updateGolden = flag.Bool("update", false, "rewrite testdata/*.golden with the rendered tables")

// expectGolden compares got with testdata/<name>.golden, or writes it
// there with -update.
func expectGolden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name+".golden")
	if *updateGolden {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatalf("writing %s: %v", path, err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("reading %s (run go test -update to write it): %v", path, err)
	}
	NewWithT(t).Expect(string(got)).To(Equal(string(want)), "rendered %s differs from %s; run go test -update if the change is intended", name, path)
}

func TestRenderGolden(t *testing.T) {
	for _, tc := range []struct {
		golden string
		in     Inputs
		format Format
	}{
		{golden: "fleet", in: fleetInputs(), format: FormatTable},
		{golden: "fleet-wide", in: fleetInputs(), format: FormatWide},
		{golden: "fleet-json", in: fleetInputs(), format: FormatJSON},
		{golden: "fleet-yaml", in: fleetInputs(), format: FormatYAML},
		{golden: "namespaces", in: twoNamespaces(), format: FormatTable},
		{golden: "empty", in: Inputs{Policies: fleetInputs().Policies}, format: FormatTable},
	} {
		t.Run(tc.golden, func(t *testing.T) {
			var out bytes.Buffer
			NewWithT(t).Expect(Render(&out, Build(tc.in), tc.format)).To(Succeed())
			expectGolden(t, tc.golden, out.Bytes())
		})
	}
}

// cellAt returns the cell of a table's component in the named column.
func cellAt(g Gomega, table Table, component, column string) Cell {
	col := -1
	for i, c := range table.Columns {
		if c.Name == column {
			col = i
		}
	}
	g.Expect(col).NotTo(Equal(-1), "no column %s", column)
	for _, r := range table.Rows {
		if r.Namespace+"/"+r.Component == component {
			return r.Cells[col]
		}
	}
	g.Expect(component).To(BeEmpty(), "no row %s", component)
	return Cell{}
}

func TestBuildStates(t *testing.T) {
	table := Build(fleetInputs())
	g := NewWithT(t)
	names := make([]string, len(table.Columns))
	for i, c := range table.Columns {
		names[i] = c.Name
	}
	g.Expect(names).To(Equal([]string{"staging/local", "edge-1", "prod/local", "eu-1", "us-1"}),
		"Syncs by namespace and name, targets in rollout order, named uniquely")
	var components []string
	for _, r := range table.Rows {
		components = append(components, r.Namespace+"/"+r.Component)
	}
	g.Expect(components).To(Equal([]string{ns + "/agent", ns + "/kms", ns + "/new", ns + "/redis", ns + "/web"}),
		"policies a Sync deploys, by name; unused is not deployed")

	for _, tc := range []struct {
		component, column string
		want              State
		why               string
	}{
		{"agent", "prod/local", UpToDate, "runs the latest tag and digest"},
		{"agent", "eu-1", Failed, "tried the revision and failed"},
		{"agent", "us-1", Waiting, "its wave has not started on the revision"},
		{"agent", "staging/local", Behind, "the latest tag at an older digest"},
		{"agent", "edge-1", Behind, "its Sync deploys agent, it runs none"},
		{"web", "prod/local", Held, "the revert of 2.1.0 reached it"},
		{"web", "us-1", Waiting, "still runs the held 2.1.0; the revert waits for its wave"},
		{"web", "staging/local", NotDeployed, "staging does not deploy web"},
		{"kms", "prod/local", Ahead, "Git holds 2.3.0, above the policy's 2.2.0"},
		{"kms", "us-1", Waiting, "runs 2.1.0, waiting"},
		{"redis", "us-1", UpToDate, "docker.io/library/redis and redis are one image"},
		{"new", "prod/local", Unknown, "the policy has no latest ref"},
		{"new", "us-1", Waiting, "runs none yet, waiting"},
	} {
		cell := cellAt(g, table, ns+"/"+tc.component, tc.column)
		g.Expect(cell.State).To(Equal(tc.want), "%s on %s: %s", tc.component, tc.column, tc.why)
	}
}

func TestBuildKeepsATargetWithInvalidWavesInOneWave(t *testing.T) {
	g := NewWithT(t)
	in := fleetInputs()
	in.Syncs[1].Spec.Rollout.Waves = [][]string{{"mars-1"}}
	table := Build(in)
	for _, c := range table.Columns {
		if c.Sync == ns+"/prod" {
			g.Expect(c.Wave).To(Equal(1))
		}
	}
	g.Expect(cellAt(g, table, ns+"/agent", "us-1").State).To(Equal(Behind), "no later wave: not waiting")
}

func TestRenderUnknownFormat(t *testing.T) {
	g := NewWithT(t)
	err := Render(&bytes.Buffer{}, Table{}, "name")
	g.Expect(err).To(MatchError(ContainSubstring(`unknown output format "name"`)))
}

func TestBuildNoSyncs(t *testing.T) {
	g := NewWithT(t)
	table := Build(Inputs{Automations: []uprevv1.UpdateAutomation{{}}})
	g.Expect(table.Columns).To(BeEmpty())
	g.Expect(table.Rows).To(BeEmpty())
}

// twoNamespaces is the fleet with one more policy on agent, in the staging
// namespace, following a faster release train.
func twoNamespaces() Inputs {
	in := fleetInputs()
	edge := semverPolicy("agent", "ghcr.io/acme/agent", "1.5.0-rc.1", "")
	edge.Namespace = "staging"
	in.Policies = append(in.Policies, edge)
	return in
}
