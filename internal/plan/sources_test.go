package plan_test

import (
	"context"
	"strings"
	"testing"

	imagev1 "github.com/fluxcd/image-reflector-controller/api/v1"
	"github.com/fluxcd/pkg/apis/meta"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	uprevv1 "github.com/uprev-dev/uprev/api/v1alpha1"
	"github.com/uprev-dev/uprev/internal/guard"
	"github.com/uprev-dev/uprev/internal/plan"
	"github.com/uprev-dev/uprev/internal/update"
)

// TestComputeReleaseSources resolves the `$uprev` markers of a checkout
// from ReleaseSources' status, read as the controller reads them
// (guard.SourcesOf): the version and each asset's URL and hash are
// planned, a lower version is refused as a downgrade, and nothing is
// written.
func TestComputeReleaseSources(t *testing.T) {
	g := NewWithT(t)
	zero := "sha256:" + strings.Repeat("0", 64)
	hash := "sha256:" + strings.Repeat("ab", 32)
	files := map[string]string{
		"platform/components.yaml": "version: v1.30.1 # {\"$uprev\": \"fleet:kubernetes\"}\n" +
			"kubeadm-url: https://dl.example.com/v1.30.1/kubeadm # {\"$uprev\": \"fleet:kubernetes:url:kubeadm\"}\n" +
			"kubeadm-hash: " + zero + " # {\"$uprev\": \"fleet:kubernetes:sha256:kubeadm\"}\n",
		"platform/mesh.yaml": "version: edge-24.11.8 # {\"$uprev\": \"fleet:linkerd\"}\n",
	}
	dir := t.TempDir()
	writeFiles(t, dir, files)
	source := func(name, version string, policy imagev1.ImagePolicyChoice, filter *imagev1.TagFilter, assets ...uprevv1.PinnedAsset) uprevv1.ReleaseSource {
		return uprevv1.ReleaseSource{
			ObjectMeta: metav1.ObjectMeta{Namespace: "fleet", Name: name},
			Spec:       uprevv1.ReleaseSourceSpec{Policy: policy, FilterTags: filter},
			Status: uprevv1.ReleaseSourceStatus{
				Conditions: []metav1.Condition{{Type: meta.ReadyCondition, Status: metav1.ConditionTrue, Reason: meta.SucceededReason}},
				Latest:     &uprevv1.SourceVersion{Version: version, Assets: assets},
			},
		}
	}
	semver := imagev1.ImagePolicyChoice{SemVer: &imagev1.SemVerPolicy{Range: ">=0.0.0"}}
	policies, assets, notReady := guard.SourcesOf([]uprevv1.ReleaseSource{
		source("kubernetes", "v1.30.2", semver, nil, uprevv1.PinnedAsset{Name: "kubeadm", URL: "https://dl.example.com/v1.30.2/kubeadm", SHA256: hash}),
		source("linkerd", "edge-24.11.7", semver, &imagev1.TagFilter{Pattern: `^edge-(?P<v>.*)$`, Extract: "$v"}),
	})
	g.Expect(notReady).To(BeEmpty())

	p, err := plan.Compute(context.Background(), plan.Input{
		Root: dir, DefaultNamespace: "fleet",
		Input:  guard.Input{Policies: policies},
		Assets: assets,
	})
	g.Expect(err).NotTo(HaveOccurred())
	kubernetes := update.PolicyKey{Namespace: "fleet", Name: "kubernetes", Kind: update.SourceKind}
	linkerd := update.PolicyKey{Namespace: "fleet", Name: "linkerd", Kind: update.SourceKind}
	g.Expect(p.Result.Unresolved).To(BeEmpty())
	g.Expect(p.Result.Changes).To(HaveLen(3))
	var written []string
	for _, c := range p.Result.Changes {
		written = append(written, c.NewValue)
	}
	g.Expect(written).To(Equal([]string{"v1.30.2", "https://dl.example.com/v1.30.2/kubeadm", hash}))
	g.Expect(p.Lines()).To(Equal([]string{
		"platform/components.yaml: ReleaseSource/fleet/kubernetes v1.30.1 --> v1.30.2",
		"refused: platform/mesh.yaml: ReleaseSource/fleet/linkerd edge-24.11.8 --> edge-24.11.7 (downgrade)",
	}))
	g.Expect(p.Changes).To(ConsistOf(HaveField("Policy", kubernetes)))
	g.Expect(p.Refused).To(ConsistOf(HaveField("Policy", linkerd)))
	g.Expect(p.ExitCode()).To(Equal(plan.ExitChanges))
	g.Expect(readTree(t, dir)).To(Equal(files), "a plan writes nothing")
}
