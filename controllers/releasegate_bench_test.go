package controllers

import (
	"context"
	"fmt"
	"testing"
	"time"

	imagev1 "github.com/fluxcd/image-reflector-controller/api/v1"
	"github.com/fluxcd/pkg/apis/meta"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	uprevv1 "github.com/uprev-dev/uprev/api/v1alpha1"
	"github.com/uprev-dev/uprev/internal/gate"
	"github.com/uprev-dev/uprev/internal/registry"
	"github.com/uprev-dev/uprev/internal/signature"
	testregistry "github.com/uprev-dev/uprev/internal/testenv/registry"
	"github.com/uprev-dev/uprev/internal/testenv/signing"
)

// BenchmarkSelectOver1000CachedVerdicts selects through a ReleaseGate
// with verify and attestations over 1,000 versions of which only the
// oldest is signed and attested, once every verdict is cached (within
// the round of one scan): the selection judges all 1,000 candidates,
// newest first. It counts the requests the registry receives: one
// digest look-up per candidate, nothing else (no signature, referrer or
// attestation read).
func BenchmarkSelectOver1000CachedVerdicts(b *testing.B) {
	const n = 1000
	useCluster(b)
	ctx := context.Background()
	reg := testregistry.Start(b)
	key := signing.NewKey(b)
	tags := make([]registry.SeenTag, n)
	for i := range n {
		tags[i] = registry.SeenTag{Name: fmt.Sprintf("1.%d.0", i), FirstSeen: time.Now().Add(-time.Hour)}
		d := reg.PushImage(b, "acme/agent", tags[i].Name)
		if i == 0 {
			key.SignTag(b, reg, "acme/agent", d)
			key.Attest(b, reg, "acme/agent", d, signing.SPDXDocument, signing.SPDX)
		}
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "bench-"}}
	if err := k8s.Create(ctx, ns); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = k8s.Delete(context.Background(), ns) })
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "cosign-keys"}, Data: map[string][]byte{"cosign.pub": key.PublicPEM(b)}}
	rg := &uprevv1.ReleaseGate{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "supply-chain"},
		Spec: uprevv1.ReleaseGateSpec{
			PolicySelector: metav1.LabelSelector{MatchLabels: map[string]string{"stage": "prod"}},
			Verify:         &sourcev1.OCIRepositoryVerification{Provider: "cosign", SecretRef: &meta.LocalObjectReference{Name: "cosign-keys"}},
			Attestations:   &uprevv1.Attestations{SBOM: true},
		},
	}
	for _, obj := range []client.Object{secret, rg} {
		if err := k8s.Create(ctx, obj); err != nil {
			b.Fatal(err)
		}
	}
	verifier, err := signature.NewVerifier(signature.Options{})
	if err != nil {
		b.Fatal(err)
	}
	r := &ImagePolicyReconciler{reconciler: reconciler{Client: k8s}, liveGates: k8s, Scanner: registry.NewScanner(testRegistryOptions),
		Tags: registry.Store{Dir: b.TempDir()}, Clock: clock.RealClock{}, Verifier: verifier, shares: newWorkerShares(4)}
	repo := &imagev1.ImageRepository{ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "repo"}, Spec: imagev1.ImageRepositorySpec{Image: reg.Image("acme/agent")}}
	pol := &imagev1.ImagePolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "agent"}, Spec: imagev1.ImagePolicySpec{Policy: semverChoice(">=1.0.0")}}
	selectOnce := func() (gate.Selection, error) {
		// As every reconcile does: the gates anew, holding no refusal.
		return r.selectGated(ctx, pol, repo, tags, []gate.Gate{{Name: rg.Name}})
	}
	// The first selections read every candidate, 20 a selection.
	for tries := 0; ; tries++ {
		sel, err := selectOnce()
		if err == nil {
			if sel.Tag != "1.0.0" {
				b.Fatalf("selected %q", sel.Tag)
			}
			break
		}
		if tries > n/maxVerificationsPerSelection+1 {
			b.Fatal(err)
		}
	}
	reg.ResetCounts()
	b.ResetTimer()
	for b.Loop() {
		if sel, err := selectOnce(); err != nil || sel.Tag != "1.0.0" {
			b.Fatalf("selected %q: %v", sel.Tag, err)
		}
	}
	b.StopTimer()
	c := reg.Counts()
	per := func(count int) float64 { return float64(count) / float64(b.N) }
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N)/1000, "ms/selection")
	b.ReportMetric(per(c.Total), "requests/selection")
	b.ReportMetric(per(c.ManifestHead), "digest-lookups/selection")
	if other := c.Total - c.ManifestHead - c.Ping; other != 0 || c.ManifestHead != n*b.N {
		b.Fatalf("%d selections made %d digest look-ups and %d other requests besides %d pings: %+v", b.N, c.ManifestHead, other, c.Ping, c)
	}
}
