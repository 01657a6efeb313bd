package controllers

import (
	"testing"

	imagev1 "github.com/fluxcd/image-reflector-controller/api/v1"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	uprevv1 "github.com/uprev-dev/uprev/api/v1alpha1"
)

// TestUngatedForSure is the check a policy that the manager's cache shows
// no ReleaseGate for makes on the API server before it moves: a gate
// created just before the policy (the cache has not seen it yet, as
// happened under load in TestHostileAttestationStoresHoldNoOtherPolicy,
// where a gated policy selected an unverified version) holds the move
// with a retry within a second, naming the gate; a gate of other policies
// or of another namespace does not.
func TestUngatedForSure(t *testing.T) {
	scheme := runtime.NewScheme()
	NewWithT(t).Expect(uprevv1.AddToScheme(scheme)).To(Succeed())
	pol := &imagev1.ImagePolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "agent", Labels: map[string]string{"stage": "prod"}}}
	gateFor := func(namespace, stage string) *uprevv1.ReleaseGate {
		return &uprevv1.ReleaseGate{
			ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "prod-" + namespace},
			Spec:       uprevv1.ReleaseGateSpec{PolicySelector: metav1.LabelSelector{MatchLabels: map[string]string{"stage": stage}}},
		}
	}
	for name, c := range map[string]struct {
		gates   []*uprevv1.ReleaseGate
		holding string
	}{
		"no gate":                 {},
		"a gate of other stages":  {gates: []*uprevv1.ReleaseGate{gateFor("team-a", "staging")}},
		"a gate of another team":  {gates: []*uprevv1.ReleaseGate{gateFor("team-b", "prod")}},
		"a gate the cache missed": {gates: []*uprevv1.ReleaseGate{gateFor("team-b", "prod"), gateFor("team-a", "prod")}, holding: "prod-team-a"},
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			b := fake.NewClientBuilder().WithScheme(scheme)
			for _, rg := range c.gates {
				b = b.WithObjects(rg)
			}
			err := ungatedForSure(t.Context(), b.Build(), pol)
			if c.holding == "" {
				g.Expect(err).NotTo(HaveOccurred())
				return
			}
			var held *transientError
			g.Expect(err).To(BeAssignableToTypeOf(held))
			held = err.(*transientError)
			g.Expect(held.retryAfter).To(BeNumerically("<=", 1e9))
			g.Expect(err).To(MatchError("ReleaseGate " + c.holding + " selects the policy and is not in the manager's cache yet"))
		})
	}
}
