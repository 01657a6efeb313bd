package cli

import (
	"bytes"
	"context"
	"strings"
	"testing"

	imagev1 "github.com/fluxcd/image-reflector-controller/api/v1"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	uprevv1 "github.com/uprev-dev/uprev/api/v1alpha1"
	"github.com/uprev-dev/uprev/internal/guard"
	"github.com/uprev-dev/uprev/internal/testenv/gitserver"
)

// TestPlanCommandReleaseSources shows that a plan read from a cluster
// resolves the `$uprev` markers of ReleaseSources from their status, as a
// run writes them: the version, and each asset's URL and hash, in one line
// per file; a reverted version is held; a source not ready is skipped and
// named.
func TestPlanCommandReleaseSources(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	zero := "sha256:" + strings.Repeat("0", 64)
	hash := "sha256:" + strings.Repeat("ab", 32)
	source := func(name, version string, assets ...uprevv1.PinnedAsset) {
		rs := &uprevv1.ReleaseSource{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: uprevv1.ReleaseSourceSpec{
				Interval:       metav1.Duration{Duration: 3600e9},
				GitHubReleases: &uprevv1.GitHubReleasesSource{Repository: "acme/" + name},
				Policy:         imagev1.ImagePolicyChoice{SemVer: &imagev1.SemVerPolicy{Range: ">=0.0.0-0"}},
			},
		}
		if version != "" {
			rs.Status.Conditions = []metav1.Condition{ready(metav1.ConditionTrue, "Succeeded", "resolved to "+version)}
			rs.Status.Latest = &uprevv1.SourceVersion{Version: version, Assets: assets}
		}
		createWithStatus(t, rs)
	}
	source("kubernetes", "v1.30.2", uprevv1.PinnedAsset{Name: "kubeadm", URL: "https://dl.example.com/v1.30.2/kubeadm", SHA256: hash})
	source("linkerd", "2.14.10")
	source("pending", "")

	components := "version: v1.30.1 # {\"$uprev\": \"" + ns + ":kubernetes\"}\n" +
		"kubeadm-url: https://dl.example.com/v1.30.1/kubeadm # {\"$uprev\": \"" + ns + ":kubernetes:url:kubeadm\"}\n" +
		"kubeadm-hash: " + zero + " # {\"$uprev\": \"" + ns + ":kubernetes:sha256:kubeadm\"}\n"
	mesh := func(version string) string {
		return "version: " + version + " # {\"$uprev\": \"" + ns + ":linkerd\"}\n"
	}
	pending := "version: 1.0.0 # {\"$uprev\": \"" + ns + ":pending\"}\n"
	dir := t.TempDir()
	gitserver.RunGit(t, dir, "init", "-q", "-b", "main")
	planCommit(t, dir, "Add fleet", map[string]string{
		"clusters/components.yaml": components, "clusters/mesh.yaml": mesh("2.14.9"), "clusters/pending.yaml": pending,
	})
	linkerd := "ReleaseSource/" + ns + "/linkerd"
	planCommit(t, dir, "Update linkerd\n\n"+guard.FormatUpdateTrailer(guard.Update{Policy: linkerd, Old: "2.14.9", New: "2.14.10"}),
		map[string]string{"clusters/mesh.yaml": mesh("2.14.10")})
	gitserver.RunGit(t, dir, "revert", "--no-edit", "HEAD")
	revert := gitserver.RunGit(t, dir, "rev-parse", "HEAD")

	var stdout, stderr bytes.Buffer
	code := runPlan(ctx, []string{"--checkout", dir, "--path", "clusters", kubeconfigFlag, "--namespace", ns}, &stdout, &stderr)
	g.Expect(code).To(Equal(2), "stderr: %s", stderr.String())
	g.Expect(stdout.String()).To(Equal(
		"clusters/components.yaml: ReleaseSource/" + ns + "/kubernetes v1.30.1 --> v1.30.2\n" +
			"held: " + linkerd + " 2.14.10 (reverted in " + revert[:10] + ")\n" +
			"refused: clusters/mesh.yaml: " + linkerd + " 2.14.9 --> 2.14.10 (held)\n"))
	g.Expect(stderr.String()).To(Equal("skipped policies not ready: ReleaseSource/" + ns + "/pending\n"))
	g.Expect(gitserver.RunGit(t, dir, "status", "--porcelain")).To(BeEmpty(), "a plan writes nothing")
}
