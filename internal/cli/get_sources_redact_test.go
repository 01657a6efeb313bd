package cli

import (
	"strings"
	"testing"

	imagev1 "github.com/fluxcd/image-reflector-controller/api/v1"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	uprevv1 "github.com/uprev-dev/uprev/api/v1alpha1"
)

// TestGetSourcesRedactsCredentials: a source whose URL carries a password
// (user:password@host) is listed, wide too, with the password redacted,
// whatever its kind.
func TestGetSourcesRedactsCredentials(t *testing.T) {
	g := NewWithT(t)
	const password = "hunter2-do-not-print"
	ns := newNamespace(t)
	semver := imagev1.ImagePolicyChoice{SemVer: &imagev1.SemVerPolicy{Range: "*"}}
	for name, spec := range map[string]uprevv1.ReleaseSourceSpec{
		"chart":    {HelmRepository: &uprevv1.HelmRepositorySource{URL: "https://bot:" + password + "@charts.example.com/stable", Chart: "podinfo"}},
		"releases": {GitHubReleases: &uprevv1.GitHubReleasesSource{Repository: "acme/tool", URL: "https://bot:" + password + "@git.example.com/api/v3"}},
		"tags":     {GitTags: &uprevv1.GitTagsSource{URL: "https://bot:" + password + "@git.example.com/acme/tool.git"}},
		"feed":     {HTTPJSON: &uprevv1.HTTPJSONSource{URL: "https://bot:" + password + "@feed.example.com/releases.json", Versions: "{.version}"}},
	} {
		spec.Interval = metav1.Duration{Duration: 3600e9}
		spec.Policy = semver
		createWithStatus(t, &uprevv1.ReleaseSource{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: spec})
	}
	for _, args := range [][]string{{"get", "sources"}, {"get", "sources", "-o", "wide"}} {
		res := uprev(t, append(args, "-n", ns, kubeconfigFlag)...)
		g.Expect(res.stderr).To(BeEmpty(), strings.Join(args, " "))
		g.Expect(res.stdout).To(MatchRegexp(`(?m)^chart .*\nfeed .*\nreleases .*\ntags .*\n$`), strings.Join(args, " "))
		g.Expect(res.stdout).NotTo(ContainSubstring(password), strings.Join(args, " "))
	}
	wide := uprev(t, "get", "sources", "-o", "wide", "-n", ns, kubeconfigFlag).stdout
	for _, from := range []string{
		"podinfo in https://bot:xxxxx@charts.example.com/stable",
		"acme/tool at https://bot:xxxxx@git.example.com/api/v3",
		"https://bot:xxxxx@git.example.com/acme/tool.git",
		"https://bot:xxxxx@feed.example.com/releases.json {.version}",
	} {
		g.Expect(wide).To(ContainSubstring(from))
	}
}
