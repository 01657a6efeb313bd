package sharding

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
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
	"github.com/uprev-dev/uprev/internal/testenv/freeport"
	"github.com/uprev-dev/uprev/internal/testenv/manager"
	"github.com/uprev-dev/uprev/internal/testenv/registry"
)

// benchPairs is how many ImageRepository + ImagePolicy pairs
// BenchmarkImagePairs selects.
const benchPairs = 1000

// BenchmarkImagePairs creates, on a running manager (the real binary,
// image controllers only), 1,000 ImageRepositories each with one
// ImagePolicy, every repository an image of its own, and measures what a
// pair costs to reach its first selection: the API requests the manager
// made (its client's rest_client_requests_total), the API server's count
// by verb and resource (apiserver_request_total, less the benchmark's own
// creates and polls), the manager's reconciles and its CPU time.
func BenchmarkImagePairs(b *testing.B) {
	c := manager.StartCluster(b)
	bin := manager.Build(b)
	// Over HTTPS, with a certificate the manager trusts, as registries
	// are: a plain-HTTP one on the loopback is also tried over TLS on
	// every first request of a scan (go-containerregistry's ping), which
	// would count here the key generation of a TLS handshake per scan
	// that no registry in use costs.
	reg := registry.Start(b, registry.WithTLS())
	ca := filepath.Join(b.TempDir(), "registry-ca.pem")
	if err := os.WriteFile(ca, reg.CACertPEM, 0o600); err != nil {
		b.Fatal(err)
	}
	b.Setenv("SSL_CERT_FILE", ca)
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
	metricsAddr, pprofAddr := freeport.Addr(b), freeport.Addr(b)
	flags := []string{"--controllers=" + controllers.ImageScanning, "--log-level=info", "--metrics-addr=" + metricsAddr, "--metrics-secure=false"}
	profile := os.Getenv("UPREV_PAIRS_CPUPROFILE")
	if profile != "" {
		flags = append(flags, "--pprof-addr="+pprofAddr)
	}
	p := manager.Start(b, bin, c.KubeConfigPath, b.TempDir(), flags...)
	var cpu, sys float64
	requests, byKind, reconciles := map[string]float64{}, map[string]float64{}, map[string]float64{}
	for i := range b.N {
		b.StopTimer()
		ns := fmt.Sprintf("pairs-%d", i)
		before := apiserverRequestsBy(b, cfg)
		requestsBefore := counterBy(b, metricsAddr, "rest_client_requests_total", "method")
		reconcilesBefore := counterBy(b, metricsAddr, "controller_runtime_reconcile_total", "controller", "result")
		usageBefore := managerUsage(b, p)
		b.StartTimer()
		profiled := profileCPU(b, profile, pprofAddr)
		start := time.Now()
		createPairs(b, admin, reg, ns)
		polls := waitAllSelected(b, admin, ns, benchPairs)
		b.StopTimer()
		b.Logf("%d pairs created and selected in %s", benchPairs, time.Since(start).Round(100*time.Millisecond))
		if err := profiled.Wait(); err != nil {
			b.Fatal(err)
		}
		usage := managerUsage(b, p)
		cpu += (usage.CPU - usageBefore.CPU).Seconds()
		sys += (usage.SystemCPU - usageBefore.SystemCPU).Seconds()
		addDelta(requests, requestsBefore, counterBy(b, metricsAddr, "rest_client_requests_total", "method"))
		addDelta(reconciles, reconcilesBefore, counterBy(b, metricsAddr, "controller_runtime_reconcile_total", "controller", "result"))
		addDelta(byKind, before, apiserverRequestsBy(b, cfg))
		logEventReasons(b, admin, ns)
		// The benchmark's own requests: the namespace, the objects and
		// the polls.
		byKind["POST namespaces"]--
		byKind["POST imagerepositories"] -= benchPairs
		byKind["POST imagepolicies"] -= benchPairs
		byKind["LIST imagepolicies"] -= polls
	}
	n := float64(b.N * benchPairs)
	total := 0.0
	for _, v := range requests {
		total += v
	}
	b.ReportMetric(total/n, "apirequests/pair")
	b.ReportMetric(cpu*1000/n, "cpu-ms/pair")
	b.ReportMetric(sys*1000/n, "of-which-system-ms/pair")
	b.Logf("the manager's API requests per pair by method: %s", perPair(requests, n))
	b.Logf("API server requests per pair by verb and resource, from every client but the benchmark (with the API server's own leases and endpoints): %s", perPair(byKind, n))
	b.Logf("reconciles per pair by controller and result: %s", perPair(reconciles, n))
}

// addDelta adds to sums what grew from before to after, by key.
func addDelta(sums, before, after map[string]float64) {
	for k, v := range after {
		sums[k] += v - before[k]
	}
}

// perPair lists counts divided by n pairs, the ones of 0.001 or more.
func perPair(counts map[string]float64, n float64) string {
	var parts []string
	for k, v := range counts {
		if v/n >= 0.001 {
			parts = append(parts, fmt.Sprintf("%s %.3f", k, v/n))
		}
	}
	sort.Strings(parts)
	return strings.Join(parts, ", ")
}

// profileSeconds is how long the manager's CPU profile of
// BenchmarkImagePairs runs from the first create: about the first 1,000
// pairs on a quiet 2-core machine.
const profileSeconds = 30

// profileCPU writes, when file is not empty, a CPU profile of the manager
// serving Go's profiles on addr over the next profileSeconds into file,
// for `go tool pprof`. Set UPREV_PAIRS_CPUPROFILE to a file to have one.
func profileCPU(b *testing.B, file, addr string) *errgroup.Group {
	var g errgroup.Group
	if file == "" {
		return &g
	}
	g.Go(func() error {
		resp, err := http.Get(fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", addr, profileSeconds))
		if err != nil {
			return err
		}
		defer func() { _ = resp.Body.Close() }()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("CPU profile: %s", resp.Status)
		}
		f, err := os.Create(file)
		if err != nil {
			return err
		}
		if _, err := io.Copy(f, resp.Body); err != nil {
			return errors.Join(err, f.Close())
		}
		b.Logf("the manager's CPU profile over %d s is in %s", profileSeconds, file)
		return f.Close()
	})
	return &g
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

// managerUsage is the manager's CPU time and memory so far.
func managerUsage(b *testing.B, p *manager.Process) manager.Usage {
	b.Helper()
	u, err := p.Usage()
	if err != nil {
		b.Fatal(err)
	}
	return u
}
