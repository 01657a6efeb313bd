package sharding

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	imagev1 "github.com/fluxcd/image-reflector-controller/api/v1"
	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	. "github.com/onsi/gomega"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/uprev-dev/uprev/controllers"
	"github.com/uprev-dev/uprev/internal/testenv/freeport"
	"github.com/uprev-dev/uprev/internal/testenv/manager"
	"github.com/uprev-dev/uprev/internal/testenv/registry"
)

// benchPolicies is how many ImagePolicies each benchmark run selects.
const benchPolicies = 10000

// benchShards are the shard keys the policies are spread over; a run with
// fewer managers gives one manager several keys.
var benchShards = []string{"s0", "s1", "s2"}

// BenchmarkShards10000Policies starts 1 or 3 managers of the real binary,
// with the image controllers only and Flux's default API rate limit, on
// 10,000 ImagePolicies spread over three shard keys (each key with an
// ImageRepository of its own, as sharding requires: a policy and its
// repository belong to one shard). It measures the time from the managers'
// start to every policy Ready, and reports the API server requests and the
// reconciles per policy, summed over the managers: reconciles/policy above
// the one-manager figure would be duplicate work.
func BenchmarkShards10000Policies(b *testing.B) {
	c := manager.StartCluster(b)
	bin := manager.Build(b)
	reg := registry.Start(b)
	for _, key := range benchShards {
		reg.PushTags(b, "shard-"+key+"/app", "1.0.0", "1.1.0", "2.0.0")
	}
	cfg := rest.CopyConfig(c.Config)
	cfg.QPS, cfg.Burst = 2000, 4000
	scheme, err := controllers.NewScheme()
	if err != nil {
		b.Fatal(err)
	}
	admin, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		b.Fatal(err)
	}
	for _, managers := range []int{1, 3} {
		b.Run(fmt.Sprintf("shards=%d", managers), func(b *testing.B) {
			var requests, reconciles float64
			for i := range b.N {
				b.StopTimer()
				ns := fmt.Sprintf("shards%d-%d", managers, i)
				createPolicies(b, admin, reg, ns)
				before := apiserverRequests(b, cfg)
				b.StartTimer()
				procs := startShardManagers(b, bin, c.KubeConfigPath, managers)
				polls := waitAllSelected(b, admin, ns, benchPolicies)
				b.StopTimer()
				requests += apiserverRequests(b, cfg) - before - polls
				for _, p := range procs {
					reconciles += p.reconciles(b)
					p.Stop()
				}
			}
			b.ReportMetric(requests/float64(b.N*benchPolicies), "apirequests/policy")
			b.ReportMetric(reconciles/float64(b.N*benchPolicies), "reconciles/policy")
		})
	}
}

// createPolicies creates namespace ns with one ImageRepository per shard
// key and benchPolicies ImagePolicies spread evenly over the keys.
func createPolicies(b *testing.B, admin client.Client, reg *registry.Registry, ns string) {
	b.Helper()
	ctx := context.Background()
	if err := admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		b.Fatal(err)
	}
	for _, key := range benchShards {
		repo := &imagev1.ImageRepository{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: key, Labels: map[string]string{shardKey: key}},
			Spec:       imagev1.ImageRepositorySpec{Image: reg.Image("shard-" + key + "/app"), Interval: metav1.Duration{Duration: time.Hour}},
		}
		if err := admin.Create(ctx, repo); err != nil {
			b.Fatal(err)
		}
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(32)
	for i := range benchPolicies {
		key := benchShards[i%len(benchShards)]
		g.Go(func() error {
			return admin.Create(gctx, &imagev1.ImagePolicy{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "p" + strconv.Itoa(i), Labels: map[string]string{shardKey: key}},
				Spec: imagev1.ImagePolicySpec{
					ImageRepositoryRef: meta.NamespacedObjectReference{Name: key},
					Policy:             imagev1.ImagePolicyChoice{SemVer: &imagev1.SemVerPolicy{Range: "1.x"}},
				},
			})
		})
	}
	if err := g.Wait(); err != nil {
		b.Fatal(err)
	}
}

// shardManager is one running manager and the port of its metrics.
type shardManager struct {
	*manager.Process
	metricsAddr string
}

// startShardManagers starts n managers that split benchShards between
// them: one manager selects every key, three select one key each.
func startShardManagers(b *testing.B, bin, kubeconfig string, n int) []shardManager {
	b.Helper()
	var selectors []string
	if n == 1 {
		selectors = []string{shardKey}
	} else {
		for _, key := range benchShards[:n] {
			selectors = append(selectors, shardKey+"="+key)
		}
	}
	var procs []shardManager
	for _, sel := range selectors {
		addr := freeport.Addr(b)
		p := manager.Start(b, bin, kubeconfig, b.TempDir(),
			"--controllers="+controllers.ImageScanning, "--watch-label-selector="+sel,
			"--log-level=info", "--metrics-addr="+addr, "--metrics-secure=false")
		procs = append(procs, shardManager{Process: p, metricsAddr: addr})
	}
	return procs
}

// waitAllSelected waits until n ImagePolicies in ns are Ready with the tag
// 1.1.0 selected, and returns the API requests it made to find out.
func waitAllSelected(b *testing.B, admin client.Client, ns string, n int) float64 {
	b.Helper()
	g := NewWithT(b)
	polls := 0
	g.Eventually(func() int {
		polls++
		var list imagev1.ImagePolicyList
		g.Expect(admin.List(context.Background(), &list, client.InNamespace(ns))).To(Succeed())
		ready := 0
		for i := range list.Items {
			p := &list.Items[i]
			if conditions.IsReady(p) && p.Status.LatestRef != nil && p.Status.LatestRef.Tag == "1.1.0" {
				ready++
			}
		}
		return ready
	}).WithTimeout(20 * time.Minute).WithPolling(time.Second).Should(Equal(n))
	return float64(polls)
}

// apiserverRequests is the API server's count of requests served so far.
func apiserverRequests(b *testing.B, cfg *rest.Config) float64 {
	b.Helper()
	total := 0.0
	for _, n := range apiserverRequestsBy(b, cfg) {
		total += n
	}
	return total
}

// reconciles is the ImagePolicy reconciles the manager has finished.
func (p shardManager) reconciles(b *testing.B) float64 {
	b.Helper()
	total := 0.0
	for k, n := range counterBy(b, p.metricsAddr, "controller_runtime_reconcile_total", "controller") {
		if k == "imagepolicy" {
			total += n
		}
	}
	if total == 0 {
		b.Fatalf("the manager at %s reports no ImagePolicy reconciles", p.metricsAddr)
	}
	return total
}

// counterBy is the counter family of the Prometheus metrics served on addr
// over plain HTTP, summed by the values of labels (joined with spaces).
func counterBy(b *testing.B, addr, family string, labels ...string) map[string]float64 {
	b.Helper()
	counts := map[string]float64{}
	f := scrape(b, nil, "http://"+addr+"/metrics")[family]
	if f == nil {
		return counts
	}
	for _, m := range f.GetMetric() {
		values := map[string]string{}
		for _, l := range m.GetLabel() {
			values[l.GetName()] = l.GetValue()
		}
		var key []string
		for _, l := range labels {
			key = append(key, values[l])
		}
		counts[strings.Join(key, " ")] += m.GetCounter().GetValue()
	}
	return counts
}

// scrape reads the Prometheus metrics at url, through cfg's credentials
// when cfg is set.
func scrape(b *testing.B, cfg *rest.Config, url string) map[string]*dto.MetricFamily {
	b.Helper()
	hc := http.DefaultClient
	if cfg != nil {
		var err error
		if hc, err = rest.HTTPClientFor(cfg); err != nil {
			b.Fatal(err)
		}
	}
	resp, err := hc.Get(url)
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		b.Fatalf("GET %s: %s", url, resp.Status)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		b.Fatalf("parsing %s: %v", url, err)
	}
	return families
}
