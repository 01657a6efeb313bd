package sharding

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	imagev1 "github.com/fluxcd/image-reflector-controller/api/v1"
	"github.com/fluxcd/pkg/apis/meta"
	dto "github.com/prometheus/client_model/go"
	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/uprev-dev/uprev/controllers"
	"github.com/uprev-dev/uprev/internal/testenv/manager"
	"github.com/uprev-dev/uprev/internal/testenv/registry"
)

// benchPairs is how many ImageRepository + ImagePolicy pairs
// BenchmarkImagePairs selects.
const benchPairs = 1000

// BenchmarkImagePairs creates, on a running manager (the real binary,
// image controllers only), 1,000 ImageRepositories each with one
// ImagePolicy, every repository an image of its own, and measures what a
// pair costs to reach its first selection: the API server requests the
// manager made (from the API server's apiserver_request_total, less the
// benchmark's own creates and polls), by verb and resource, and the
// manager's CPU time.
func BenchmarkImagePairs(b *testing.B) {
	c := manager.StartCluster(b)
	bin := manager.Build(b)
	reg := registry.Start(b)
	for i := range benchPairs {
		reg.PushTags(b, "pairs/app-"+strconv.Itoa(i), "1.0.0", "1.1.0")
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
	p := manager.Start(b, bin, c.KubeConfigPath, b.TempDir(), "--controllers="+controllers.ImageScanning, "--log-level=info")
	var requests, cpu float64
	byKind := map[string]float64{}
	for i := range b.N {
		b.StopTimer()
		ns := fmt.Sprintf("pairs-%d", i)
		before := apiserverRequestsBy(b, cfg)
		cpuBefore := managerCPU(b, p)
		b.StartTimer()
		createPairs(b, admin, reg, ns)
		polls := waitAllSelected(b, admin, ns, benchPairs)
		b.StopTimer()
		cpu += managerCPU(b, p) - cpuBefore
		after := apiserverRequestsBy(b, cfg)
		for k, v := range after {
			byKind[k] += v - before[k]
			requests += v - before[k]
		}
		logEventReasons(b, admin, ns)
		// The benchmark's own requests: the namespace, the objects and
		// the polls.
		byKind["POST namespaces"]--
		byKind["POST imagerepositories"] -= benchPairs
		byKind["POST imagepolicies"] -= benchPairs
		byKind["LIST imagepolicies"] -= polls
		requests -= 1 + 2*benchPairs + polls
	}
	n := float64(b.N * benchPairs)
	b.ReportMetric(requests/n, "apirequests/pair")
	b.ReportMetric(cpu*1000/n, "cpu-ms/pair")
	var kinds []string
	for k, v := range byKind {
		if v/n >= 0.01 {
			kinds = append(kinds, fmt.Sprintf("%s %.2f", k, v/n))
		}
	}
	sort.Strings(kinds)
	b.Logf("API requests per pair by verb and resource: %s", strings.Join(kinds, ", "))
}

// logEventReasons logs how many events the pairs of namespace ns got, by
// kind and reason, which says which of them go beyond one Ready event per
// object. It reads after the requests were counted.
func logEventReasons(b *testing.B, admin client.Client, ns string) {
	b.Helper()
	var events corev1.EventList
	if err := admin.List(context.Background(), &events, client.InNamespace(ns)); err != nil {
		b.Fatal(err)
	}
	reasons := map[string]int32{}
	for _, e := range events.Items {
		reasons[e.InvolvedObject.Kind+" "+e.Reason] += max(e.Count, 1)
	}
	var parts []string
	for k, v := range reasons {
		parts = append(parts, fmt.Sprintf("%s %.2f", k, float64(v)/benchPairs))
	}
	sort.Strings(parts)
	b.Logf("events per pair by kind and reason: %s", strings.Join(parts, ", "))
}

// createPairs creates namespace ns with benchPairs ImageRepositories, each
// of its own image, and one ImagePolicy on each.
func createPairs(b *testing.B, admin client.Client, reg *registry.Registry, ns string) {
	b.Helper()
	ctx := context.Background()
	if err := admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		b.Fatal(err)
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(32)
	for i := range benchPairs {
		name := "app-" + strconv.Itoa(i)
		g.Go(func() error {
			if err := admin.Create(gctx, &imagev1.ImageRepository{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
				Spec:       imagev1.ImageRepositorySpec{Image: reg.Image("pairs/" + name), Interval: metav1.Duration{Duration: time.Hour}},
			}); err != nil {
				return err
			}
			return admin.Create(gctx, &imagev1.ImagePolicy{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
				Spec: imagev1.ImagePolicySpec{
					ImageRepositoryRef: meta.NamespacedObjectReference{Name: name},
					Policy:             imagev1.ImagePolicyChoice{SemVer: &imagev1.SemVerPolicy{Range: "1.x"}},
				},
			})
		})
	}
	if err := g.Wait(); err != nil {
		b.Fatal(err)
	}
}

// apiserverRequestsBy is the API server's count of requests served so
// far, by "VERB resource[/subresource]".
func apiserverRequestsBy(b *testing.B, cfg *rest.Config) map[string]float64 {
	b.Helper()
	families := scrape(b, cfg, strings.TrimSuffix(cfg.Host, "/")+"/metrics")
	counts := map[string]float64{}
	f := families["apiserver_request_total"]
	if f == nil {
		b.Fatal("the API server reports no apiserver_request_total")
	}
	for _, m := range f.GetMetric() {
		counts[requestKind(m)] += m.GetCounter().GetValue()
	}
	return counts
}

// requestKind names the verb and resource of an apiserver_request_total
// series.
func requestKind(m *dto.Metric) string {
	labels := map[string]string{}
	for _, l := range m.GetLabel() {
		labels[l.GetName()] = l.GetValue()
	}
	kind := labels["verb"] + " " + labels["resource"]
	if labels["subresource"] != "" {
		kind += "/" + labels["subresource"]
	}
	return kind
}

// managerCPU is the CPU time, in seconds, the manager has used so far.
func managerCPU(b *testing.B, p *manager.Process) float64 {
	b.Helper()
	u, err := p.Usage()
	if err != nil {
		b.Fatal(err)
	}
	return u.CPU.Seconds()
}
