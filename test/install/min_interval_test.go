package install

import (
	"context"
	"testing"
	"time"

	imagev1 "github.com/fluxcd/image-reflector-controller/api/v1"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/uprev-dev/uprev/internal/testenv/manager"
	"github.com/uprev-dev/uprev/internal/testenv/registry"
)

// TestManagerFloorHoldsForFluxIntervals: Flux's ImageRepository is served
// with Flux's CRD, which takes `interval: 1ms` (it scanned and wrote the
// status about 140 times a second). The manager binary's --min-interval
// holds it to one scan per floor: counted at the registry, the tag lists
// stay within one per floor over the window, and the scans go on.
func TestManagerFloorHoldsForFluxIntervals(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	c := manager.StartCluster(t)
	reg := registry.Start(t)
	reg.PushTags(t, "acme/agent", "1.0.0", "1.1.0")
	const ns, floor, window = "floor", 2 * time.Second, 7 * time.Second
	g.Expect(c.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
	repo := &imagev1.ImageRepository{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "agent"},
		Spec:       imagev1.ImageRepositorySpec{Image: reg.Image("acme/agent"), Interval: metav1.Duration{Duration: time.Millisecond}},
	}
	g.Expect(c.Client.Create(ctx, repo)).To(Succeed(), "Flux's schema takes interval: 1ms")

	manager.Start(t, manager.Build(t), c.KubeConfigPath, t.TempDir(), "--controllers=image", "--min-interval="+floor.String())
	g.Eventually(func(g Gomega) {
		g.Expect(c.Client.Get(ctx, client.ObjectKeyFromObject(repo), repo)).To(Succeed())
		g.Expect(repo.Status.LastScanResult).NotTo(BeNil())
		g.Expect(repo.Status.LastScanResult.TagCount).To(Equal(2))
	}).WithTimeout(time.Minute).Should(Succeed(), "the first scan")

	reg.ResetCounts()
	start := time.Now()
	g.Consistently(func(g Gomega) {
		allowed := int(time.Since(start)/floor) + 1
		g.Expect(reg.Counts().TagListPages).To(BeNumerically("<=", allowed), "scans %s after the first", time.Since(start).Round(time.Millisecond))
	}).WithTimeout(window).WithPolling(50 * time.Millisecond).Should(Succeed())
	scans := reg.Counts().TagListPages
	t.Logf("%d scans in the %s after the first, the floor %s", scans, window, floor)
	g.Expect(scans).To(BeNumerically(">=", 2), "the repository is still scanned, once per floor")
}
