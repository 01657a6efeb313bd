package tenancy

import (
	"context"
	"testing"
	"time"

	imagev1 "github.com/fluxcd/image-reflector-controller/api/v1"
	"github.com/fluxcd/pkg/apis/acl"
	"github.com/fluxcd/pkg/apis/meta"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/uprev-dev/uprev/internal/testenv/registry"
)

func TestCrossNamespacePolicyRefusedOnlyWithFlag(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	reg := registry.Start(t)
	reg.PushTags(t, "acme/agent", "1.0.0", "1.1.0")
	shared, team := newNamespace(t, "shared"), newNamespace(t, "team")

	repo := &imagev1.ImageRepository{
		ObjectMeta: metav1.ObjectMeta{Namespace: shared, Name: "agent"},
		Spec: imagev1.ImageRepositorySpec{
			Image:      reg.Image("acme/agent"),
			Interval:   metav1.Duration{Duration: time.Hour},
			AccessFrom: &acl.AccessFrom{NamespaceSelectors: []acl.NamespaceSelector{{MatchLabels: map[string]string{}}}},
		},
	}
	g.Expect(k8s.Create(ctx, repo)).To(Succeed())
	pol := &imagev1.ImagePolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: team, Name: "agent"},
		Spec: imagev1.ImagePolicySpec{
			ImageRepositoryRef: meta.NamespacedObjectReference{Namespace: shared, Name: "agent"},
			Policy:             imagev1.ImagePolicyChoice{SemVer: &imagev1.SemVerPolicy{Range: ">=1.0.0"}},
		},
	}
	g.Expect(k8s.Create(ctx, pol)).To(Succeed())
	conds := func() []metav1.Condition { return pol.Status.Conditions }

	locked := startManager(t, "--controllers=image", "--no-cross-namespace-refs")
	g.Eventually(readyCondition(pol, conds)).Should(And(
		HaveField("Status", metav1.ConditionFalse),
		HaveField("Reason", acl.AccessDeniedReason),
		HaveField("Message", And(ContainSubstring(shared+"/agent"), ContainSubstring("--no-cross-namespace-refs")))))
	g.Expect(pol.Status.Conditions).To(ContainElement(And(HaveField("Type", meta.StalledCondition), HaveField("Status", metav1.ConditionTrue))))
	g.Expect(pol.Status.LatestRef).To(BeNil())
	locked.Stop()

	// Without the flag, accessFrom lets the same reference through.
	startManager(t, "--controllers=image")
	requestReconcile(t, pol)
	g.Eventually(readyCondition(pol, conds)).Should(HaveField("Status", metav1.ConditionTrue))
	g.Expect(pol.Status.LatestRef.Tag).To(Equal("1.1.0"))
}
