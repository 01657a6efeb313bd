package controllers

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"runtime"
	"runtime/metrics"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	uprevv1 "github.com/uprev-dev/uprev/api/v1alpha1"
	"github.com/uprev-dev/uprev/internal/testenv/cluster"
	"github.com/uprev-dev/uprev/internal/testenv/gitserver"
	"github.com/uprev-dev/uprev/internal/testenv/latency"
)

// fleetBenchDelay is the latency proxy's delay each way in front of the
// fleet benchmark's two remote control planes.
const fleetBenchDelay = 10 * time.Millisecond

// BenchmarkSyncFleet300Targets: one Sync, 300 targets selected by label
// (kubeconfigs, alternately, to two control planes behind the latency
// proxy), a 200-object revision, steps 1 / 10% / 50% / 100% (fleetBench).
// The targets of one control plane hold one administrator's kubeconfig,
// so they share one Applier.
func BenchmarkSyncFleet300Targets(b *testing.B) {
	fleetBench(b, 300, 200, false)
}

// BenchmarkSyncFleet1000Targets: as BenchmarkSyncFleet300Targets with
// 1,000 targets; with own-credentials each target's kubeconfig names a
// user of its own, so that no two share an Applier, as in a fleet of
// 1,000 clusters (whose API servers this machine cannot run).
func BenchmarkSyncFleet1000Targets(b *testing.B) {
	b.Run("shared-credentials", func(b *testing.B) { fleetBench(b, 1000, 200, false) })
	b.Run("own-credentials", func(b *testing.B) { fleetBench(b, 1000, 200, true) })
}

// fleetBench runs one Sync over targets selected by label, alternately to
// the eu and us control planes behind the latency proxy, applying a
// revision of objects ConfigMaps in steps 1 / 10% / 50% / 100%. With
// ownUsers each target's kubeconfig is of a user of its own (in
// system:masters). It reports the time to the whole fleet, API requests
// per target (all three API servers), the test process's peak Go heap (the
// manager runs in it) in use and live, the heap it keeps once the fleet is on the
// revision (after a GC: appliers and caches, not the rollout's garbage)
// and the largest object uprev wrote (the Sync, or a SyncTarget).
func fleetBench(b *testing.B, targets, objects int, ownUsers bool) {
	g := NewWithT(b)
	ctx := context.Background()
	startRemoteClusters(b)
	rc := &remoteClusters
	planes := []*cluster.Cluster{rc.eu, rc.us}
	proxies := []string{proxyOf(b, rc.eu), proxyOf(b, rc.us)}
	admins := [][]byte{rc.euKC, rc.usKC}
	for range b.N {
		ns := newNamespace(b)
		ensureNamespace(b, rc.euC, ns)
		ensureNamespace(b, rc.usC, ns)
		for i := range targets {
			kc := admins[i%2]
			if ownUsers {
				var err error
				if kc, err = planes[i%2].KubeConfigAs(fmt.Sprintf("fleet-%04d", i), "system:masters"); err != nil {
					b.Fatal(err)
				}
			}
			name := fmt.Sprintf("cluster-%04d", i)
			kubeConfigSecret(b, ns, name, throughProxy(b, kc, proxies[i%2]))
			labelSecret(b, ns, name, map[string]string{"fleet": "prod"})
		}
		var manifests strings.Builder
		for i := range objects {
			manifests.WriteString(configMap(ns, fmt.Sprintf("cm-%03d", i), strings.Repeat("v", 200)) + "---\n")
		}
		srv := gitserver.Start(b)
		repo := srv.InitRepo(b, "fleet", "main", map[string]string{"app/config.yaml": manifests.String()})

		before := apiRequests(b, testCluster, rc.eu, rc.us)
		var peak, peakLive atomic.Uint64
		stop := make(chan struct{})
		go samplePeakHeap(&peak, &peakLive, stop)
		start := time.Now()
		s := newSync(b, ns, repo, "app", byLabel, func(s *uprevv1.Sync) {
			s.Spec.Rollout = &uprevv1.Rollout{Steps: []uprevv1.RolloutStep{{Count: ptr.To(1)}, {Percent: ptr.To(10)}, {Percent: ptr.To(50)}, {Percent: ptr.To(100)}}}
		})
		g.Eventually(func(g Gomega) {
			c := readyCondition(g, s)
			g.Expect(c.Status).To(Equal(metav1.ConditionTrue), c.Message)
		}).WithTimeout(30 * time.Minute).WithPolling(time.Second).Should(Succeed())
		elapsed := time.Since(start)
		close(stop)
		// What the manager keeps once the fleet is on the revision (its
		// appliers, caches), without the garbage of the rollout.
		runtime.GC()
		var kept runtime.MemStats
		runtime.ReadMemStats(&kept)
		requests := apiRequests(b, testCluster, rc.eu, rc.us) - before
		perTarget := requests / float64(targets)

		largest, name := 0, ""
		var sync uprevv1.Sync
		g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(s), &sync)).To(Succeed())
		for _, obj := range append([]any{&sync}, anySlice(syncTargets(g, ns, s.Name))...) {
			data, err := json.Marshal(obj)
			g.Expect(err).NotTo(HaveOccurred())
			if len(data) > largest {
				largest, name = len(data), fmt.Sprintf("%T", obj)
			}
		}
		b.ReportMetric(elapsed.Seconds(), "s-to-fleet")
		b.ReportMetric(perTarget, "requests/target")
		b.ReportMetric(float64(peak.Load())/(1<<20), "MiB-peak-heap")
		b.ReportMetric(float64(peakLive.Load())/(1<<20), "MiB-peak-live-heap")
		b.ReportMetric(float64(kept.HeapAlloc)/(1<<20), "MiB-heap-kept")
		b.ReportMetric(float64(largest)/1024, "KiB-largest-object")
		b.Logf("to the whole fleet: %s; API requests: %.0f (%.1f per target); peak heap: %.0f MiB (live %.0f MiB); heap kept after the rollout: %.0f MiB; largest object: %s of %.1f KiB",
			elapsed.Round(time.Second), requests, perTarget, float64(peak.Load())/(1<<20), float64(peakLive.Load())/(1<<20), float64(kept.HeapAlloc)/(1<<20), name, float64(largest)/1024)
		// The Sync is left to the namespace's deletion: pruning the fleet's
		// objects through the proxy is not what is measured.
		patch := client.MergeFrom(s.DeepCopy())
		s.Spec.Suspend = true
		g.Expect(k8s.Patch(ctx, s, patch)).To(Succeed())
	}
}

// anySlice returns the addresses of items, as any.
func anySlice(items []uprevv1.SyncTarget) []any {
	out := make([]any, len(items))
	for i := range items {
		out[i] = &items[i]
	}
	return out
}

// samplePeakHeap keeps the largest heap in use in peak, and the largest
// live heap (as the last GC marked it, without garbage not collected
// yet) in peakLive, until stop closes.
func samplePeakHeap(peak, peakLive *atomic.Uint64, stop chan struct{}) {
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	live := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	for {
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		if m.HeapInuse > peak.Load() {
			peak.Store(m.HeapInuse)
		}
		metrics.Read(live)
		if v := live[0].Value.Uint64(); v > peakLive.Load() {
			peakLive.Store(v)
		}
		select {
		case <-stop:
			return
		case <-t.C:
		}
	}
}

// proxyOf starts a latency proxy delaying fleetBenchDelay each way in
// front of c's API server and returns its address.
func proxyOf(b *testing.B, c *cluster.Cluster) string {
	b.Helper()
	u, err := url.Parse(c.Config.Host)
	if err != nil {
		b.Fatal(err)
	}
	return latency.Start(b, u.Host, fleetBenchDelay).Addr()
}

// throughProxy returns kc with its servers replaced by the proxy at addr.
func throughProxy(b *testing.B, kc []byte, addr string) []byte {
	b.Helper()
	cfg, err := clientcmd.Load(kc)
	if err != nil {
		b.Fatal(err)
	}
	for _, cl := range cfg.Clusters {
		cl.Server = "https://" + addr
	}
	out, err := clientcmd.Write(*cfg)
	if err != nil {
		b.Fatal(err)
	}
	return out
}

// apiRequests sums apiserver_request_total over the API servers of
// clusters.
func apiRequests(b *testing.B, clusters ...*cluster.Cluster) float64 {
	b.Helper()
	total := 0.0
	for _, c := range clusters {
		hc, err := rest.HTTPClientFor(c.Config)
		if err != nil {
			b.Fatal(err)
		}
		resp, err := hc.Get(strings.TrimSuffix(c.Config.Host, "/") + "/metrics")
		if err != nil {
			b.Fatal(err)
		}
		if resp.StatusCode != http.StatusOK {
			_ = resp.Body.Close()
			b.Fatalf("GET %s/metrics: %s", c.Config.Host, resp.Status)
		}
		parser := expfmt.NewTextParser(model.UTF8Validation)
		families, err := parser.TextToMetricFamilies(resp.Body)
		if cerr := resp.Body.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			b.Fatal(err)
		}
		for _, m := range families["apiserver_request_total"].GetMetric() {
			total += m.GetCounter().GetValue()
		}
	}
	return total
}
