package tenancy

import (
	"bytes"
	"context"
	"fmt"
	"regexp"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	uprevv1 "github.com/uprev-dev/uprev/api/v1alpha1"
	"github.com/uprev-dev/uprev/internal/testenv/gitserver"
	"github.com/uprev-dev/uprev/internal/testenv/manager"
)

// Figures of TestManagerMemoryIgnoresOtherTenantsSecrets.
const (
	// unrelatedSecrets Secrets of secretBytes each are created in a
	// namespace uprev has no object in.
	unrelatedSecrets = 10000
	secretBytes      = 10 << 10
	// maxLiveHeapMiB bounds the manager's live heap after a garbage
	// collection: the 100 MiB of unrelated Secrets are not held.
	maxLiveHeapMiB = 40
)

// TestManagerMemoryIgnoresOtherTenantsSecrets: with 10,000 Secrets of
// 10 KiB in a namespace uprev has nothing to do with, the manager reading
// a Git Secret for one UpdateAutomation does not hold them all in memory.
// The figures (live heap from the Go runtime's gctrace, RSS from /proc)
// are logged for docs/benchmarks.md.
func TestManagerMemoryIgnoresOtherTenantsSecrets(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	c := manager.StartCluster(t)
	others, team := "others", "team"
	for _, ns := range []string{others, team} {
		g.Expect(c.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
	}
	start := time.Now()
	createSecrets(t, c.Client, others, unrelatedSecrets, secretBytes)
	t.Logf("created %d Secrets of %d bytes in %s", unrelatedSecrets, secretBytes, time.Since(start).Round(time.Second))

	git := gitserver.Start(t, gitserver.WithBasicAuth("team", "team-password"))
	url := git.InitRepo(t, "fleet", "main", map[string]string{"cm.yaml": configMap(team, "app")})
	g.Expect(c.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: team, Name: "git"},
		Data: map[string][]byte{"username": []byte("team"), "password": []byte("team-password")}})).To(Succeed())
	auto := &uprevv1.UpdateAutomation{
		ObjectMeta: metav1.ObjectMeta{Namespace: team, Name: "fleet"},
		Spec: uprevv1.UpdateAutomationSpec{
			Interval: metav1.Duration{Duration: time.Hour},
			Git: uprevv1.GitSpec{
				GitSource: uprevv1.GitSource{URL: url, Ref: uprevv1.GitRef{Branch: "main"}, SecretRef: &meta.LocalObjectReference{Name: "git"}},
				Commit:    uprevv1.CommitSpec{Author: uprevv1.CommitUser{Name: "uprev", Email: "uprev@example.com"}},
			},
		},
	}
	g.Expect(c.Client.Create(ctx, auto)).To(Succeed())

	t.Setenv("GODEBUG", "gctrace=1")
	mgr := manager.Start(t, manager.Build(t), c.KubeConfigPath, t.TempDir(), "--log-level=info")
	g.Eventually(func(g Gomega) {
		g.Expect(c.Client.Get(ctx, client.ObjectKeyFromObject(auto), auto)).To(Succeed())
		ready := false
		for _, cond := range auto.Status.Conditions {
			ready = ready || (cond.Type == meta.ReadyCondition && cond.Status == metav1.ConditionTrue)
		}
		g.Expect(ready).To(BeTrue(), "the automation read its Git Secret and the repository")
	}).WithTimeout(3 * time.Minute).Should(Succeed())
	// A few garbage collections after the run, the live heap is what the
	// manager holds.
	var live int
	g.Eventually(func(g Gomega) {
		heaps := liveHeaps(mgr.Logs(t))
		g.Expect(len(heaps)).To(BeNumerically(">=", 3), "garbage collections reported")
		live = heaps[len(heaps)-1]
	}).WithTimeout(3 * time.Minute).Should(Succeed())
	rss, hwm := memoryOf(t, mgr)
	t.Logf("manager with %d unrelated Secrets of %d KiB: live heap %d MiB, RSS %d MiB, peak RSS %d MiB",
		unrelatedSecrets, secretBytes>>10, live, rss>>10, hwm>>10)
	g.Expect(live).To(BeNumerically("<", maxLiveHeapMiB), "live heap in MiB")
}

// createSecrets creates n Secrets of size bytes in ns, eight at a time.
func createSecrets(t *testing.T, k8s client.Client, ns string, n, size int) {
	t.Helper()
	value := bytes.Repeat([]byte("x"), size)
	var wg sync.WaitGroup
	errs := make(chan error, n)
	next := make(chan int)
	for range 8 {
		wg.Go(func() {
			for i := range next {
				s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("unrelated-%05d", i)},
					Data: map[string][]byte{"value": value}}
				if err := k8s.Create(context.Background(), s); err != nil {
					errs <- err
				}
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("creating Secrets: %v", err)
	}
}

// gctraceLine matches the heap sizes of a gctrace line:
// "gc 12 @3.1s 2%: ... 95->96->60 MB, ...", the last being the live heap.
var gctraceLine = regexp.MustCompile(`gc \d+ @[^:]+: .* \d+->\d+->(\d+) MB`)

// liveHeaps returns the live heap, in MiB, after each garbage collection
// logged in out.
func liveHeaps(out string) []int {
	var heaps []int
	for _, m := range gctraceLine.FindAllStringSubmatch(out, -1) {
		n, _ := strconv.Atoi(m[1])
		heaps = append(heaps, n)
	}
	return heaps
}

// memoryOf returns the manager's resident set size and its peak, in KiB.
func memoryOf(t *testing.T, mgr *manager.Process) (rss, hwm int) {
	t.Helper()
	u, err := mgr.Usage()
	if err != nil {
		t.Fatal(err)
	}
	return u.RSSKiB, u.PeakRSSKiB
}
