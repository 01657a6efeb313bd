package controllers

import (
	"context"
	"strings"
	"testing"

	imagev1 "github.com/fluxcd/image-reflector-controller/api/v1"
	"github.com/fluxcd/pkg/apis/meta"
	. "github.com/onsi/gomega"

	uprevv1 "github.com/uprev-dev/uprev/api/v1alpha1"
	"github.com/uprev-dev/uprev/internal/testenv/githubapi"
)

// crdYAML is a CRD manifest with versions given as name:served:storage.
func crdYAML(versions ...string) []byte {
	var b strings.Builder
	b.WriteString("apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: widgets.acme.io\nspec:\n  versions:\n")
	for _, v := range versions {
		parts := strings.Split(v, ":")
		b.WriteString("  - name: " + parts[0] + "\n    served: " + parts[1] + "\n    storage: " + parts[2] + "\n")
	}
	return []byte(b.String())
}

// TestCRDVersionRemovals: a served or stored version that the new CRD
// drops, or no longer serves, is a warning; versions added, kept, or
// dropped while neither served nor stored are not.
func TestCRDVersionRemovals(t *testing.T) {
	for _, tc := range []struct {
		name     string
		old, new []byte
		want     []string
	}{
		{"kept", crdYAML("v1:true:true"), crdYAML("v1:true:true"), nil},
		{"added", crdYAML("v1:true:true"), crdYAML("v1:true:true", "v2:true:false"), nil},
		{"served version dropped", crdYAML("v1beta1:true:false", "v1:true:true"), crdYAML("v1:true:true"),
			[]string{"CRD `widgets.acme.io` drops version `v1beta1`, which it served: clients and manifests that use `v1beta1` stop working"}},
		{"served version no longer served", crdYAML("v1beta1:true:false", "v1:true:true"), crdYAML("v1beta1:false:false", "v1:true:true"),
			[]string{"CRD `widgets.acme.io` no longer serves version `v1beta1`: clients and manifests that use `v1beta1` stop working"}},
		{"storage version dropped", crdYAML("v1beta1:true:true"), crdYAML("v1:true:true"),
			[]string{"CRD `widgets.acme.io` drops version `v1beta1`, its storage version: the API server refuses the update until objects stored at `v1beta1` are migrated and status.storedVersions no longer lists it"}},
		{"unserved, unstored version dropped", crdYAML("v1alpha1:false:false", "v1:true:true"), crdYAML("v1:true:true"), nil},
		{"hostile version name", []byte("spec:\n  versions:\n  - {name: \"a`@team <b>\\n- x\", served: true}\n"), crdYAML("v1:true:true"),
			[]string{"CRD `widgets.acme.io` drops version `a'@\u200bteam &lt;b> - x`, which it served: clients and manifests that use `a'@\u200bteam &lt;b> - x` stop working"}},
		{"not YAML", []byte("{"), crdYAML("v1:true:true"), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := crdVersionRemovals("widgets.acme.io", tc.old, tc.new)
			if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Errorf("got %q\nwant %q", got, tc.want)
			}
		})
	}
}

// TestPullRequestBodyWarnsOfCRDVersionRemoved: a chart bump whose CRD no
// longer serves a version it served puts a warning at the top of the pull
// request, naming the CRD and the version.
func TestPullRequestBodyWarnsOfCRDVersionRemoved(t *testing.T) {
	g := NewWithT(t)
	gh := githubapi.StartRepository(t, "acme", "fleet", "forge-token")
	f := newAutomationFixture(t, nil, map[string]string{"clusters/agent/release.yaml": agentRelease})
	twoVersions := strings.Replace(testCRD("agents", "Agent", "1.0.0"), "  versions:\n",
		"  versions:\n  - name: v1beta1\n    served: true\n    storage: false\n    schema: {openAPIV3Schema: {type: object}}\n", 1)
	f.pushChart("charts/agent", "1.0.0", map[string]string{"crds/agents.yaml": twoVersions})
	chartRepo := newRepository(t, f.ns, f.reg.Image("charts/agent"), func(r *imagev1.ImageRepository) { r.Name = "chart" })
	newPolicy(t, f.ns, "agent", semverChoice(">=1.0.0 <2.0.0"), func(p *imagev1.ImagePolicy) {
		p.Spec.ImageRepositoryRef.Name = "chart"
	})
	g.Expect(k8s.Create(context.Background(), secretWith(f.ns, "forge", map[string][]byte{"token": []byte("forge-token")}))).To(Succeed())
	auto := newAutomation(t, f.ns, f.url, withChartCRDs, withPullRequest(uprevv1.PullRequestSpec{
		Provider: "github", URL: gh.URL, Repository: "acme/fleet", SecretRef: &meta.LocalObjectReference{Name: "forge"},
	}))
	st := waitForPullRequest(t, auto, "")
	g.Expect(gh.PullRequests()[0].Body).NotTo(ContainSubstring("Warning"))

	f.pushChart("charts/agent", "1.1.0", map[string]string{"crds/agents.yaml": testCRD("agents", "Agent", "1.1.0")})
	requestReconcile(t, chartRepo)
	waitForPullRequest(t, auto, st.LastPushCommit)
	body := gh.PullRequests()[0].Body
	g.Expect(body).To(HavePrefix("### Warnings\n\n" +
		"- **Warning:** CRD `agents.example.com` drops version `v1beta1`, which it served: clients and manifests that use `v1beta1` stop working\n\n" +
		"### Changes\n\n"))
}
