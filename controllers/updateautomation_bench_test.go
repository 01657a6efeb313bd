package controllers

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	imagev1 "github.com/fluxcd/image-reflector-controller/api/v1"
	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	uprevv1 "github.com/uprev-dev/uprev/api/v1alpha1"
	"github.com/uprev-dev/uprev/internal/testenv/gitserver"
	"github.com/uprev-dev/uprev/internal/testenv/registry"
	"github.com/uprev-dev/uprev/internal/update"
)

// benchPoll is how often benchmarks look at status: often enough not to
// blur the figures, reading the manager's cache.
const benchPoll = 2 * time.Millisecond

// benchDeployment is a Deployment of about 1 KiB; marked ones carry the
// image marker of policy.
func benchDeployment(i int, image, version, marker string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# app %04d of the fleet\napiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: app-%04d\n  labels: {app: app-%04d, team: t%d}\n", i, i, i, i%20)
	b.WriteString("spec:\n  replicas: 2\n  selector:\n    matchLabels: {app: app}\n  template:\n    metadata:\n      labels: {app: app}\n    spec:\n      containers:\n        - name: app\n")
	fmt.Fprintf(&b, "          image: %s:%s%s\n", image, version, marker)
	b.WriteString("          ports:\n            - containerPort: 8080\n          resources:\n            requests: {cpu: 10m, memory: 32Mi}\n            limits: {memory: 128Mi}\n")
	b.WriteString("          env:\n            - name: LOG_LEVEL\n              value: info\n          readinessProbe:\n            httpGet: {path: /healthz, port: 8080}\n")
	return b.String()
}

// benchPolicy creates an ImagePolicy on the ImageRepository "repo" and
// waits until it selects tag.
func benchPolicy(b *testing.B, ns, name, rng, tag string, labels map[string]string) {
	b.Helper()
	pol := &imagev1.ImagePolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels},
		Spec: imagev1.ImagePolicySpec{
			ImageRepositoryRef: meta.NamespacedObjectReference{Name: "repo"},
			Policy:             semverChoice(rng),
		},
	}
	if err := k8s.Create(context.Background(), pol); err != nil {
		b.Fatalf("creating ImagePolicy: %v", err)
	}
	NewWithT(b).Eventually(func(g Gomega) {
		g.Expect(latestRef(g, client.ObjectKeyFromObject(pol)).Tag).To(Equal(tag))
	}).Should(Succeed())
}

// benchRepository creates the ImageRepository "repo" scanning image hourly.
func benchRepository(b *testing.B, ns, image string) *imagev1.ImageRepository {
	b.Helper()
	repo := &imagev1.ImageRepository{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "repo"},
		Spec:       imagev1.ImageRepositorySpec{Image: image, Interval: metav1.Duration{Duration: time.Hour}},
	}
	if err := k8s.Create(context.Background(), repo); err != nil {
		b.Fatalf("creating ImageRepository: %v", err)
	}
	return repo
}

// requestRun sets a new reconcile request token on obj.
func requestRun(b *testing.B, obj client.Object) {
	b.Helper()
	setReconcileRequest(b, obj, strconv.FormatInt(time.Now().UnixNano(), 10))
}

// setReconcileRequest sets the reconcile request token on obj.
func setReconcileRequest(b *testing.B, obj client.Object, token string) {
	b.Helper()
	ctx := context.Background()
	NewWithT(b).Eventually(func() error {
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
			return err
		}
		ann := obj.GetAnnotations()
		if ann == nil {
			ann = map[string]string{}
		}
		ann[meta.ReconcileRequestAnnotation] = token
		obj.SetAnnotations(ann)
		return k8s.Update(ctx, obj)
	}).WithPolling(benchPoll).Should(Succeed())
}

// BenchmarkAutomationRun is one run of the real controller over a
// repository of 1,000 to 100,000 YAML files (about 1 KiB each, 100 to a
// directory) of which 50 carry a marker: before each run a person pushes a
// commit that sets 10 of the marked values back to 1.0.0, and the run
// writes the policy's 2.0.0 into them again. The kept clone is warm, so a
// run fetches that one commit, and reads only the trees that commit changed
// and the marked files (gitrepo.Session.FilesContaining). Timed: from the
// reconcile request to status.lastPushCommit changing. full-walk-ms is what
// reading every file for markers costs on the same tree, for comparison.
func BenchmarkAutomationRun(b *testing.B) {
	for _, files := range []int{1000, 5000, 20000, 100000} {
		b.Run(fmt.Sprintf("files=%d", files), func(b *testing.B) { benchmarkAutomationRun(b, files) })
	}
}

func benchmarkAutomationRun(b *testing.B, files int) {
	const marked, changed = 50, 10
	g := NewWithT(b)
	ns := newNamespace(b)
	reg := registry.Start(b)
	image := reg.Image("acme/agent")
	reg.PushTags(b, "acme/agent", "1.0.0", "2.0.0")
	benchRepository(b, ns, image)
	benchPolicy(b, ns, "agent", ">=1.0.0", "2.0.0", nil)

	marker := ` # {"$imagepolicy": "` + ns + `:agent"}`
	// Marked files are spread over the directories.
	path := func(i int) string { return fmt.Sprintf("clusters/c%03d/app-%06d.yaml", i%(files/100), i) }
	content := func(i int, version string) string {
		if i < marked {
			return benchDeployment(i, image, version, marker)
		}
		return benchDeployment(i, image, "2.0.0", "")
	}
	tree := make(map[string]string, files)
	for i := range files {
		tree[path(i)] = content(i, "2.0.0")
	}
	srv := gitserver.Start(b)
	url := srv.InitRepo(b, fleetRepo, "main", tree)
	auto := newAutomation(b, ns, url)
	// The first run clones and checks out every file: minutes at 100,000
	// files on a loaded machine.
	g.Eventually(func(g Gomega) {
		g.Expect(conditions.IsReady(getAutomation(g, auto))).To(BeTrue())
	}).WithTimeout(15 * time.Minute).WithPolling(time.Second).Should(Succeed())
	waitForReady(b, auto)
	person := newPusher(b, url)

	// Reading every file for markers, as a run did before the index.
	start := time.Now()
	res, err := update.RewriteMarkers(context.Background(), person.dir, ".", update.Options{
		Policies: map[update.PolicyKey]update.Ref{{Namespace: ns, Name: "agent"}: {Image: image, Tag: "2.0.0"}},
		DryRun:   true,
	})
	fullWalk := time.Since(start)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res.Changes).To(BeEmpty())

	var runs time.Duration
	var uploads, receives int64
	last := ""
	b.ResetTimer()
	for n := 0; n < b.N; n++ {
		b.StopTimer()
		lowered := make(map[string]string, changed)
		for j := range changed {
			i := (n*changed + j) % marked
			lowered[path(i)] = content(i, "1.0.0")
		}
		person.pushFiles(lowered, fmt.Sprintf("Pin %d apps to 1.0.0", changed))
		before := srv.Counts()
		b.StartTimer()

		start := time.Now()
		requestRun(b, auto)
		g.Eventually(func(g Gomega) {
			g.Expect(getAutomation(g, auto).Status.LastPushCommit).NotTo(Equal(last))
		}).WithPolling(benchPoll).Should(Succeed())
		runs += time.Since(start)

		b.StopTimer()
		after := srv.Counts()
		uploads += after.UploadPack - before.UploadPack
		receives += after.ReceivePack - before.ReceivePack
		last = auto.Status.LastPushCommit
		g.Expect(srv.Git(b, fleetRepo, "rev-parse", "main")).To(Equal(last))
		g.Expect(strings.Fields(srv.Git(b, fleetRepo, "diff", "--name-only", "main~1", "main"))).To(ConsistOf(slices.Collect(maps.Keys(lowered))))
		person.sync()
		b.StartTimer()
	}
	b.StopTimer()
	b.ReportMetric(float64(runs.Milliseconds())/float64(b.N), "ms/run")
	b.ReportMetric(float64(fullWalk.Milliseconds()), "full-walk-ms")
	b.ReportMetric(float64(uploads)/float64(b.N), "upload-packs/run")
	b.ReportMetric(float64(receives)/float64(b.N), "receive-packs/run")
}

// BenchmarkAutomationRunNothingNew5000Files is a run of the real controller
// over a repository like BenchmarkAutomationRun's (5,000 files, 200 marked) when nothing is
// new: no one pushed, the policy selects what the last run wrote. It fetches
// (finding the tip unchanged), reads the holds and skips the rewrite walk.
// Timed: from the reconcile request to status.lastHandledReconcileAt
// showing it handled, which includes the apiserver round trips.
func BenchmarkAutomationRunNothingNew5000Files(b *testing.B) {
	const files, marked = 5000, 200
	g := NewWithT(b)
	ns := newNamespace(b)
	reg := registry.Start(b)
	image := reg.Image("acme/agent")
	reg.PushTags(b, "acme/agent", "1.0.0", "2.0.0")
	benchRepository(b, ns, image)
	benchPolicy(b, ns, "agent", ">=1.0.0", "2.0.0", nil)
	marker := ` # {"$imagepolicy": "` + ns + `:agent"}`
	tree := make(map[string]string, files)
	for i := range files {
		if i < marked {
			tree[fmt.Sprintf("clusters/app-%04d/deployment.yaml", i)] = benchDeployment(i, image, "2.0.0", marker)
		} else {
			tree[fmt.Sprintf("clusters/app-%04d/deployment.yaml", i)] = benchDeployment(i, image, "2.0.0", "")
		}
	}
	srv := gitserver.Start(b)
	url := srv.InitRepo(b, fleetRepo, "main", tree)
	auto := newAutomation(b, ns, url)
	waitForReady(b, auto)
	runAutomation(b, auto) // the first run records what it saw; from here on nothing is new

	var total time.Duration
	reconcileBefore, runsBefore := reconcileSeconds(b, "updateautomation")
	b.ResetTimer()
	for n := 0; n < b.N; n++ {
		start := time.Now()
		token := strconv.FormatInt(time.Now().UnixNano(), 10)
		setReconcileRequest(b, auto, token)
		g.Eventually(func(g Gomega) {
			g.Expect(getAutomation(g, auto).Status.LastHandledReconcileAt).To(Equal(token))
		}).WithPolling(benchPoll).Should(Succeed())
		total += time.Since(start)
		b.StopTimer()
		g.Expect(conditions.GetMessage(auto, meta.ReadyCondition)).To(HavePrefix("no change: nothing new since"))
		b.StartTimer()
	}
	b.StopTimer()
	reconcileAfter, runsAfter := reconcileSeconds(b, "updateautomation")
	b.ReportMetric(float64(total.Microseconds())/1000/float64(b.N), "ms/run")
	b.ReportMetric((reconcileAfter-reconcileBefore)*1000/float64(runsAfter-runsBefore), "reconcile-ms/run")
}

// reconcileSeconds returns the time controller spent in Reconcile and the
// number of calls, from controller-runtime's histogram.
func reconcileSeconds(b *testing.B, controller string) (float64, uint64) {
	b.Helper()
	families, err := metrics.Registry.Gather()
	if err != nil {
		b.Fatalf("gathering metrics: %v", err)
	}
	for _, f := range families {
		if f.GetName() != "controller_runtime_reconcile_time_seconds" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "controller" && l.GetValue() == controller {
					return m.GetHistogram().GetSampleSum(), m.GetHistogram().GetSampleCount()
				}
			}
		}
	}
	b.Fatalf("no reconcile time recorded for controller %q", controller)
	return 0, 0
}

// BenchmarkTwentyAutomationsOneRepo is 20 automations on one repository and
// branch, each selecting its own policy and writing its own folder, whose
// 20 policies change at once: a new tag of their common image is pushed and
// its ImageRepository asked to scan. Timed: from the scan request to all 20
// automations reporting their push. The kept clone is shared, so each run
// should cost one fetch (an upload-pack session) and one push.
func BenchmarkTwentyAutomationsOneRepo(b *testing.B) {
	const teams, filler = 20, 500
	g := NewWithT(b)
	ns := newNamespace(b)
	reg := registry.Start(b)
	image := reg.Image("acme/agent")
	reg.PushTags(b, "acme/agent", "1.0.0")
	repo := benchRepository(b, ns, image)

	tree := map[string]string{}
	for i := range filler {
		tree[fmt.Sprintf("shared/app-%04d.yaml", i)] = benchDeployment(i, image, "1.0.0", "")
	}
	for t := range teams {
		name := fmt.Sprintf("team-%02d", t)
		tree["teams/"+name+"/agent.yaml"] = benchDeployment(t, image, "1.0.0", ` # {"$imagepolicy": "`+ns+`:`+name+`"}`)
	}
	srv := gitserver.Start(b)
	url := srv.InitRepo(b, fleetRepo, "main", tree)

	autos := make([]*uprevv1.UpdateAutomation, teams)
	for t := range teams {
		name := fmt.Sprintf("team-%02d", t)
		benchPolicy(b, ns, name, ">=1.0.0", "1.0.0", map[string]string{"team": name})
		autos[t] = newAutomation(b, ns, url, func(a *uprevv1.UpdateAutomation) {
			a.Name = name
			a.Spec.PolicySelector = &metav1.LabelSelector{MatchLabels: map[string]string{"team": name}}
			a.Spec.Update.Path = "./teams/" + name
		})
	}
	for _, a := range autos {
		waitForReady(b, a)
	}

	var total time.Duration
	var commits, uploads, receives int64
	last := make([]string, teams)
	b.ResetTimer()
	for n := 0; n < b.N; n++ {
		b.StopTimer()
		tag := fmt.Sprintf("1.%d.0", n+1)
		reg.PushTags(b, "acme/agent", tag)
		before := srv.Counts()
		commitsBefore, _ := strconv.Atoi(srv.Git(b, fleetRepo, "rev-list", "--count", "main"))
		b.StartTimer()

		start := time.Now()
		requestRun(b, repo)
		for t, a := range autos {
			g.Eventually(func(g Gomega) {
				g.Expect(getAutomation(g, a).Status.LastPushCommit).NotTo(Equal(last[t]))
			}).WithPolling(benchPoll).Should(Succeed())
			last[t] = a.Status.LastPushCommit
		}
		total += time.Since(start)

		b.StopTimer()
		after := srv.Counts()
		commitsAfter, _ := strconv.Atoi(srv.Git(b, fleetRepo, "rev-list", "--count", "main"))
		commits += int64(commitsAfter - commitsBefore)
		uploads += after.UploadPack - before.UploadPack
		receives += after.ReceivePack - before.ReceivePack
		for t := range teams {
			g.Expect(srv.ReadFile(b, fleetRepo, "main", fmt.Sprintf("teams/team-%02d/agent.yaml", t))).To(ContainSubstring(":" + tag + " #"))
		}
		b.StartTimer()
	}
	b.StopTimer()
	n := float64(b.N)
	b.ReportMetric(float64(total.Milliseconds())/n, "ms/all-pushed")
	b.ReportMetric(float64(commits)/n, "commits/op")
	b.ReportMetric(float64(uploads)/n, "upload-packs/op")
	b.ReportMetric(float64(receives)/n, "receive-packs/op")
}
