// Package restart runs the uprev binary itself, stops it and starts it
// again, to show that a restarted manager answers ImagePolicies from the
// tags it stored before, without scanning the registry again.
package restart

import (
	"context"
	"testing"
	"time"

	imagev1 "github.com/fluxcd/image-reflector-controller/api/v1"
	"github.com/fluxcd/pkg/apis/meta"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/uprev-dev/uprev/internal/testenv/manager"
	"github.com/uprev-dev/uprev/internal/testenv/registry"
)

func TestRestartedManagerAnswersFromStoredTags(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	c := manager.StartCluster(t)
	kubeconfigPath, k8s := c.KubeConfigPath, c.Client

	reg := registry.Start(t)
	reg.PushTags(t, "acme/agent", "1.0.0", "1.1.0", "2.0.0")
	bin := manager.Build(t)
	storage := t.TempDir()

	g.Expect(k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "fleet"}})).To(Succeed())
	repo := &imagev1.ImageRepository{
		ObjectMeta: metav1.ObjectMeta{Namespace: "fleet", Name: "agent"},
		Spec:       imagev1.ImageRepositorySpec{Image: reg.Image("acme/agent"), Interval: metav1.Duration{Duration: time.Hour}},
	}
	g.Expect(k8s.Create(ctx, repo)).To(Succeed())
	newPolicy := func(name, rng string) *imagev1.ImagePolicy {
		pol := &imagev1.ImagePolicy{
			ObjectMeta: metav1.ObjectMeta{Namespace: "fleet", Name: name},
			Spec: imagev1.ImagePolicySpec{
				ImageRepositoryRef: meta.NamespacedObjectReference{Name: "agent"},
				Policy:             imagev1.ImagePolicyChoice{SemVer: &imagev1.SemVerPolicy{Range: rng}},
			},
		}
		g.Expect(k8s.Create(ctx, pol)).To(Succeed())
		return pol
	}
	selected := func(pol *imagev1.ImagePolicy) func(Gomega) string {
		return func(g Gomega) string {
			g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(pol), pol)).To(Succeed())
			g.Expect(pol.Status.LatestRef).NotTo(BeNil())
			return pol.Status.LatestRef.Tag
		}
	}

	first := manager.Start(t, bin, kubeconfigPath, storage, "--controllers=image")
	g.Eventually(selected(newPolicy("latest", ">=1.0.0"))).WithTimeout(time.Minute).Should(Equal("2.0.0"))
	first.Stop()

	// The registry now answers nothing: a scan would hang. The restarted
	// manager must answer a new policy from the tags stored before.
	reg.ResetCounts()
	release := reg.Hold()
	defer release()
	manager.Start(t, bin, kubeconfigPath, storage, "--controllers=image")
	g.Eventually(selected(newPolicy("one-x", "1.x"))).WithTimeout(time.Minute).Should(Equal("1.1.0"))
	g.Expect(reg.Counts().Total).To(BeZero(), "no registry request before the next scan is due")
}
