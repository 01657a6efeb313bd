package controllers

import (
	"strings"
	"testing"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	uprevv1 "github.com/uprev-dev/uprev/api/v1alpha1"
	"github.com/uprev-dev/uprev/internal/testenv/githubapi"
	"github.com/uprev-dev/uprev/internal/testenv/gitserver"
)

// k8sComponents is Constellation's ConfigMap of component URLs and hashes,
// with uprev's ReleaseSource markers.
const k8sComponents = `apiVersion: v1
kind: ConfigMap
metadata:
  name: k8s-components
data:
  version: v1.30.1 # {"$uprev": "kubernetes"}
  kubeadm-url: "DL/release/v1.30.1/bin/linux/amd64/kubeadm" # {"$uprev": "NS:kubernetes:url:kubeadm"}
  kubeadm-hash: "sha256:0000000000000000000000000000000000000000000000000000000000000000" # {"$uprev": "NS:kubernetes:sha256:kubeadm"}
`

// An UpdateAutomation writes a ReleaseSource's version, asset URL and hash
// to Git like image markers: one commit, old --> new lines, an
// Uprev-Update trailer naming the source; its policySelector selects the
// source; a revert of the commit holds the version.
func TestAutomationWritesReleaseSourceMarkers(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	api := githubapi.StartReleases(t)
	api.SetReleases("kubernetes/kubernetes", githubapi.Release{TagName: "v1.30.2"}, githubapi.Release{TagName: "v1.30.1"})
	dl := startReleaseDownloads(t)
	dl.publish("/release/v1.30.2/bin/linux/amd64/kubeadm", "kubeadm 1.30.2", "kubeadm 1.30.2")
	git := gitserver.Start(t)
	expand := strings.NewReplacer("NS", ns, "DL", dl.URL).Replace
	url := git.InitRepo(t, fleetRepo, "main", map[string]string{"components.yaml": expand(k8sComponents)})
	mainTip := git.Log(t, fleetRepo, "main")[0].SHA

	rs := &uprevv1.ReleaseSource{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "kubernetes", Labels: map[string]string{"automate": "yes"}},
		Spec: uprevv1.ReleaseSourceSpec{
			Interval:       metav1.Duration{Duration: 3600e9},
			GitHubReleases: &uprevv1.GitHubReleasesSource{Repository: "kubernetes/kubernetes", URL: api.URL},
			Policy:         semverChoice("~1.30.0"),
			Assets: []uprevv1.AssetSpec{{
				Name:     "kubeadm",
				URL:      dl.URL + "/release/{{.Version}}/bin/linux/amd64/kubeadm",
				Checksum: &uprevv1.AssetChecksum{URL: dl.URL + "/release/{{.Version}}/bin/linux/amd64/kubeadm.sha256"},
			}},
		},
	}
	g.Expect(k8s.Create(t.Context(), rs)).To(Succeed())
	g.Eventually(func(g Gomega) { g.Expect(sourceLatest(g, rs).Version).To(Equal("v1.30.2")) }).Should(Succeed())

	auto := newAutomation(t, ns, url, func(a *uprevv1.UpdateAutomation) {
		a.Spec.PolicySelector = &metav1.LabelSelector{MatchLabels: map[string]string{"automate": "yes"}}
	})
	sha := waitForPush(t, auto, "")
	hash := "sha256:" + hexSHA256("kubeadm 1.30.2")
	want := strings.NewReplacer(
		"version: v1.30.1", "version: v1.30.2",
		"release/v1.30.1/", "release/v1.30.2/",
		"sha256:0000000000000000000000000000000000000000000000000000000000000000", hash,
	).Replace(expand(k8sComponents))
	g.Expect(git.ReadFile(t, fleetRepo, "main", "components.yaml")).To(Equal(want))

	commits := git.Log(t, fleetRepo, "main")
	g.Expect(commits).To(HaveLen(2))
	g.Expect(commits[0].Parents).To(Equal([]string{mainTip}))
	message := git.Git(t, fleetRepo, "log", "-1", "--format=%B", sha)
	g.Expect(message).To(ContainSubstring("components.yaml: v1.30.1 --> v1.30.2"))
	g.Expect(message).To(ContainSubstring("components.yaml: sha256:0000000000000000000000000000000000000000000000000000000000000000 --> " + hash))
	g.Expect(message).To(ContainSubstring("Uprev-Update: ReleaseSource/" + ns + "/kubernetes v1.30.1 --> v1.30.2"))
	g.Eventually(func(g Gomega) {
		getAutomation(g, auto)
		g.Expect(conditions.IsReady(auto)).To(BeTrue())
		g.Expect(auto.Status.ObservedPolicies).To(HaveKeyWithValue("ReleaseSource/kubernetes", HaveField("Tag", "v1.30.2")))
	}).Should(Succeed())

	// A person reverts the commit: the version is held, not written again.
	revert := git.Revert(t, fleetRepo, "main", sha)
	st := runAutomation(t, auto)
	g.Expect(git.Log(t, fleetRepo, "main")[0].SHA).To(Equal(revert))
	g.Expect(git.ReadFile(t, fleetRepo, "main", "components.yaml")).To(Equal(expand(k8sComponents)))
	g.Expect(st.Holds).To(ContainElement(HaveField("Version", "v1.30.2")))
	g.Expect(conditions.GetMessage(auto, meta.ReadyCondition)).To(ContainSubstring("held"))
}

// Flux's ImageUpdateAutomation writes ReleaseSource markers too: a chart
// version from a classic Helm repository, with Flux's message template.
func TestImageUpdateAutomationWritesReleaseSourceMarkers(t *testing.T) {
	g := NewWithT(t)
	f := newAutomationFixture(t, []string{"1.0.0"}, map[string]string{
		"clusters/my-cluster/podinfo.yaml": podinfoRelease,
	}, gitserver.WithBasicAuth("flux", "s3cret"))
	repo := startHelmRepository(t, chartIndex("podinfo", "6.5.0", "6.5.4", "7.0.0"))
	rs := newReleaseSource(t, f.ns, "podinfo", uprevv1.ReleaseSourceSpec{
		HelmRepository: &uprevv1.HelmRepositorySource{URL: repo.URL, Chart: "podinfo"},
		Policy:         semverChoice("6.x"),
	})
	g.Eventually(func(g Gomega) { g.Expect(sourceLatest(g, rs).Version).To(Equal("6.5.4")) }).Should(Succeed())
	f.fluxSource()
	auto := f.fluxAutomation()
	st := waitForFluxPush(t, auto, "")
	g.Expect(f.readFile("main", "clusters/my-cluster/podinfo.yaml")).To(Equal(strings.Replace(podinfoRelease, "version: 6.5.0 #", "version: 6.5.4 #", 1)))
	g.Expect(f.commitField(st.LastPushCommit, "%B")).To(ContainSubstring("- 6.5.0 -> 6.5.4"))
}

// podinfoRelease is a HelmRelease whose chart version follows the
// ReleaseSource podinfo of the automation's namespace.
const podinfoRelease = `apiVersion: helm.toolkit.fluxcd.io/v2
kind: HelmRelease
metadata:
  name: podinfo
spec:
  chart:
    spec:
      chart: podinfo
      version: 6.5.0 # {"$uprev": "podinfo"}
`
