package registry

import (
	"fmt"
	"runtime"
	"testing"

	testregistry "github.com/uprev-dev/uprev/internal/testenv/registry"
)

// BenchmarkScan10000Tags lists 10,000 tags from the in-process registry in
// pages of 1,000 and applies Flux's default exclusion list, as one scan of
// an ImageRepository does (on a client that has done its handshake).
func BenchmarkScan10000Tags(b *testing.B) {
	r := testregistry.Start(b, testregistry.WithTagPageSize(1000))
	tags := semverTags(9990)
	for i := range 10 {
		tags = append(tags, fmt.Sprintf("sha256-%d.sig", i))
	}
	r.PushTags(b, "acme/agent", tags...)
	c := newClient(b, ScannerOptions{}, Access{})
	image := r.Image("acme/agent")
	if _, err := c.ListTags(b.Context(), image); err != nil {
		b.Fatal(err)
	}
	r.ResetCounts()
	b.ReportAllocs()
	for b.Loop() {
		listed, err := c.ListTags(b.Context(), image)
		if err != nil {
			b.Fatal(err)
		}
		kept, err := Exclude(listed, []string{`^.*\.sig$`})
		if err != nil {
			b.Fatal(err)
		}
		if len(listed) != 10000 || len(kept) != 9990 {
			b.Fatalf("listed %d tags, kept %d", len(listed), len(kept))
		}
	}
	b.ReportMetric(float64(r.Counts().TagListPages)/float64(b.N), "pages/op")
}

// BenchmarkStore1000x1000 writes 1,000 repositories of 1,000 tags each to
// a Store and reports the heap in use afterwards: the store keeps nothing
// in memory, so it stays near the process baseline.
func BenchmarkStore1000x1000(b *testing.B) {
	tags := semverTags(1000)
	var heap uint64
	for b.Loop() {
		store := Store{Dir: b.TempDir()}
		for i := range 1000 {
			if err := store.SetTags(fmt.Sprintf("ns-%d/repo-%d", i%10, i), tags); err != nil {
				b.Fatal(err)
			}
		}
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		heap = max(heap, m.HeapInuse)
	}
	b.ReportMetric(float64(heap)/(1<<20), "heap-MiB")
}

// BenchmarkStoreRead10000 reads 10,000 stored tags: names alone (Tags, an
// ungated policy) and with their first-seen times (SeenTags, a gated one).
func BenchmarkStoreRead10000(b *testing.B) {
	store := Store{Dir: b.TempDir()}
	tags := make([]string, 10000)
	for i := range tags {
		tags[i] = fmt.Sprintf("%d.%d.0", i/100, i%100)
	}
	if err := store.SetTags("ns/agent", tags); err != nil {
		b.Fatal(err)
	}
	b.Run("Tags", func(b *testing.B) {
		for b.Loop() {
			if _, err := store.Tags("ns/agent"); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("SeenTags", func(b *testing.B) {
		for b.Loop() {
			if _, err := store.SeenTags("ns/agent"); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkStoreFirstWrite stores the two tags of a new repository, as its
// first scan does: the cost of creating its file, which depends on the file
// system under the storage path (see docs/benchmarks.md).
func BenchmarkStoreFirstWrite(b *testing.B) {
	store := Store{Dir: b.TempDir()}
	tags := []string{"1.0.0", "1.1.0"}
	i := 0
	for b.Loop() {
		if err := store.SetTags(fmt.Sprintf("pairs/app-%d", i), tags); err != nil {
			b.Fatal(err)
		}
		i++
	}
}
