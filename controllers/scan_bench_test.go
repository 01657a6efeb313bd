package controllers

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"time"

	imagev1 "github.com/fluxcd/image-reflector-controller/api/v1"
	"github.com/fluxcd/pkg/runtime/conditions"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/uprev-dev/uprev/internal/policy"
	"github.com/uprev-dev/uprev/internal/registry"
	testregistry "github.com/uprev-dev/uprev/internal/testenv/registry"
)

// BenchmarkScanAndSelect10000Tags is one scan of a repository with 10,000
// tags from the in-process registry (1,000 tags a page), exclusion, the tag
// store write, and a semver selection: the work of one ImageRepository
// reconcile plus one ImagePolicy reconcile, without the API round trips.
func BenchmarkScanAndSelect10000Tags(b *testing.B) {
	reg := testregistry.Start(b, testregistry.WithTagPageSize(1000))
	tags := make([]string, 0, 10000)
	for i := range 10000 {
		tags = append(tags, fmt.Sprintf("%d.%d.%d", i/1000, (i/10)%100, i%10))
	}
	reg.PushTags(b, "acme/agent", tags...)
	image := reg.Image("acme/agent")
	scanner := registry.NewScanner(registry.ScannerOptions{})
	store := registry.Store{Dir: b.TempDir()}
	choice := semverChoice(">=1.0.0 <9.0.0")
	reg.ResetCounts()
	b.ReportAllocs()
	for b.Loop() {
		c, err := scanner.Client(b.Context(), registry.Access{})
		if err != nil {
			b.Fatal(err)
		}
		listed, err := c.ListTags(b.Context(), image)
		if err != nil {
			b.Fatal(err)
		}
		kept, err := registry.Exclude(listed, []string{`^.*\.sig$`})
		if err != nil {
			b.Fatal(err)
		}
		if err := store.SetTags("ns/agent", kept); err != nil {
			b.Fatal(err)
		}
		stored, err := store.Tags("ns/agent")
		if err != nil {
			b.Fatal(err)
		}
		latest, err := policy.SelectLatest(choice, nil, stored)
		if err != nil || latest != "8.99.9" {
			b.Fatalf("selected %q, %v", latest, err)
		}
		if _, err := c.Digest(b.Context(), image, latest); err != nil {
			b.Fatal(err)
		}
	}
	counts := reg.Counts()
	b.ReportMetric(float64(counts.TagListPages)/float64(b.N), "pages/op")
	b.ReportMetric(float64(counts.ManifestHead+counts.ManifestGet)/float64(b.N), "digest-lookups/op")
}

// syntheticTags serves /v2/<repo>/tags/list with 1,000 tags made up from
// the repository name, so that 1,000 repositories cost the registry no
// memory and the heap measured is the controller's.
func syntheticTags(w http.ResponseWriter, req *http.Request) {
	if req.URL.Path == "/v2/" {
		return
	}
	repo, ok := strings.CutSuffix(strings.TrimPrefix(req.URL.Path, "/v2/"), "/tags/list")
	if !ok {
		http.NotFound(w, req)
		return
	}
	tags := make([]string, 1000)
	for i := range tags {
		tags[i] = fmt.Sprintf("%d.%d.%d-%s", i/100, (i/10)%10, i%10, strings.ReplaceAll(repo, "/", "-"))
	}
	_ = json.NewEncoder(w).Encode(map[string]any{"name": repo, "tags": tags})
}

// BenchmarkHeap1000Repositories creates 1,000 ImageRepositories of 1,000
// tags each on the real apiserver, waits until the running manager scanned
// them all, and reports the process heap after a GC.
func BenchmarkHeap1000Repositories(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(syntheticTags))
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	ctx := context.Background()
	for b.Loop() {
		ns := newNamespace(b)
		start := time.Now()
		for i := range 1000 {
			repo := &imagev1.ImageRepository{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("repo-%d", i)},
				Spec: imagev1.ImageRepositorySpec{
					Image:    fmt.Sprintf("%s/team/app-%d", host, i),
					Interval: metav1.Duration{Duration: time.Hour},
				},
			}
			if err := k8s.Create(ctx, repo); err != nil {
				b.Fatal(err)
			}
		}
		NewWithT(b).Eventually(func(g Gomega) {
			var list imagev1.ImageRepositoryList
			g.Expect(k8s.List(ctx, &list, client.InNamespace(ns))).To(Succeed())
			scanned := 0
			for _, r := range list.Items {
				if conditions.IsReady(&r) && r.Status.LastScanResult != nil && r.Status.LastScanResult.TagCount == 1000 {
					scanned++
				}
			}
			g.Expect(scanned).To(Equal(1000))
		}).WithTimeout(10 * time.Minute).WithPolling(time.Second).Should(Succeed())
		b.ReportMetric(time.Since(start).Seconds(), "s-to-scan-all")
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		b.ReportMetric(float64(m.HeapInuse)/(1<<20), "heap-inuse-MiB")
	}
}
