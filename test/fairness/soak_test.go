package fairness

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	imagev1 "github.com/fluxcd/image-reflector-controller/api/v1"
	"github.com/fluxcd/pkg/apis/meta"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	uprevv1 "github.com/uprev-dev/uprev/api/v1alpha1"
	"github.com/uprev-dev/uprev/internal/fleet"
	"github.com/uprev-dev/uprev/internal/testenv/freeport"
	"github.com/uprev-dev/uprev/internal/testenv/gitserver"
	"github.com/uprev-dev/uprev/internal/testenv/registry"
	"github.com/uprev-dev/uprev/internal/testenv/tarpit"
	"github.com/uprev-dev/uprev/internal/webhook"
)

// soakFor is how long each iteration of BenchmarkSoak drives the fleet.
// The figures in docs/benchmarks.md are of -soak 10m -benchtime 1x.
var soakFor = flag.Duration("soak", time.Minute, "how long each BenchmarkSoak iteration runs (docs/benchmarks.md: -soak 10m -benchtime 1x)")

// The soak's fleet: 1,000 ImageRepositories and ImagePolicies, 100
// UpdateAutomations and 100 Syncs, in ten namespaces.
const (
	soakTenants           = 10
	policiesPerTenant     = 100
	automationsPerTenant  = 10
	policiesPerAutomation = policiesPerTenant / automationsPerTenant
	// soakInterval is every object's interval: each is reconciled that
	// often besides the pushes it reacts to.
	soakInterval = time.Minute
	// probeEvery is how often a new tag is pushed to one of the
	// repositories, round robin.
	probeEvery = 2 * time.Second
	// webhookToken is every namespace's receiver token.
	webhookToken = "soak-token"
)

// soakFleet is the good tenants' objects and the servers they use.
type soakFleet struct {
	reg        *registry.Registry
	git        *gitserver.Server
	namespaces []string
	// pushed receives the name of each repository an automation pushed to.
	pushed chan string
}

// soakRepo names the image repository of a tenant's policy.
func soakRepo(tenant, policy int) string {
	return fmt.Sprintf("soak/t%d-app-%d", tenant, policy)
}

// soakGitRepo names the Git repository of a tenant's automation.
func soakGitRepo(tenant, automation int) string {
	return fmt.Sprintf("t%d-fleet-%d", tenant, automation)
}

// markedFile is the file of a Git repository that holds a policy's marker.
func markedFile(policy int) string {
	return fmt.Sprintf("deploy/app-%d.yaml", policy)
}

// BenchmarkSoak runs one manager with 1,000 ImageRepositories and policies,
// 100 automations and 100 Syncs, all on an interval of a minute, while a
// tenant points six Syncs and six automations at a Git server that never
// answers, six ImageRepositories at a registry that never answers, and an
// automation at a message template that asks for 300 MB. Every probeEvery
// a new tag is pushed to one image repository, announced by the registry
// webhook, and the time until the automation's commit holding it is pushed
// is measured. It reports p50/p99 of that latency, the manager's peak RSS
// and its CPU use over the soak, and fails if any probe's commit is lost or
// any Sync does not apply its repository's last commit.
func BenchmarkSoak(b *testing.B) {
	g := NewWithT(b)
	fleet := startSoakFleet(b)
	hooks := freeport.Addr(b)
	mgr := startManager(b, "--webhook-addr="+hooks)
	startSoakAttacker(b)
	fleet.expectSettled(b, g, 5*time.Minute)

	for range b.N {
		before, err := mgr.Usage()
		g.Expect(err).NotTo(HaveOccurred())
		start := time.Now()
		latencies, lost := fleet.probe(b, hooks, *soakFor)
		elapsed := time.Since(start)
		after, err := mgr.Usage()
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(lost).To(BeEmpty(), "every probe's tag reached Git")
		fleet.expectSettled(b, g, 2*time.Minute)

		slices.Sort(latencies)
		b.ReportMetric(float64(len(latencies)), "probes")
		b.ReportMetric(float64(percentile(latencies, 50).Milliseconds()), "p50-ms")
		b.ReportMetric(float64(percentile(latencies, 99).Milliseconds()), "p99-ms")
		b.ReportMetric(float64(after.PeakRSSKiB>>10), "peak-rss-MiB")
		b.ReportMetric((after.CPU-before.CPU).Seconds()/elapsed.Seconds(), "cpu-cores")
	}
}

// percentile returns the p-th percentile of sorted durations.
func percentile(sorted []time.Duration, p int) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[(len(sorted)-1)*p/100]
}

// startSoakFleet makes the good tenants' registry, Git repositories and
// objects.
func startSoakFleet(t testing.TB) *soakFleet {
	t.Helper()
	f := &soakFleet{reg: registry.Start(t), pushed: make(chan string, 1024)}
	f.git = gitserver.Start(t, gitserver.WithAfterPush(func(repo string) { f.pushed <- repo }))
	for tn := range soakTenants {
		ns := newNamespace(t, "soak")
		f.namespaces = append(f.namespaces, ns)
		create(t, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: webhook.DefaultSecretName},
			StringData: map[string]string{webhook.TokenKey: webhookToken},
		})
		for p := range policiesPerTenant {
			f.reg.PushTags(t, soakRepo(tn, p), "1.0.0")
			name := fmt.Sprintf("app-%d", p)
			create(t, &imagev1.ImageRepository{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
				Spec:       imagev1.ImageRepositorySpec{Image: f.reg.Image(soakRepo(tn, p)), Interval: metav1.Duration{Duration: soakInterval}},
			})
			create(t, &imagev1.ImagePolicy{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
				Spec: imagev1.ImagePolicySpec{
					ImageRepositoryRef: meta.NamespacedObjectReference{Name: name},
					Policy:             imagev1.ImagePolicyChoice{SemVer: &imagev1.SemVerPolicy{Range: ">=1.0.0"}},
				},
			})
		}
		for a := range automationsPerTenant {
			files := map[string]string{
				"apps/cm.yaml": fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: fleet-%d\n  namespace: %s\ndata:\n  key: value\n", a, ns),
			}
			for p := a * policiesPerAutomation; p < (a+1)*policiesPerAutomation; p++ {
				files[markedFile(p)] = fmt.Sprintf("image: %s:1.0.0 # {\"$imagepolicy\": \"%s:app-%d\"}\n", f.reg.Image(soakRepo(tn, p)), ns, p)
			}
			url := f.git.InitRepo(t, soakGitRepo(tn, a), "main", files)
			s := newSync(ns, fmt.Sprintf("fleet-%d", a), url)
			s.Spec.Interval = metav1.Duration{Duration: soakInterval}
			create(t, s)
			auto := newAutomation(ns, fmt.Sprintf("fleet-%d", a), url)
			auto.Spec.Interval = metav1.Duration{Duration: soakInterval}
			create(t, auto)
		}
	}
	return f
}

// startSoakAttacker makes, in a namespace of its own, the objects of a
// tenant that tries the attacks the manager is bounded against: Git and
// registry servers that never answer, and a commit message template that
// asks for 300 MB.
func startSoakAttacker(t testing.TB) {
	t.Helper()
	tp := tarpit.Start(t)
	startTarpitTenant(t, tp)
	ns := newNamespace(t, "attacker")
	for i := range tarpitObjects {
		create(t, &imagev1.ImageRepository{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("slow-%d", i)},
			Spec: imagev1.ImageRepositorySpec{
				Image:    fmt.Sprintf("%s/slow/app-%d", tp.Addr(), i),
				Insecure: true, Interval: metav1.Duration{Duration: soakInterval},
				Timeout: &metav1.Duration{Duration: tarpitTimeout},
			},
		})
	}
	reg := registry.Start(t)
	reg.PushTags(t, "acme/agent", "1.0.0", "1.1.0")
	create(t, &imagev1.ImageRepository{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "agent"},
		Spec:       imagev1.ImageRepositorySpec{Image: reg.Image("acme/agent"), Interval: metav1.Duration{Duration: soakInterval}},
	})
	create(t, &imagev1.ImagePolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "agent"},
		Spec: imagev1.ImagePolicySpec{
			ImageRepositoryRef: meta.NamespacedObjectReference{Name: "agent"},
			Policy:             imagev1.ImagePolicyChoice{SemVer: &imagev1.SemVerPolicy{Range: ">=1.0.0"}},
		},
	})
	git := gitserver.Start(t)
	url := git.InitRepo(t, "repeat", "main", map[string]string{
		"agent.yaml": fmt.Sprintf("image: %s:1.0.0 # {\"$imagepolicy\": \"%s:agent\"}\n", reg.Image("acme/agent"), ns),
	})
	auto := newAutomation(ns, "repeat", url)
	auto.Spec.Interval = metav1.Duration{Duration: soakInterval}
	auto.Spec.Git.Commit.MessageTemplate = `{{ repeat 300000000 "a" }}`
	create(t, auto)
}

// expectSettled waits until every policy selects its repository's newest
// tag, every automation has pushed it, and every Sync has applied its
// repository's last commit to its target.
func (f *soakFleet) expectSettled(t testing.TB, g Gomega, within time.Duration) {
	t.Helper()
	ctx := context.Background()
	for _, ns := range f.namespaces {
		g.Eventually(func(g Gomega) {
			var autos uprevv1.UpdateAutomationList
			g.Expect(k8s.List(ctx, &autos, client.InNamespace(ns))).To(Succeed())
			g.Expect(autos.Items).To(HaveLen(automationsPerTenant))
			for _, a := range autos.Items {
				g.Expect(apimeta.IsStatusConditionTrue(a.Status.Conditions, meta.ReadyCondition)).To(BeTrue(), "automation %s/%s is Ready", ns, a.Name)
			}
			var syncs uprevv1.SyncList
			g.Expect(k8s.List(ctx, &syncs, client.InNamespace(ns))).To(Succeed())
			g.Expect(syncs.Items).To(HaveLen(automationsPerTenant))
			g.Expect(fleet.AttachTargets(ctx, k8s, syncs.Items)).To(Succeed())
			for _, s := range syncs.Items {
				g.Expect(apimeta.IsStatusConditionTrue(s.Status.Conditions, meta.ReadyCondition)).To(BeTrue(), "Sync %s/%s is Ready", ns, s.Name)
				g.Expect(s.Status.Targets).To(HaveLen(1))
				g.Expect(s.Status.Targets[0].LastAppliedRevision).To(Equal(s.Status.LastAttemptedRevision), "Sync %s/%s applied what it fetched", ns, s.Name)
			}
		}, within).WithPolling(time.Second).Should(Succeed())
	}
	// Every Sync applied its repository's tip, so no automation commit is
	// lost on the way to the cluster.
	for tn, ns := range f.namespaces {
		for a := range automationsPerTenant {
			var s uprevv1.Sync
			g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: fmt.Sprintf("fleet-%d", a)}, &s)).To(Succeed())
			tip := strings.TrimSpace(f.git.Git(t, soakGitRepo(tn, a), "rev-parse", "main"))
			g.Eventually(func(g Gomega) {
				g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(&s), &s)).To(Succeed())
				syncs := []uprevv1.Sync{s}
				g.Expect(fleet.AttachTargets(ctx, k8s, syncs)).To(Succeed())
				s = syncs[0]
				g.Expect(s.Status.Targets).To(HaveLen(1))
				g.Expect(s.Status.Targets[0].LastAppliedRevision).To(HaveSuffix(tip), "Sync %s/%s applied the tip of main", ns, s.Name)
			}, within).WithPolling(time.Second).Should(Succeed())
		}
	}
}

// probe pushes a new tag to one image repository every probeEvery for d,
// announces it through the registry webhook at hooks, and returns how long
// each took to reach Git, and the probes that had not reached Git a
// minute after the last was pushed.
func (f *soakFleet) probe(t testing.TB, hooks string, d time.Duration) (latencies []time.Duration, lost []string) {
	t.Helper()
	type pending struct {
		file, tag string
		pushed    time.Time
	}
	waiting := map[string]pending{} // by Git repository
	tick := time.NewTicker(probeEvery)
	defer tick.Stop()
	end := time.After(d)
	var drain <-chan time.Time
	for n := 0; ; {
		select {
		case <-tick.C:
			if drain != nil {
				continue
			}
			// Round robin over automations first, so a repository's
			// previous probe is long done when it comes round again.
			tn, a := n%soakTenants, (n/soakTenants)%automationsPerTenant
			p := a*policiesPerAutomation + (n/(soakTenants*automationsPerTenant))%policiesPerAutomation
			repo := soakGitRepo(tn, a)
			if _, busy := waiting[repo]; busy {
				continue
			}
			tag := fmt.Sprintf("1.0.%d", n+1)
			n++
			f.reg.PushTags(t, soakRepo(tn, p), tag)
			waiting[repo] = pending{file: markedFile(p), tag: tag, pushed: time.Now()}
			f.announce(t, hooks, f.namespaces[tn], soakRepo(tn, p), tag)
		case repo := <-f.pushed:
			w, ok := waiting[repo]
			if !ok {
				continue
			}
			landed := time.Now()
			if strings.Contains(f.git.ReadFile(t, repo, "main", w.file), ":"+w.tag) {
				latencies = append(latencies, landed.Sub(w.pushed))
				delete(waiting, repo)
			}
		case <-end:
			drain = time.After(time.Minute)
			end = nil
		case <-drain:
			for repo, w := range waiting {
				lost = append(lost, fmt.Sprintf("%s %s %s", repo, w.file, w.tag))
			}
			return latencies, lost
		}
		if drain != nil && len(waiting) == 0 {
			return latencies, nil
		}
	}
}

// announce sends the registry webhook of a push of repo:tag to the
// manager's receiver of ns, as a Distribution registry notifies.
func (f *soakFleet) announce(t testing.TB, hooks, ns, repo, tag string) {
	t.Helper()
	body := fmt.Sprintf(`{"events":[{"action":"push","target":{"repository":%q,"tag":%q},"request":{"host":%q}}]}`, repo, tag, f.reg.Host())
	req, err := http.NewRequest(http.MethodPost, "http://"+hooks+webhook.PathPrefix+webhook.KindRegistry+"/"+ns, bytes.NewBufferString(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+webhookToken)
	req.Header.Set("Content-Type", "application/vnd.docker.distribution.events.v1+json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("announcing %s:%s: %v", repo, tag, err)
	}
	_ = resp.Body.Close() // the status is all it needs
	if resp.StatusCode/100 != 2 {
		t.Fatalf("announcing %s:%s: %s", repo, tag, resp.Status)
	}
}
