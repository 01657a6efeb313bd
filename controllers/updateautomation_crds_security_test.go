package controllers

import (
	"context"
	"testing"

	imagev1 "github.com/fluxcd/image-reflector-controller/api/v1"
	"github.com/fluxcd/pkg/apis/meta"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/uprev-dev/uprev/internal/testenv/registry"
)

// TestCRDBundleIsNeverPulledFromAStaleImage: a policy's status names the
// image its repository pointed at when it last selected. Once the
// repository is re-pointed (here at a private registry, with credentials),
// a CRD bundle is not pulled from the old image with the new settings: the
// automation waits for the policy, and the old host gets no request.
func TestCRDBundleIsNeverPulledFromAStaleImage(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	f := newAutomationFixture(t, nil, map[string]string{"clusters/agent/release.yaml": agentRelease})
	old := registry.Start(t) // the tenant's own registry
	old.Push(t, "charts/agent", "1.0.0", registry.HelmChart(t, "agent", "1.0.0", map[string]string{
		"crds/agents.yaml": testCRD("agents", "Agent", "1.0.0"),
	}))
	repo := newRepository(t, f.ns, old.Image("charts/agent"), func(r *imagev1.ImageRepository) { r.Name = "chart" })
	pol := newPolicy(t, f.ns, "agent", semverChoice(">=1.0.0 <2.0.0"), func(p *imagev1.ImagePolicy) {
		p.Spec.ImageRepositoryRef.Name = "chart"
	})
	g.Eventually(func(g Gomega) {
		g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(pol), pol)).To(Succeed())
		g.Expect(pol.Status.LatestRef).NotTo(BeNil())
		g.Expect(pol.Status.LatestRef.Name).To(Equal(old.Image("charts/agent")))
	}).Should(Succeed())

	// The policy stops following (suspended here; a slow or failing scan
	// does the same), and the repository moves to a private registry.
	private := registry.Start(t, registry.WithBasicAuth("robot", "s3cret-pw"))
	private.Push(t, "charts/agent", "1.0.0", registry.HelmChart(t, "agent", "1.0.0", map[string]string{
		"crds/agents.yaml": testCRD("agents", "Agent", "1.0.0"),
	}))
	g.Expect(k8s.Create(ctx, dockerConfigSecret(f.ns, "private", private.Host(), "robot", "s3cret-pw"))).To(Succeed())
	g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(pol), pol)).To(Succeed())
	pol.Spec.Suspend = true
	g.Expect(k8s.Update(ctx, pol)).To(Succeed())
	g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(repo), repo)).To(Succeed())
	repo.Spec.Image = private.Image("charts/agent")
	repo.Spec.SecretRef = &meta.LocalObjectReference{Name: "private"}
	g.Expect(k8s.Update(ctx, repo)).To(Succeed())
	old.ResetCounts()

	auto := newAutomation(t, f.ns, f.url, withChartCRDs)
	g.Eventually(func(g Gomega) {
		c := readyCondition(g, auto)
		g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(c.Reason).To(Equal(crdBundleFailedReason))
		g.Expect(c.Message).To(ContainSubstring("now points at " + private.Image("charts/agent")))
	}).Should(Succeed())
	g.Expect(old.Counts().Total).To(BeZero(), "the CRD bundle was pulled from the repository's old image: %+v", old.Counts())
}
