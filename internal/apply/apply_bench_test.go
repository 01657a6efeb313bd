package apply

import (
	"context"
	"fmt"
	"net/url"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"

	"github.com/uprev-dev/uprev/internal/testenv/cluster"
	"github.com/uprev-dev/uprev/internal/testenv/latency"
)

const (
	// benchObjects is the number of ConfigMaps, Services and Deployments in
	// a benchmark set, besides its Namespaces.
	benchObjects = 1000
	// benchNamespaces is how many Namespaces the set spreads over.
	benchNamespaces = 4
)

// extraClustersMu guards extraClusters.
var extraClustersMu sync.Mutex

// startExtraClusters returns n control planes besides testCluster, started
// on first use and stopped by TestMain.
func startExtraClusters(b *testing.B, n int) []*cluster.Cluster {
	b.Helper()
	extraClustersMu.Lock()
	defer extraClustersMu.Unlock()
	for len(extraClusters) < n {
		c, err := cluster.Start()
		if err != nil {
			b.Fatal(err)
		}
		extraClusters = append(extraClusters, c)
	}
	return extraClusters[:n]
}

// benchSet returns benchNamespaces Namespaces named after prefix and
// benchObjects objects spread over them: ConfigMaps, Services and
// Deployments in turn. The Services are headless: envtest's service IP
// range holds only 256 addresses.
func benchSet(prefix string) []*unstructured.Unstructured {
	var set []*unstructured.Unstructured
	for n := range benchNamespaces {
		set = append(set, &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "v1", "kind": "Namespace",
			"metadata": map[string]any{"name": fmt.Sprintf("%s-%d", prefix, n)},
		}})
	}
	for i := range benchObjects {
		ns := fmt.Sprintf("%s-%d", prefix, i%benchNamespaces)
		name := fmt.Sprintf("obj-%d", i)
		labels := map[string]any{"app": name}
		meta := map[string]any{"name": name, "namespace": ns, "labels": labels}
		var o map[string]any
		switch i % 3 {
		case 0:
			o = map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta,
				"data": map[string]any{"index": fmt.Sprint(i), "config.yaml": "log: info\nfeatures: [a, b, c]\n"}}
		case 1:
			o = map[string]any{"apiVersion": "v1", "kind": "Service", "metadata": meta,
				"spec": map[string]any{"clusterIP": "None", "selector": labels, "ports": []any{map[string]any{"name": "http", "port": int64(80), "targetPort": int64(8080)}}}}
		default:
			o = map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "metadata": meta,
				"spec": map[string]any{
					"replicas": int64(2),
					"selector": map[string]any{"matchLabels": labels},
					"template": map[string]any{
						"metadata": map[string]any{"labels": labels},
						"spec": map[string]any{"containers": []any{map[string]any{
							"name": "app", "image": "ghcr.io/acme/app:1.4.2",
							"ports":     []any{map[string]any{"containerPort": int64(8080)}},
							"resources": map[string]any{"requests": map[string]any{"cpu": "100m", "memory": "64Mi"}},
						}}},
					},
				}}
		}
		set = append(set, &unstructured.Unstructured{Object: o})
	}
	return set
}

// applyOrFail applies a set and fails the benchmark on error.
func applyOrFail(b *testing.B, a *Applier, set []*unstructured.Unstructured, previous []Entry) Result {
	b.Helper()
	result, err := a.Apply(context.Background(), set, previous, Options{Owner: testOwner, Prune: true})
	if err != nil {
		b.Fatal(err)
	}
	return result
}

func BenchmarkFirstApply1000(b *testing.B) {
	for range b.N {
		b.StopTimer()
		set := benchSet(uniqueName("first"))
		b.StartTimer()
		result := applyOrFail(b, testApplier, set, nil)
		if n := len(result.Created()); n != benchObjects+benchNamespaces {
			b.Fatalf("created %d objects, want %d", n, benchObjects+benchNamespaces)
		}
	}
}

func BenchmarkNoChangeApply1000(b *testing.B) {
	set := benchSet(uniqueName("nochange"))
	first := applyOrFail(b, testApplier, set, nil)
	b.ResetTimer()
	for range b.N {
		result := applyOrFail(b, testApplier, set, first.Inventory)
		if result.Changed() {
			b.Fatalf("a reconcile of an unchanged set changed %v %v", result.Configured(), result.Created())
		}
	}
}

func BenchmarkApply1000ThreeClusters(b *testing.B) {
	appliers := []*Applier{testApplier}
	for _, c := range startExtraClusters(b, 2) {
		a, err := NewApplier(c.Config, nil)
		if err != nil {
			b.Fatal(err)
		}
		appliers = append(appliers, a)
	}
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		set := benchSet(uniqueName("three"))
		b.StartTimer()
		applyEverywhere(b, appliers, set)
	}
}

// remoteDelay is the latency added each way to a cluster taken as remote:
// a real cluster in another region is tens of milliseconds away, where a
// test apiserver on this machine answers at once.
const remoteDelay = 25 * time.Millisecond

// remoteAppliers returns appliers of n clusters (the test cluster and
// n-1 more), each behind a proxy that adds remoteDelay each way.
func remoteAppliers(b *testing.B, n int) []*Applier {
	b.Helper()
	clusters := append([]*cluster.Cluster{testCluster}, startExtraClusters(b, n-1)...)
	var appliers []*Applier
	for _, c := range clusters {
		cfg := rest.CopyConfig(c.Config)
		u, err := url.Parse(cfg.Host)
		if err != nil {
			b.Fatal(err)
		}
		cfg.Host = "https://" + latency.Start(b, u.Host, remoteDelay).Addr()
		a, err := NewApplier(cfg, nil)
		if err != nil {
			b.Fatal(err)
		}
		appliers = append(appliers, a)
	}
	return appliers
}

// applyEverywhere applies set to every applier at once, as a wave applies
// to its targets.
func applyEverywhere(b *testing.B, appliers []*Applier, set []*unstructured.Unstructured) {
	b.Helper()
	var wg sync.WaitGroup
	errs := make([]error, len(appliers))
	for i, a := range appliers {
		wg.Go(func() {
			_, errs[i] = a.Apply(context.Background(), set, nil, Options{Owner: testOwner, Prune: true})
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkApply1000RemoteClusters applies 1,000 objects to one and to
// three clusters that are remoteDelay away each way; the target is three
// in at most 1.3 times the time of one.
func BenchmarkApply1000RemoteClusters(b *testing.B) {
	for _, n := range []int{1, 3} {
		b.Run(fmt.Sprintf("clusters=%d", n), func(b *testing.B) {
			appliers := remoteAppliers(b, n)
			b.ResetTimer()
			for range b.N {
				b.StopTimer()
				set := benchSet(uniqueName(fmt.Sprintf("remote%d", n)))
				b.StartTimer()
				applyEverywhere(b, appliers, set)
			}
		})
	}
}
