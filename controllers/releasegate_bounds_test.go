package controllers

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	imagev1 "github.com/fluxcd/image-reflector-controller/api/v1"
	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	uprevv1 "github.com/uprev-dev/uprev/api/v1alpha1"
	"github.com/uprev-dev/uprev/internal/signature"
	"github.com/uprev-dev/uprev/internal/testenv/registry"
	"github.com/uprev-dev/uprev/internal/testenv/signing"
)

// attestedRelease pushes tag to reg, signs it with key and attests what
// attestGate requires, all passing unless sbom is false.
func attestedRelease(t *testing.T, reg *registry.Registry, key *signing.Key, tag string, sbom bool) string {
	t.Helper()
	d := reg.PushImage(t, "acme/agent", tag)
	key.SignTag(t, reg, "acme/agent", d)
	key.Attest(t, reg, "acme/agent", d, signing.SLSAProvenanceV1, signing.ProvenanceV1(githubBuilder, agentSource, "refs/tags/v"+tag))
	if sbom {
		key.Attest(t, reg, "acme/agent", d, signing.SPDXDocument, signing.SPDX)
	}
	key.Attest(t, reg, "acme/agent", d, signing.VulnsV02, signing.Scan(testClock.Now().Add(-time.Hour), nil))
	return d
}

// TestHostileAttestationStoresHoldNoOtherPolicy gates policies on three
// hostile registries, each in its own namespace, with a 5 s
// spec.timeout: one whose .att tags never answer (four policies, as many
// as the manager has workers, two of which its registry's share lets
// run at a time), one listing 10,000 attestations of the
// newest version, one holding a 100 MB attestation beside good ones.
// Meanwhile a policy of another namespace on a healthy registry selects
// within seconds; the hostile ones end at their bounds: the slow store at
// its deadline, the 10,000 judged on the first 16 (no SBOM among them),
// the 100 MB one skipped unread.
func TestHostileAttestationStoresHoldNoOtherPolicy(t *testing.T) {
	g := NewWithT(t)
	key := signing.NewKey(t)
	timeout := func(r *imagev1.ImageRepository) { r.Spec.Timeout = &metav1.Duration{Duration: 5 * time.Second} }
	digest := func(r *imagev1.ImagePolicy) { r.Spec.DigestReflectionPolicy = imagev1.ReflectIfNotPresent }
	started := time.Now()

	slowNS := newNamespace(t)
	slow := registry.Start(t, registry.WithWrap(registry.SlowFor(func(r *http.Request) bool { return strings.HasSuffix(r.URL.Path, ".att") }, 0)))
	attestedRelease(t, slow, key, "1.0.0", true)
	attestGate(t, slowNS, key)
	newRepository(t, slowNS, slow.Image("acme/agent"), timeout)
	var slowPolicies []*imagev1.ImagePolicy
	for i := range 4 {
		slowPolicies = append(slowPolicies, newPolicy(t, slowNS, fmt.Sprintf("agent-%d", i), semverChoice(">=1.0.0"), prodStage))
	}

	var flooded, sbom atomic.Value
	flooded.Store("none")
	sbom.Store("")
	manyNS := newNamespace(t)
	many := registry.Start(t, registry.WithWrap(func(store http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			registry.RepeatReferrers(10_000, func(d string) bool { return d == flooded.Load() }, sbom.Load().(string))(store).ServeHTTP(w, req)
		})
	}))
	d100 := attestedRelease(t, many, key, "1.0.0", true)
	d110 := attestedRelease(t, many, key, "1.1.0", false)
	sbom.Store(key.Attest(t, many, "acme/agent", d110, signing.SPDXDocument, signing.SPDX)) // the 10,000th
	flooded.Store(d110)
	attestGate(t, manyNS, key)
	newRepository(t, manyNS, many.Image("acme/agent"), timeout)
	manyPolicy := newPolicy(t, manyNS, "agent", semverChoice(">=1.0.0"), prodStage, digest)

	hugeNS := newNamespace(t)
	huge := registry.NewHugeBlob(t, 100<<20)
	large := registry.Start(t, registry.WithWrap(huge.Wrap))
	attestedRelease(t, large, key, "1.0.0", true)
	d110large := attestedRelease(t, large, key, "1.1.0", true)
	subject, err := large.Get("acme/agent", d110large)
	g.Expect(err).NotTo(HaveOccurred())
	large.PushManifest(t, "acme/agent", "", registry.OneLayer(signature.BundleArtifactType, signature.BundleArtifactType, 100<<20, huge.Digest, &subject.Descriptor))
	attestGate(t, hugeNS, key)
	newRepository(t, hugeNS, large.Image("acme/agent"), timeout)
	hugePolicy := newPolicy(t, hugeNS, "agent", semverChoice(">=1.0.0"), prodStage, digest)

	// The slow store holds its policies' reads now.
	g.Eventually(slow.InFlight).WithTimeout(10 * time.Second).Should(BeNumerically(">=", 1))
	healthyNS := newNamespace(t)
	healthy := registry.Start(t)
	dHealthy := attestedRelease(t, healthy, key, "1.0.0", true)
	attestGate(t, healthyNS, key)
	newRepository(t, healthyNS, healthy.Image("acme/agent"))
	healthyPolicy := newPolicy(t, healthyNS, "agent", semverChoice(">=1.0.0"), prodStage, digest)
	created := time.Now()
	g.Eventually(func(g Gomega) {
		c, tag := policyState(g, healthyPolicy)
		g.Expect(tag).To(Equal("1.0.0"), c.Message)
		g.Expect(healthyPolicy.Status.LatestRef.Digest).To(Equal(dHealthy))
	}).WithTimeout(5 * time.Second).WithPolling(100 * time.Millisecond).Should(Succeed())
	t.Logf("the healthy policy selected %s after its creation, with the slow store holding %d reads", time.Since(created), slow.InFlight())

	g.Eventually(func(g Gomega) {
		c, tag := policyState(g, manyPolicy)
		g.Expect(tag).To(Equal("1.0.0"), c.Message)
		g.Expect(manyPolicy.Status.LatestRef.Digest).To(Equal(d100))
		g.Expect(c.Message).To(ContainSubstring("1.1.0 refused: sbom: " + d110 + ": no SPDX or CycloneDX attestation"))
	}).Should(Succeed())
	g.Eventually(func(g Gomega) {
		c, tag := policyState(g, hugePolicy)
		g.Expect(tag).To(Equal("1.1.0"), c.Message)
		g.Expect(hugePolicy.Status.LatestRef.Digest).To(Equal(d110large))
	}).Should(Succeed())
	g.Expect(huge.Served()).To(BeZero(), "the 100 MB attestation was read")
	// Two of the four hold the registry's share of the workers at a time
	// (the others wait, RegistryBusy, and may have no condition yet under
	// load): one reports the deadline, and none has selected anything.
	g.Eventually(func(g Gomega) {
		var reasons []string
		deadline := false
		for _, pol := range slowPolicies {
			g.Expect(k8s.Get(context.Background(), client.ObjectKeyFromObject(pol), pol)).To(Succeed())
			g.Expect(pol.Status.LatestRef).To(BeNil(), "%s selected a version no gate let through", pol.Name)
			c := conditions.Get(pol, meta.ReadyCondition)
			switch {
			case c == nil:
				reasons = append(reasons, pol.Name+": not reconciled yet")
			case c.Status == metav1.ConditionFalse && c.Reason == uprevv1.VerificationFailedReason && strings.Contains(c.Message, "not read within 5s"):
				deadline = true
			default:
				reasons = append(reasons, fmt.Sprintf("%s: %s %s: %s", pol.Name, c.Status, c.Reason, c.Message))
			}
		}
		g.Expect(deadline).To(BeTrue(), "no slow policy reports the deadline: %v", reasons)
	}).WithTimeout(30 * time.Second).WithPolling(50 * time.Millisecond).Should(Succeed())
	t.Logf("every hostile store ended at its bound %s after the start", time.Since(started))
}
