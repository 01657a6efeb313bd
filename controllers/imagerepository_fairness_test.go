package controllers

import (
	"context"
	"fmt"
	"testing"
	"time"

	imagev1 "github.com/fluxcd/image-reflector-controller/api/v1"
	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	. "github.com/onsi/gomega"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/uprev-dev/uprev/internal/testenv/registry"
	"github.com/uprev-dev/uprev/internal/testenv/tarpit"
)

// TestTarpitRegistryDoesNotDelayOtherTenants: six ImageRepositories of one
// tenant against a registry that never answers, with a long timeout, are
// created first; another tenant's repository and policy, created after,
// are Ready within a small bound, far below that timeout.
func TestTarpitRegistryDoesNotDelayOtherTenants(t *testing.T) {
	g := NewWithT(t)
	tp := tarpit.Start(t)
	attacker := newNamespace(t)
	var tarpitRepos []*imagev1.ImageRepository
	for i := range 6 {
		tarpitRepos = append(tarpitRepos, newRepository(t, attacker, fmt.Sprintf("%s/tenant/app-%d", tp.Addr(), i), func(r *imagev1.ImageRepository) {
			r.Name = fmt.Sprintf("tarpit-%d", i)
			r.Spec.Timeout = &metav1.Duration{Duration: 2 * time.Minute}
		}))
	}
	t.Cleanup(func() {
		for _, r := range tarpitRepos {
			_ = k8s.Delete(context.Background(), r)
		}
	})
	g.Eventually(tp.Accepted).Should(BeNumerically(">=", 2), "the tarpit holds scans")

	ns := newNamespace(t)
	reg := registry.Start(t)
	reg.PushTags(t, "acme/agent", "1.0.0", "1.1.0")
	start := time.Now()
	newRepository(t, ns, reg.Image("acme/agent"), func(r *imagev1.ImageRepository) { r.Name = "agent" })
	pol := newPolicy(t, ns, "agent", semverChoice(">=1.0.0"), func(p *imagev1.ImagePolicy) {
		p.Spec.ImageRepositoryRef.Name = "agent"
	})
	g.Eventually(func(g Gomega) {
		c := readyCondition(g, pol)
		g.Expect(c.Status).To(Equal(metav1.ConditionTrue), c.Message)
	}, 15*time.Second, 100*time.Millisecond).Should(Succeed())
	t.Logf("good policy Ready %s after creation, with 6 scans against a tarpit", time.Since(start).Round(time.Millisecond))

	// The tarpit's repositories wait for their share, saying so.
	g.Eventually(func(g Gomega) {
		waiting := 0
		for _, r := range tarpitRepos {
			g.Expect(k8s.Get(context.Background(), client.ObjectKeyFromObject(r), r)).To(Succeed())
			if c := apimeta.FindStatusCondition(r.Status.Conditions, meta.ReadyCondition); c != nil && c.Reason == registryBusyReason {
				waiting++
			}
		}
		g.Expect(waiting).To(BeNumerically(">", 0))
	}).Should(Succeed())
}

// TestRepositoriesWaitingForTheirRegistryScanInTurn: repositories of one
// registry that find its share of the workers taken stand in line, and
// each scans as soon as a share is given back, well before the retry of a
// wait, and without a word: none shows RegistryBusy.
func TestRepositoriesWaitingForTheirRegistryScanInTurn(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	reg := registry.Start(t)
	const n = 12
	for i := range n {
		reg.PushTags(t, fmt.Sprintf("acme/app-%d", i), "1.0.0")
	}
	release := reg.Hold()
	defer release()
	var repos []*imagev1.ImageRepository
	for i := range n {
		repos = append(repos, newRepository(t, ns, reg.Image(fmt.Sprintf("acme/app-%d", i)), func(r *imagev1.ImageRepository) {
			r.Name = fmt.Sprintf("app-%d", i)
		}))
	}
	g.Eventually(reg.InFlight).Should(Equal(2), "two scans hold the registry's share")
	g.Consistently(reg.InFlight, time.Second).Should(Equal(2), "the others wait outside the workers")

	start := time.Now()
	release()
	g.Eventually(func(g Gomega) {
		for _, r := range repos {
			g.Expect(k8s.Get(context.Background(), client.ObjectKeyFromObject(r), r)).To(Succeed())
			g.Expect(conditions.IsReady(r)).To(BeTrue(), "%s: %v", r.Name, r.Status.Conditions)
		}
	}, busyRetry-time.Second, 50*time.Millisecond).Should(Succeed(), "each scans when a share is given back, not at a retry")
	t.Logf("%d repositories scanned in turn %s after the registry answered", n, time.Since(start).Round(time.Millisecond))
	for _, r := range repos {
		g.Expect(eventsAbout(g, ns, imagev1.ImageRepositoryKind, r.Name)).To(BeEmpty(), "a wait in line is not reported")
	}
}
