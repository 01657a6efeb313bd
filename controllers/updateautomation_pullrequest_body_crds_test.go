package controllers

import (
	"context"
	"regexp"
	"strings"
	"testing"

	imagev1 "github.com/fluxcd/image-reflector-controller/api/v1"
	. "github.com/onsi/gomega"

	uprevv1 "github.com/uprev-dev/uprev/api/v1alpha1"
	"github.com/uprev-dev/uprev/internal/testenv/gitea"
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

// TestPullRequestBodyWarnsOfCRDVersionRemoved: on a real Gitea, a chart
// bump whose CRD no longer serves a version it served puts a warning at
// the top of the pull request, naming the CRD and the version, before the
// change and what uprev checked. The whole body is compared.
func TestPullRequestBodyWarnsOfCRDVersionRemoved(t *testing.T) {
	t.Parallel() // its Gitea, registry, namespace and objects are its own
	g := NewWithT(t)
	forge := gitea.Start(t)
	f := newAutomationFixture(t, nil, nil)
	gitURL := forge.CreateRepo(t, fleetRepo, "main", map[string]string{"clusters/agent/release.yaml": f.expand(agentRelease)})
	g.Expect(k8s.Create(context.Background(), secretWith(f.ns, "git", map[string][]byte{
		"username": []byte(forge.Admin), "password": []byte(forge.Token),
	}))).To(Succeed())
	twoVersions := strings.Replace(testCRD("agents", "Agent", "1.0.0"), "  versions:\n",
		"  versions:\n  - name: v1beta1\n    served: true\n    storage: false\n    schema: {openAPIV3Schema: {type: object}}\n", 1)
	f.pushChart("charts/agent", "1.0.0", map[string]string{"crds/agents.yaml": twoVersions})
	chartRepo := newRepository(t, f.ns, f.reg.Image("charts/agent"), func(r *imagev1.ImageRepository) { r.Name = "chart" })
	newPolicy(t, f.ns, "agent", semverChoice(">=1.0.0 <2.0.0"), func(p *imagev1.ImagePolicy) {
		p.Spec.ImageRepositoryRef.Name = "chart"
	})
	auto := newAutomation(t, f.ns, gitURL, withSecret("git"), withChartCRDs, withPullRequest(uprevv1.PullRequestSpec{Provider: "gitea", URL: forge.URL}))
	st := waitForPullRequest(t, auto, "")
	body := func() string {
		pr, _, err := forge.Client(t).GetPullRequest(forge.Admin, fleetRepo, st.PullRequest.Number)
		g.Expect(err).NotTo(HaveOccurred())
		return pr.Body
	}
	g.Expect(body()).NotTo(ContainSubstring("Warning"))

	f.pushChart("charts/agent", "1.1.0", map[string]string{"crds/agents.yaml": testCRD("agents", "Agent", "1.1.0")})
	requestReconcile(t, chartRepo)
	st = waitForPullRequest(t, auto, st.LastPushCommit)
	got := body()
	seen := regexp.MustCompile(`(?m)^- First seen: \S+ \(\d+ (min|h|days) ago\)$`).FindString(got)
	g.Expect(seen).NotTo(BeEmpty(), got)
	want := "### Warnings\n\n" +
		"- **Warning:** CRD `agents.example.com` drops version `v1beta1`, which it served: clients and manifests that use `v1beta1` stop working\n\n" +
		"### Changes\n\n" +
		"- `clusters/agent/release.yaml` (NS/agent): `1.0.0` --> `1.1.0`\n\n" +
		"### Release notes\n\n" +
		"**NS/agent: 1.0.0 --> 1.1.0**\n\n" +
		"SEEN\n" +
		"- No release notes: the new version has no org.opencontainers.image.source label or annotation.\n\n\n" +
		"### CRDs\n\n" +
		"- crds: agents.example.com 1.0.0 --> 1.1.0\n\n" +
		"---\nOpened by uprev for UpdateAutomation NS/fleet at HEAD" +
		". Each push to the branch updates this description; once merged or closed, the next change opens a new pull request.\n"
	g.Expect(got).To(Equal(strings.NewReplacer("SEEN", seen, "NS", f.ns, "HEAD", st.LastPushCommit[:10]).Replace(want)))
}
