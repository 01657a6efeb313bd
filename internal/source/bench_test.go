package source

import (
	"context"
	"fmt"
	"testing"

	imagev1 "github.com/fluxcd/image-reflector-controller/api/v1"
)

// helmIndexOf returns an index.yaml of n versions of one chart.
func helmIndexOf(n int) string {
	versions := make([]string, n)
	for i := range versions {
		versions[i] = fmt.Sprintf("%d.%d.%d", i/1000, (i/10)%100, i%10)
	}
	return helmIndex("app", versions...)
}

// BenchmarkHelmIndex5000Versions reads an index.yaml of 5,000 chart
// versions over HTTP, parses it with Helm's index types and selects with a
// semver range: one full scan per iteration.
func BenchmarkHelmIndex5000Versions(b *testing.B) {
	index := helmIndexOf(5000)
	srv, _, _ := startHelmRepository(b, map[string]string{"index.yaml": index})
	choice := imagev1.ImagePolicyChoice{SemVer: &imagev1.SemVerPolicy{Range: ">=1.0.0 <4.0.0"}}
	b.SetBytes(int64(len(index)))
	b.ReportAllocs()
	for b.Loop() {
		listing, err := NewClient(Options{}).ListHelmChart(context.Background(), "ns/app", Access{}, srv.URL, "app")
		if err != nil {
			b.Fatal(err)
		}
		if _, err := Select(choice, nil, listing.Versions); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkHelmIndexUnchanged is the second scan of an unchanged index of
// 5,000 versions: one conditional request answered 304, and the versions
// of the last full answer selected again.
func BenchmarkHelmIndexUnchanged(b *testing.B) {
	srv, count, _ := startHelmRepository(b, map[string]string{"index.yaml": helmIndexOf(5000)})
	c := NewClient(Options{})
	if _, err := c.ListHelmChart(context.Background(), "ns/app", Access{}, srv.URL, "app"); err != nil {
		b.Fatal(err)
	}
	choice := imagev1.ImagePolicyChoice{SemVer: &imagev1.SemVerPolicy{Range: ">=1.0.0 <4.0.0"}}
	before := count.requests.Load()
	b.ReportAllocs()
	for b.Loop() {
		listing, err := c.ListHelmChart(context.Background(), "ns/app", Access{}, srv.URL, "app")
		if err != nil || !listing.NotModified {
			b.Fatalf("not a 304: %v", err)
		}
		if _, err := Select(choice, nil, listing.Versions); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(count.requests.Load()-before)/float64(b.N), "requests/scan")
}
