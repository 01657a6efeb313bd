package install

import (
	"context"
	"testing"
	"time"

	imagev1 "github.com/fluxcd/image-reflector-controller/api/v1"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	uprevv1 "github.com/uprev-dev/uprev/api/v1alpha1"
	"github.com/uprev-dev/uprev/internal/testenv/cluster"
)

// TestDurationFloorsAreEnforcedAtAdmission: the CRDs' schemas refuse an
// interval shorter than 30 s on a ReleaseSource (interval: 1ms wrote its
// status about 140 times a second) and shorter than 10 s on a Sync and an
// UpdateAutomation, and a timeout longer than 5 minutes on
// a ReleaseSource and on the Git access of a Sync or an UpdateAutomation
// (timeout: 24h held a worker for a day), as a real kube-apiserver admits
// objects; values at the floors are admitted.
func TestDurationFloorsAreEnforcedAtAdmission(t *testing.T) {
	g := NewWithT(t)
	c := cluster.StartT(t)
	cl := withScheme(t, c)
	ctx := context.Background()
	const ns = "floors"
	g.Expect(cl.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())

	source := func(interval time.Duration, timeout *time.Duration) client.Object {
		rs := &uprevv1.ReleaseSource{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "podinfo"},
			Spec: uprevv1.ReleaseSourceSpec{
				HelmRepository: &uprevv1.HelmRepositorySource{URL: "https://charts.example.com", Chart: "podinfo"},
				Interval:       metav1.Duration{Duration: interval},
				Policy:         imagev1.ImagePolicyChoice{SemVer: &imagev1.SemVerPolicy{Range: "6.x"}},
			},
		}
		if timeout != nil {
			rs.Spec.Timeout = &metav1.Duration{Duration: *timeout}
		}
		return rs
	}
	git := func(timeout time.Duration) uprevv1.GitSource {
		return uprevv1.GitSource{URL: "https://git.example.com/fleet.git", Ref: uprevv1.GitRef{Branch: "main"}, Timeout: &metav1.Duration{Duration: timeout}}
	}
	sync := func(interval, timeout time.Duration) client.Object {
		return &uprevv1.Sync{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "fleet"},
			Spec: uprevv1.SyncSpec{
				Interval: metav1.Duration{Duration: interval},
				Git:      git(timeout),
				Targets:  []uprevv1.Target{{Name: "local"}},
			},
		}
	}
	automation := func(interval, timeout time.Duration) client.Object {
		return &uprevv1.UpdateAutomation{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "fleet"},
			Spec: uprevv1.UpdateAutomationSpec{
				Interval: metav1.Duration{Duration: interval},
				Git: uprevv1.GitSpec{
					GitSource: git(timeout),
					Commit:    uprevv1.CommitSpec{Author: uprevv1.CommitUser{Name: "uprev", Email: "uprev@example.com"}},
				},
			},
		}
	}
	day, fiveMinutes, minute, hour := 24*time.Hour, 5*time.Minute, time.Minute, time.Hour
	ms, halfMinute := time.Millisecond, 30*time.Second

	for name, tc := range map[string]struct {
		obj     client.Object
		message string
	}{
		"ReleaseSource interval: 1ms":    {source(time.Millisecond, nil), "spec.interval: Invalid value"},
		"ReleaseSource interval: 29s":    {source(29*time.Second, nil), "at least 30s"},
		"ReleaseSource timeout: 24h":     {source(time.Hour, &day), "spec.timeout: Invalid value"},
		"ReleaseSource timeout: 5m1s":    {source(time.Hour, ptrTo(fiveMinutes+time.Second)), "at most 5m"},
		"Sync git.timeout: 24h":          {sync(hour, day), "spec.git.timeout: Invalid value"},
		"UpdateAutomation timeout: 1d":   {automation(hour, day), "spec.git.timeout: Invalid value"},
		"Sync interval: 1ms":             {sync(ms, minute), "spec.interval: Invalid value"},
		"Sync interval: 10s":             {sync(10*time.Second, minute), "at least 30s"},
		"UpdateAutomation interval: 1ms": {automation(ms, minute), "spec.interval: Invalid value"},
		"UpdateAutomation interval: 10s": {automation(10*time.Second, minute), "at least 30s"},
	} {
		err := cl.Create(ctx, tc.obj, client.DryRunAll)
		g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "%s: %v", name, err)
		g.Expect(err.Error()).To(ContainSubstring(tc.message), name)
	}
	for name, obj := range map[string]client.Object{
		"ReleaseSource at the floors":    source(30*time.Second, &fiveMinutes),
		"ReleaseSource as documented":    source(30*time.Minute, &minute),
		"Sync at the floors":             sync(halfMinute, fiveMinutes),
		"UpdateAutomation at the floors": automation(halfMinute, fiveMinutes),
	} {
		g.Expect(cl.Create(ctx, obj, client.DryRunAll)).To(Succeed(), name)
	}
}

// ptrTo returns a pointer to d.
func ptrTo(d time.Duration) *time.Duration { return &d }
