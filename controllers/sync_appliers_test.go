package controllers

import (
	"context"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	uprevv1 "github.com/uprev-dev/uprev/api/v1alpha1"
	"github.com/uprev-dev/uprev/internal/apply"
	"github.com/uprev-dev/uprev/internal/testenv/gitserver"
)

// TestTargetAppliersShareByConnection: targets of one connection, of one
// Sync or two, share one Applier; another connection gets its own; an
// Applier goes with the last target that uses it.
func TestTargetAppliersShareByConnection(t *testing.T) {
	g := NewWithT(t)
	var made int
	newApplier := func() (*apply.Applier, error) {
		made++
		return apply.NewApplier(&rest.Config{Host: "https://127.0.0.1:1"}, nil)
	}
	var kept targetAppliers
	a, b := types.NamespacedName{Namespace: "team-a", Name: "fleet"}, types.NamespacedName{Namespace: "team-b", Name: "fleet"}
	first, err := kept.put(a, "eu-1", "sha-1", "conn-eu", newApplier)
	g.Expect(err).NotTo(HaveOccurred())
	second, _ := kept.put(a, "eu-2", "sha-2", "conn-eu", newApplier)
	third, _ := kept.put(b, "eu", "sha-3", "conn-eu", newApplier)
	g.Expect(made).To(Equal(1))
	g.Expect(second).To(BeIdenticalTo(first))
	g.Expect(third).To(BeIdenticalTo(first))
	other, _ := kept.put(b, "us", "sha-4", "conn-us", newApplier)
	g.Expect(made).To(Equal(2))
	g.Expect(other).NotTo(BeIdenticalTo(first))

	got, ok := kept.get(a, "eu-1", "sha-1")
	g.Expect(ok).To(BeTrue())
	g.Expect(got).To(BeIdenticalTo(first))
	_, ok = kept.get(a, "eu-1", "sha-changed")
	g.Expect(ok).To(BeFalse(), "a changed kubeconfig is checked again")

	kept.forget(a)
	kept.retain(b, map[string]bool{"eu": true})
	g.Expect(kept.byConn).To(HaveLen(1), "us left its Sync; eu is still used by team-b")
	kept.forget(b)
	g.Expect(kept.byConn).To(BeEmpty())
	_, _ = kept.put(b, "eu", "sha-3", "conn-eu", newApplier)
	g.Expect(made).To(Equal(3), "a dropped Applier is made anew")
}

// TestSyncTargetsOfOtherCredentialsNeverShareAnApplier: a tenant whose
// kubeconfig reaches the same API server as another tenant's, as a user
// with no rights there, tries to write into the other tenant's namespace
// right after the other's Sync applied with an administrator's
// kubeconfig. Appliers are shared per API server and credentials, so the
// tenant's Sync is refused as its own user: nothing is written.
func TestSyncTargetsOfOtherCredentialsNeverShareAnApplier(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	startRemoteClusters(t)
	rc := &remoteClusters
	victim, attacker := newNamespace(t), newNamespace(t)
	ensureNamespace(t, rc.euC, victim)
	srv := gitserver.Start(t)

	kubeConfigSecret(t, victim, "eu-admin", rc.euKC)
	url := srv.InitRepo(t, "victim", "main", map[string]string{"app/config.yaml": configMap(victim, "settings", "v1")})
	a := newSync(t, victim, url, "app", func(s *uprevv1.Sync) {
		s.Spec.Targets = []uprevv1.Target{{Name: "eu", KubeConfig: &uprevv1.KubeConfigReference{SecretRef: metaRef("eu-admin")}}}
	})
	waitApplied(t, a, srv.Log(t, "victim", "main")[0].SHA, "eu")

	nobody, err := rc.eu.KubeConfigAs("tenant-b-nobody")
	g.Expect(err).NotTo(HaveOccurred())
	kubeConfigSecret(t, attacker, "eu", nobody)
	url = srv.InitRepo(t, "attacker", "main", map[string]string{"app/config.yaml": configMap(victim, "planted", "owned")})
	b := newSync(t, attacker, url, "app", func(s *uprevv1.Sync) {
		s.Spec.Targets = []uprevv1.Target{{Name: "eu", KubeConfig: &uprevv1.KubeConfigReference{SecretRef: metaRef("eu")}}}
	})
	g.Eventually(func(g Gomega) {
		c := readyCondition(g, b)
		g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(strings.ToLower(c.Message)).To(ContainSubstring("forbidden"))
		g.Expect(c.Message).To(ContainSubstring("tenant-b-nobody"))
	}).WithTimeout(time.Minute).Should(Succeed())
	err = rc.euC.Get(ctx, client.ObjectKey{Namespace: victim, Name: "planted"}, &corev1.ConfigMap{})
	g.Expect(err).To(MatchError(ContainSubstring("not found")), "the tenant wrote with the other tenant's credentials")
}
