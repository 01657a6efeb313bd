package fairness

import (
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	uprevv1 "github.com/uprev-dev/uprev/api/v1alpha1"
	"github.com/uprev-dev/uprev/internal/testenv/gitserver"
	"github.com/uprev-dev/uprev/internal/testenv/registry"
	"github.com/uprev-dev/uprev/internal/testenv/tarpit"
)

// goodBound is how long a good Sync or automation may take to be Ready
// while a tenant's Git server never answers: its normal time (well under
// a second here) plus a few seconds.
const goodBound = 20 * time.Second

// tarpitTimeout is the tenant's spec.git.timeout.
const tarpitTimeout = 3 * time.Second

// tarpitObjects is how many Syncs, and as many automations, the tenant
// points at its tarpit: more than the manager's workers per kind.
const tarpitObjects = 6

// tenant is the tenant whose Git server never answers.
type tenant struct {
	syncs []*uprevv1.Sync
	autos []*uprevv1.UpdateAutomation
}

// startTarpitTenant creates, in a namespace of its own, the Syncs and the
// automations of a tenant whose Git server accepts connections and never
// answers, each of its own repository.
func startTarpitTenant(t testing.TB, tp *tarpit.Tarpit) *tenant {
	t.Helper()
	ns := newNamespace(t, "tarpit")
	tn := &tenant{}
	for i := range tarpitObjects {
		url := fmt.Sprintf("http://%s/repo-%d.git", tp.Addr(), i)
		s := newSync(ns, fmt.Sprintf("slow-%d", i), url)
		s.Spec.Git.Timeout = &metav1.Duration{Duration: tarpitTimeout}
		create(t, s)
		tn.syncs = append(tn.syncs, s)
		a := newAutomation(ns, fmt.Sprintf("slow-%d", i), url)
		a.Spec.Git.Timeout = &metav1.Duration{Duration: tarpitTimeout}
		create(t, a)
		tn.autos = append(tn.autos, a)
	}
	return tn
}

// newSync returns a Sync of the repository at url onto the local cluster.
func newSync(ns, name, url string) *uprevv1.Sync {
	return &uprevv1.Sync{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: uprevv1.SyncSpec{
			Interval: metav1.Duration{Duration: time.Hour},
			Git:      uprevv1.GitSource{URL: url, Ref: uprevv1.GitRef{Branch: "main"}},
			Path:     "./apps",
			Targets:  []uprevv1.Target{{Name: "local"}},
		},
	}
}

// newAutomation returns an UpdateAutomation of the main branch at url.
func newAutomation(ns, name, url string) *uprevv1.UpdateAutomation {
	return &uprevv1.UpdateAutomation{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: uprevv1.UpdateAutomationSpec{
			Interval: metav1.Duration{Duration: time.Hour},
			Git: uprevv1.GitSpec{
				GitSource: uprevv1.GitSource{URL: url, Ref: uprevv1.GitRef{Branch: "main"}},
				Commit:    uprevv1.CommitSpec{Author: uprevv1.CommitUser{Name: "uprev", Email: "uprev@example.com"}},
			},
		},
	}
}

// goodTenant is a tenant whose Git server and registry answer.
type goodTenant struct {
	ns   string
	git  *gitserver.Server
	url  string
	sync *uprevv1.Sync
	auto *uprevv1.UpdateAutomation
}

// startGoodTenant makes the repository and the ready ImagePolicy of a
// tenant whose servers answer; its Sync and automation are made by
// createObjects.
func startGoodTenant(t testing.TB, g Gomega) *goodTenant {
	t.Helper()
	ns := newNamespace(t, "good")
	reg := registry.Start(t)
	reg.PushTags(t, "acme/agent", "1.0.0", "1.1.0")
	git := gitserver.Start(t)
	url := git.InitRepo(t, "apps", "main", map[string]string{
		"apps/cm.yaml":      fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: app\n  namespace: %s\ndata:\n  key: value\n", ns),
		"deploy/agent.yaml": fmt.Sprintf("image: %s:1.0.0 # {\"$imagepolicy\": \"%s:agent\"}\n", reg.Image("acme/agent"), ns),
	})
	makePolicy(t, g, ns, reg)
	return &goodTenant{ns: ns, git: git, url: url}
}

// createObjects creates the good tenant's Sync and automation.
func (gt *goodTenant) createObjects(t testing.TB) {
	t.Helper()
	gt.sync = newSync(gt.ns, "apps", gt.url)
	create(t, gt.sync)
	gt.auto = newAutomation(gt.ns, "apps", gt.url)
	create(t, gt.auto)
}

// expectReady waits, at most within, for the good tenant's Sync and
// automation to be Ready, and for the automation's commit.
func (gt *goodTenant) expectReady(t testing.TB, g Gomega, within time.Duration) {
	t.Helper()
	g.Eventually(readyCondition(gt.sync, func() []metav1.Condition { return gt.sync.Status.Conditions }), within).
		WithPolling(25*time.Millisecond).Should(HaveField("Status", metav1.ConditionTrue), "the good Sync is Ready")
	g.Eventually(readyCondition(gt.auto, func() []metav1.Condition { return gt.auto.Status.Conditions }), within).
		WithPolling(25*time.Millisecond).Should(HaveField("Status", metav1.ConditionTrue), "the good automation is Ready")
	g.Expect(gt.git.ReadFile(t, "apps", "main", "deploy/agent.yaml")).To(ContainSubstring(":1.1.0"))
}

func TestTarpitTenantDoesNotHoldBackOthers(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	tp := tarpit.Start(t)
	startManager(t)
	good := startGoodTenant(t, g)

	tn := startTarpitTenant(t, tp)
	g.Eventually(tp.Accepted, time.Minute).Should(BeNumerically(">=", 2), "the tenant's objects reached its server")

	start := time.Now()
	good.createObjects(t)
	good.expectReady(t, g, goodBound)
	t.Logf("the good Sync and automation were Ready %s after they were made", time.Since(start).Round(time.Millisecond))

	// Each of the tenant's objects tried, and says which server did not
	// answer in time.
	for _, s := range tn.syncs {
		tn.expectTimedOut(g, s, func() []metav1.Condition { return s.Status.Conditions }, tp.Addr())
	}
	for _, a := range tn.autos {
		tn.expectTimedOut(g, a, func() []metav1.Condition { return a.Status.Conditions }, tp.Addr())
	}
}

// expectTimedOut waits for obj to be not Ready for its Git server's
// timeout, naming the server.
func (tn *tenant) expectTimedOut(g Gomega, obj client.Object, conds func() []metav1.Condition, host string) {
	g.Eventually(readyCondition(obj, conds), 2*time.Minute).Should(And(
		HaveField("Status", metav1.ConditionFalse),
		HaveField("Reason", uprevv1.GitTimeoutReason),
		HaveField("Message", And(ContainSubstring(host), ContainSubstring(tarpitTimeout.String())))),
		"%s is not Ready and names the server that did not answer", obj.GetName())
}

// startTarpitTenants creates six Syncs and six UpdateAutomations, each in
// a namespace of its own, on the Git server of tp that accepts connections
// and never answers: tenants of one self-hosted Git server that is down.
func startTarpitTenants(t testing.TB, tp *tarpit.Tarpit) *tenant {
	t.Helper()
	tn := &tenant{}
	for i := range tarpitObjects {
		url := fmt.Sprintf("http://%s/repo-%d.git", tp.Addr(), i)
		s := newSync(newNamespace(t, "tarpit-sync"), "slow", url)
		s.Spec.Git.Timeout = &metav1.Duration{Duration: tarpitTimeout}
		create(t, s)
		tn.syncs = append(tn.syncs, s)
		a := newAutomation(newNamespace(t, "tarpit-auto"), "slow", url)
		a.Spec.Git.Timeout = &metav1.Duration{Duration: tarpitTimeout}
		create(t, a)
		tn.autos = append(tn.autos, a)
	}
	return tn
}

// TestGitTarpitAcrossNamespacesDoesNotHoldBackOthers: six Syncs and six
// UpdateAutomations in twelve namespaces point at one Git server that
// accepts connections and never answers (a self-hosted Git server that is
// down), created first. The per-namespace bound does not help here; the
// Git server's share does: a thirteenth namespace's Sync and automation,
// on a healthy server, are Ready within 5 s, and every object on the dead
// server is not Ready, naming it, within its timeout plus 10 s.
func TestGitTarpitAcrossNamespacesDoesNotHoldBackOthers(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	tp := tarpit.Start(t)
	startManager(t)
	good := startGoodTenant(t, g)

	created := time.Now()
	tn := startTarpitTenants(t, tp)
	g.Eventually(tp.Accepted, time.Minute).Should(BeNumerically(">=", 2), "the tenants' objects reached the dead server")

	start := time.Now()
	good.createObjects(t)
	good.expectReady(t, g, 5*time.Second)
	t.Logf("the good Sync and automation were Ready %s after they were made", time.Since(start).Round(time.Millisecond))

	deadline := tarpitTimeout + 10*time.Second - time.Since(created)
	for _, s := range tn.syncs {
		tn.expectTimedOutWithin(g, s, func() []metav1.Condition { return s.Status.Conditions }, tp.Addr(), deadline)
	}
	for _, a := range tn.autos {
		tn.expectTimedOutWithin(g, a, func() []metav1.Condition { return a.Status.Conditions }, tp.Addr(), deadline)
	}
}

// expectTimedOutWithin is expectTimedOut, within d.
func (tn *tenant) expectTimedOutWithin(g Gomega, obj client.Object, conds func() []metav1.Condition, host string, d time.Duration) {
	g.Eventually(readyCondition(obj, conds), max(d, time.Second)).Should(And(
		HaveField("Status", metav1.ConditionFalse),
		HaveField("Reason", uprevv1.GitTimeoutReason),
		HaveField("Message", And(ContainSubstring(host), ContainSubstring(tarpitTimeout.String())))),
		"%s/%s is not Ready within the timeout plus 10 s and names the server that did not answer", obj.GetNamespace(), obj.GetName())
}
