package source

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

// TestHelmIndexDecodedWithinABudget: a 14.3 MiB index.yaml of many charts
// (inside the 32 MiB bound; it took the manager to 1.3-1.6 GiB) is read
// keeping only the chart the source names, within its timeout and a memory
// budget that, with the body itself, keeps the manager under 256 MiB.
func TestHelmIndexDecodedWithinABudget(t *testing.T) {
	g := NewWithT(t)
	index := largeHelmIndex(14<<20 + 300<<10)
	srv, _, _ := startHelmRepository(t, map[string]string{"index.yaml": index})
	const timeout = 10 * time.Second

	stop := heapPeak(t)
	start := time.Now()
	listing, err := NewClient(Options{}).ListHelmChart(context.Background(), "ns/chart", Access{Timeout: timeout}, srv.URL, "chart-042")
	elapsed := time.Since(start)
	peak := stop()
	t.Logf("%.1f MiB index answered in %v, heap peak +%d MiB: %v", float64(len(index))/(1<<20), elapsed, peak>>20, err)

	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(listing.Versions).To(HaveLen(largeIndexVersions))
	g.Expect(listing.Versions[7].Version).To(Equal("1.0.7"))
	g.Expect(listing.Versions[7].URL).To(Equal(srv.URL + "/charts/chart-042-1.0.7.tgz"))
	g.Expect(listing.Versions[7].Digest).To(Equal(fmt.Sprintf("sha256:%064x", 42*1000+7)))
	g.Expect(elapsed).To(BeNumerically("<", timeout+10*time.Second))
	g.Expect(peak).To(BeNumerically("<", indexBudget), "heap peak above the start")
}

// indexBudget bounds the heap a 14.4 MiB index may take above what the
// process held before: the body as the client reads it (about twice its
// size while it grows) and what is kept of one chart. The manager holds
// 112 MiB at rest, so it stays under 256 MiB; decoded whole, the index took
// 272 MiB.
const indexBudget = 80 << 20

// largeIndexVersions is the number of versions of each chart in
// largeHelmIndex.
const largeIndexVersions = 120

// largeHelmIndex returns an index.yaml of at least size bytes, written as
// `helm repo index` writes one (block style, sequences not indented under
// their key), of charts named chart-000, chart-001... with
// largeIndexVersions versions each and the fields of a public repository's
// index: a description, keywords, maintainers, sources, annotations and
// dependencies.
func largeHelmIndex(size int) string {
	var b strings.Builder
	b.Grow(size + 64<<10)
	b.WriteString("apiVersion: v1\nentries:\n")
	for c := 0; b.Len() < size; c++ {
		name := fmt.Sprintf("chart-%03d", c)
		fmt.Fprintf(&b, "  %s:\n", name)
		for v := range largeIndexVersions {
			fmt.Fprintf(&b, `  - annotations:
      category: Infrastructure
      images: |
        - name: %[1]s
          image: docker.io/example/%[1]s:1.0.%[2]d
      licenses: Apache-2.0
    apiVersion: v2
    appVersion: 1.0.%[2]d
    created: "2026-01-02T03:04:05.123456789Z"
    dependencies:
    - name: common
      repository: oci://registry.example.com/charts
      tags:
      - example-common
      version: 2.x.x
    description: '%[1]s is a chart of a public repository, described at the length
      such descriptions have, over two lines'
    digest: %064[3]x
    home: https://example.com/charts/%[1]s
    icon: https://example.com/icons/%[1]s.svg
    keywords:
    - %[1]s
    - example
    - infrastructure
    maintainers:
    - name: Example
      url: https://github.com/example/charts
    name: %[1]s
    sources:
    - https://github.com/example/charts/tree/main/%[1]s
    urls:
    - charts/%[1]s-1.0.%[2]d.tgz
    version: 1.0.%[2]d
`, name, v, c*1000+v)
		}
	}
	b.WriteString("generated: \"2026-01-02T03:04:05Z\"\nserverInfo: {}\n")
	return b.String()
}

// largeHelmIndexJSON returns an index of at least size bytes in JSON (as
// an index.yaml may be, JSON being YAML), of the charts of largeHelmIndex.
func largeHelmIndexJSON(size int) string {
	var b strings.Builder
	b.Grow(size + 64<<10)
	b.WriteString(`{"apiVersion":"v1","generated":"2026-01-02T03:04:05Z","entries":{`)
	for c := 0; b.Len() < size; c++ {
		name := fmt.Sprintf("chart-%03d", c)
		if c > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, "%q:[", name)
		for v := range largeIndexVersions {
			if v > 0 {
				b.WriteString(",")
			}
			fmt.Fprintf(&b, `{"annotations":{"category":"Infrastructure","licenses":"Apache-2.0"},"apiVersion":"v2","appVersion":"1.0.%[2]d",`+
				`"created":"2026-01-02T03:04:05.123456789Z","dependencies":[{"name":"common","repository":"oci://registry.example.com/charts","version":"2.x.x"}],`+
				`"description":"%[1]s is a chart of a public repository, described at the length such descriptions have","digest":"%064[3]x",`+
				`"home":"https://example.com/charts/%[1]s","keywords":["%[1]s","example"],"maintainers":[{"name":"Example","url":"https://github.com/example/charts"}],`+
				`"name":"%[1]s","sources":["https://github.com/example/charts/tree/main/%[1]s"],"urls":["charts/%[1]s-1.0.%[2]d.tgz"],"version":"1.0.%[2]d"}`,
				name, v, c*1000+v)
		}
		b.WriteString("]")
	}
	b.WriteString("}}\n")
	return b.String()
}

// TestHelmIndexInJSONDecodedWithinABudget: an index in JSON is read by
// encoding/json's tokens, the other charts skipped, within the same budget.
func TestHelmIndexInJSONDecodedWithinABudget(t *testing.T) {
	g := NewWithT(t)
	index := largeHelmIndexJSON(14<<20 + 300<<10)
	srv, _, _ := startHelmRepository(t, map[string]string{"index.yaml": index})

	stop := heapPeak(t)
	listing, err := NewClient(Options{}).ListHelmChart(context.Background(), "ns/chart", Access{}, srv.URL, "chart-042")
	peak := stop()
	t.Logf("%.1f MiB index in JSON, heap peak +%d MiB: %v", float64(len(index))/(1<<20), peak>>20, err)

	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(listing.Versions).To(HaveLen(largeIndexVersions))
	g.Expect(listing.Versions[7]).To(Equal(Version{Version: "1.0.7", URL: srv.URL + "/charts/chart-042-1.0.7.tgz", Digest: fmt.Sprintf("sha256:%064x", 42*1000+7)}))
	g.Expect(peak).To(BeNumerically("<", indexBudget), "heap peak above the start")

	_, err = NewClient(Options{}).ListHelmChart(context.Background(), "ns/chart", Access{}, srv.URL, "nginx")
	g.Expect(errors.Is(err, ErrNotListed)).To(BeTrue(), "%v", err)
}

// The forms an index takes: the ones `helm repo index` writes, and ones
// other tools or people write; a small index in a form that is not cut at
// its lines is decoded whole, a large one is refused.
func TestHelmIndexForms(t *testing.T) {
	entry := func(v string) string {
		return "  - apiVersion: v2\n    name: app\n    version: " + v + "\n    urls:\n    - app-" + v + ".tgz\n"
	}
	for name, tc := range map[string]struct {
		index string
		want  []string
	}{
		"as helm writes it": {"apiVersion: v1\nentries:\n  app:\n" + entry("1.0.0") + entry("1.1.0") + "  other:\n" + entry("9.9.9") + "generated: \"2026-01-02T03:04:05Z\"\n",
			[]string{"1.0.0", "1.1.0"}},
		"chart last, no generated": {"apiVersion: v1\nentries:\n  other:\n" + entry("9.9.9") + "  app:\n" + entry("1.0.0") + entry("1.1.0"),
			[]string{"1.0.0", "1.1.0"}},
		"sequences indented, comments, quoted keys, CRLF": {strings.ReplaceAll("# an index\n---\napiVersion: \"v1\"\nentries:\n\n    'other':\n      - apiVersion: v2\n        name: other\n        version: 9.9.9\n    \"app\": # the chart\n      # the first\n      - apiVersion: v2\n        name: app\n        version: 1.0.0\n        description: |\n          app:\n          - not an entry\n      - {apiVersion: v2, name: app, version: 1.1.0}\ngenerated: x\n", "\n", "\r\n"),
			[]string{"1.0.0", "1.1.0"}},
		"flow style, small": {`{apiVersion: v1, entries: {other: [{name: other, version: 9.9.9}], app: [{name: app, version: 1.0.0}, {name: app, version: 1.1.0}]}}`,
			[]string{"1.0.0", "1.1.0"}},
		"anchors between charts, small": {"apiVersion: v1\nentries:\n  other:\n  - &e {apiVersion: v2, name: app, version: 1.0.0}\n  app:\n  - *e\n  - {apiVersion: v2, name: app, version: 1.1.0}\n",
			[]string{"1.0.0", "1.1.0"}},
		"JSON": {`{"apiVersion":"v1","entries":{"other":[{"name":"other","version":"9.9.9"}],"app":[{"name":"app","version":"1.0.0"},{"name":"app","version":"1.1.0"}]}}`,
			[]string{"1.0.0", "1.1.0"}},
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			srv, _, _ := startHelmRepository(t, map[string]string{"index.yaml": tc.index})
			listing, err := NewClient(Options{}).ListHelmChart(context.Background(), "ns/app", Access{}, srv.URL, "app")
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(listing.Names()).To(Equal(tc.want))
		})
	}

	g := NewWithT(t)
	flow := `{apiVersion: v1, entries: {app: [` + strings.Repeat(`{name: app, version: 1.0.0},`, 40000) + `]}}`
	srv, _, _ := startHelmRepository(t, map[string]string{"index.yaml": flow})
	_, err := NewClient(Options{}).ListHelmChart(context.Background(), "ns/app", Access{}, srv.URL, "app")
	g.Expect(errors.Is(err, ErrInvalidResponse)).To(BeTrue(), "%v", err)
	g.Expect(err.Error()).To(ContainSubstring("block style"))
}

// BenchmarkHelmIndex14MiB reads a 14.4 MiB index.yaml of 122 charts of 120
// versions each (largeHelmIndex) over HTTP, keeping one chart's; it
// reports the heap's peak above what the process held before, the figure
// that must stay within the manager's budget.
func BenchmarkHelmIndex14MiB(b *testing.B) {
	index := largeHelmIndex(14<<20 + 300<<10)
	srv, _, _ := startHelmRepository(b, map[string]string{"index.yaml": index})
	b.SetBytes(int64(len(index)))
	b.ReportAllocs()
	var peak uint64
	for b.Loop() {
		stop := heapPeak(b)
		if _, err := NewClient(Options{}).ListHelmChart(context.Background(), "ns/chart", Access{}, srv.URL, "chart-042"); err != nil {
			b.Fatal(err)
		}
		peak = max(peak, stop())
	}
	b.ReportMetric(float64(peak)/(1<<20), "peak-heap-MiB")
}

// FuzzChartVersions: whatever a server answers, reading a chart's versions
// out of it neither panics nor fails but with the source's errors (not a
// Helm index, or the chart not in it).
func FuzzChartVersions(f *testing.F) {
	f.Add(helmIndex("app", "1.0.0", "1.1.0"), "app")
	f.Add("apiVersion: v1\nentries:\n    'app': # c\n      - {name: app, version: 1.0.0}\n", "app")
	f.Add(`{"apiVersion":"v1","entries":{"app":[{"name":"app","version":"1.0.0"}]}}`, "app")
	f.Add("apiVersion: v1\nentries:\n  \"a\":\n  - &e {version: 1}\n  b:\n  - *e\n", "b")
	f.Add("entries:\n  app:\n  -\n", "app")
	base, _ := url.Parse("https://charts.example.com/")
	f.Fuzz(func(t *testing.T, index, chart string) {
		_, err := chartVersions([]byte(index), base, chart)
		if err != nil && !errors.Is(err, ErrInvalidResponse) && !errors.Is(err, ErrNotListed) {
			t.Fatalf("%q: %v", index, err)
		}
	})
}
