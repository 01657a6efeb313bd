package e2e

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	imagev1 "github.com/fluxcd/image-reflector-controller/api/v1"
	"github.com/fluxcd/pkg/apis/meta"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	uprevv1 "github.com/uprev-dev/uprev/api/v1alpha1"
)

// pollInterval is the ImageRepository interval of the benchmarks without
// webhook: short for a real installation (the examples scan every 5 to 10
// minutes), so the figure is a floor of what polling gives.
const pollInterval = 10 * time.Second

// trigger is how uprev hears of a tag push.
type trigger struct {
	name string
	// interval is the ImageRepository's spec.interval.
	interval time.Duration
	// webhook posts the registry's push notification right after the push.
	webhook bool
}

var triggers = []trigger{
	{name: "webhook", interval: time.Hour, webhook: true},
	{name: "poll", interval: pollInterval},
}

// latencyFixture is one ImageRepository, ImagePolicy (semver, digest
// pinned), UpdateAutomation and Sync of the local cluster, and the
// Deployment they keep current in the cluster uprev runs in.
type latencyFixture struct {
	b       *testing.B
	s       *scenario
	trigger trigger
	token   string
	image   string
	apps    string
	repo    *imagev1.ImageRepository
	sync    *uprevv1.Sync
	patch   int
}

func newLatencyFixture(b *testing.B, tr trigger) *latencyFixture {
	b.Helper()
	s := newScenario(b, "latency-"+tr.name)
	f := &latencyFixture{b: b, s: s, trigger: tr, image: s.reg.Image("acme/agent"), apps: s.ns + "-apps"}
	if tr.webhook {
		f.token = s.webhookToken()
	}
	first := f.image + ":1.0.0@" + s.reg.PushImage(b, "acme/agent", "1.0.0")
	s.initRepo(map[string]string{"clusters/prod/agent.yaml": agentManifests(f.apps, first, s.ns)})
	gitSource := uprevv1.GitSource{URL: s.url, Ref: uprevv1.GitRef{Branch: "main"}}
	f.repo = &imagev1.ImageRepository{
		ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: "agent"},
		Spec:       imagev1.ImageRepositorySpec{Image: f.image, Interval: metav1.Duration{Duration: tr.interval}},
	}
	pol := &imagev1.ImagePolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: "agent"},
		Spec: imagev1.ImagePolicySpec{
			ImageRepositoryRef:     meta.NamespacedObjectReference{Name: "agent"},
			Policy:                 imagev1.ImagePolicyChoice{SemVer: &imagev1.SemVerPolicy{Range: ">=1.0.0"}},
			DigestReflectionPolicy: imagev1.ReflectIfNotPresent,
		},
	}
	auto := &uprevv1.UpdateAutomation{
		ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: "fleet"},
		Spec: uprevv1.UpdateAutomationSpec{
			Interval: metav1.Duration{Duration: 5 * time.Minute},
			Git: uprevv1.GitSpec{
				GitSource: gitSource,
				Commit:    uprevv1.CommitSpec{Author: uprevv1.CommitUser{Name: "uprev", Email: "uprev@example.com"}},
			},
			Update: uprevv1.UpdateStrategy{Path: "./clusters"},
		},
	}
	f.sync = &uprevv1.Sync{
		ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: "prod"},
		Spec: uprevv1.SyncSpec{
			Interval: metav1.Duration{Duration: 5 * time.Minute},
			Git:      gitSource,
			Path:     "./clusters/prod",
			Targets:  []uprevv1.Target{{Name: "local"}},
			Prune:    true,
		},
	}
	create(b, f.repo, pol, auto, f.sync)
	waitForTag(b, pol, "1.0.0")
	waitApplied(b, f.sync, s.tip("main"), "local")
	waitForImage(b, f.apps, "agent", first, k8s)
	if tr.webhook {
		// Warm up: the receiver reads the token through the manager's
		// cache; wait until a notification is accepted and its scan done.
		s.notifyRegistryPush(f.token, "acme/agent", "1.0.0")
		NewWithT(b).Eventually(func(g Gomega) {
			get(g, f.repo)
			requested := f.repo.GetAnnotations()[meta.ReconcileRequestAnnotation]
			g.Expect(requested).NotTo(BeEmpty())
			g.Expect(f.repo.Status.LastHandledReconcileAt).To(Equal(requested))
		}).Should(Succeed())
	}
	return f
}

// dephase waits, without polling anything, for a random part of the scan
// interval when uprev polls, so that pushes land at uniformly spread
// moments of the scan cycle (back-to-back pushes would all land just after
// a scan and measure the worst case).
func (f *latencyFixture) dephase() {
	if f.trigger.webhook {
		return
	}
	timer := time.NewTimer(rand.N(f.trigger.interval))
	defer timer.Stop()
	select {
	case <-timer.C:
	case <-f.b.Context().Done():
	}
}

// release pushes the next patch release, posts the registry's
// notification when the webhook is on, and returns the reference uprev
// should write.
func (f *latencyFixture) release() string {
	f.patch++
	tag := fmt.Sprintf("1.0.%d", f.patch)
	ref := f.image + ":" + tag + "@" + f.s.reg.PushImage(f.b, "acme/agent", tag)
	if f.trigger.webhook {
		f.s.notifyRegistryPush(f.token, "acme/agent", tag)
	}
	return ref
}

// waitForCommit waits until main moves from tip.
func (f *latencyFixture) waitForCommit(tip string) {
	NewWithT(f.b).Eventually(func() string { return f.s.tip("main") }).
		WithTimeout(3 * f.trigger.interval).WithPolling(10 * time.Millisecond).ShouldNot(Equal(tip))
}

// waitForCluster waits until the Deployment in the cluster runs ref.
func (f *latencyFixture) waitForCluster(ref string) {
	NewWithT(f.b).Eventually(func(g Gomega) {
		g.Expect(deploymentImage(g, k8s, f.apps, "agent")).To(Equal(ref))
	}).WithTimeout(3 * f.trigger.interval).WithPolling(10 * time.Millisecond).Should(Succeed())
}

// latencies collects the measured latencies of a benchmark.
type latencies []time.Duration

// report adds the mean and the largest latency, in seconds, to the
// benchmark's figures, named after what was reached.
func (l latencies) report(b *testing.B, reached string) {
	var total, largest time.Duration
	for _, d := range l {
		total += d
		largest = max(largest, d)
	}
	if len(l) > 0 {
		b.ReportMetric((total / time.Duration(len(l))).Seconds(), "s/"+reached)
		b.ReportMetric(largest.Seconds(), "max-s/"+reached)
	}
}

// BenchmarkTagPushToCommit measures the time from a tag push to uprev's
// commit on main in Git, with the registry's webhook and by polling.
func BenchmarkTagPushToCommit(b *testing.B) {
	for _, tr := range triggers {
		b.Run(tr.name, func(b *testing.B) {
			f := newLatencyFixture(b, tr)
			var measured latencies
			b.ResetTimer()
			for range b.N {
				b.StopTimer()
				f.dephase()
				tip := f.s.tip("main")
				b.StartTimer()
				start := time.Now()
				ref := f.release()
				f.waitForCommit(tip)
				measured = append(measured, time.Since(start))
				b.StopTimer()
				// Let the Sync apply it, so the next push starts from rest.
				f.waitForCluster(ref)
				b.StartTimer()
			}
			measured.report(b, "commit")
		})
	}
}

// BenchmarkTagPushToCluster measures the time from a tag push to the
// Deployment running the new image in the target cluster, with the
// registry's webhook and by polling.
func BenchmarkTagPushToCluster(b *testing.B) {
	for _, tr := range triggers {
		b.Run(tr.name, func(b *testing.B) {
			f := newLatencyFixture(b, tr)
			var measured latencies
			b.ResetTimer()
			for range b.N {
				b.StopTimer()
				f.dephase()
				b.StartTimer()
				start := time.Now()
				f.waitForCluster(f.release())
				measured = append(measured, time.Since(start))
			}
			measured.report(b, "cluster")
		})
	}
}
