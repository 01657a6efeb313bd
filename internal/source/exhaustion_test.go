package source

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"runtime/metrics"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

// heapPeak samples the heap the process holds (live objects and garbage
// not yet swept) until stop is called, and returns the peak above what it
// held at the start. The sampler reads runtime/metrics every millisecond,
// which does not stop the world.
func heapPeak(t testing.TB) (stop func() uint64) {
	t.Helper()
	runtime.GC()
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(sample)
	base := sample[0].Value.Uint64()
	peak := base
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		s := []metrics.Sample{{Name: sample[0].Name}}
		for {
			metrics.Read(s)
			peak = max(peak, s[0].Value.Uint64())
			select {
			case <-done:
				return
			case <-tick.C:
			}
		}
	}()
	return func() uint64 {
		close(done)
		wg.Wait()
		return peak - base
	}
}

// recursiveDescentFeed is 140 bytes of nested arrays; with a JSONPath of
// recursive descents, kubectl's evaluator visits every node below each
// result of the step before, so each descent multiplies the results (five
// give ten million).
var recursiveDescentFeed = strings.Repeat("[", 70) + strings.Repeat("]", 70)

// serveConstant answers every request with body.
func serveConstant(t testing.TB, body string) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, body)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestJSONPathRecursiveDescentIsRefused: the 140-byte feed with a JSONPath
// of recursive descents that took the manager to 1.8 GiB is answered within
// the source's timeout (plus 10 s) and a small memory budget: recursive
// descent is refused as a configuration error, before any request.
func TestJSONPathRecursiveDescentIsRefused(t *testing.T) {
	g := NewWithT(t)
	g.Expect(recursiveDescentFeed).To(HaveLen(140))
	srv := serveConstant(t, recursiveDescentFeed)
	const timeout = 2 * time.Second
	expr := "{" + strings.Repeat("..[*]", 5) + "}"

	stop := heapPeak(t)
	start := time.Now()
	_, err := NewClient(Options{}).ListJSON(context.Background(), "ns/feed", Access{Timeout: timeout}, srv.URL, expr)
	elapsed := time.Since(start)
	peak := stop()
	t.Logf("answered in %v, heap peak +%d MiB: %v", elapsed, peak>>20, err)

	g.Expect(elapsed).To(BeNumerically("<", timeout+10*time.Second))
	g.Expect(peak).To(BeNumerically("<", 64<<20), "heap peak above the start")
	g.Expect(errors.Is(err, ErrInvalidConfig)).To(BeTrue(), "%v", err)
	g.Expect(err.Error()).To(ContainSubstring("recursive descent"))
}

// Unions that name the same member again multiply the results at each
// step as recursive descent does, so they are refused too; what is left
// (fields, indexes, slices, wildcards, filters) visits each node of the
// document at most once per step.
func TestJSONPathSubset(t *testing.T) {
	for _, expr := range []string{
		"{..version}",
		"{.releases[0,0,0,0][0,0,0,0]}",
		"{['stable','edge']}",
		"{range .releases[*]}{.version}{end}",
		"{.releases[?(@..x)].version}",
		"{.a} and {.b}",
	} {
		_, err := ParseJSONPath(expr)
		if !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%s: %v, want a configuration error", expr, err)
		}
	}
	srv := serveConstant(t, `{"releases":[{"version":"2.0.0-rc.1","prerelease":true},{"version":"1.9.0","prerelease":false}],"edge":"edge-1","channels":{"stable":"1.9.0"}}`)
	for expr, want := range map[string][]string{
		"{.edge}":                {"edge-1"},
		"{.releases[*].version}": {"2.0.0-rc.1", "1.9.0"},
		"{.releases[?(@.prerelease==false)].version}": {"1.9.0"},
		"{.releases[-1:].version}":                    {"1.9.0"},
		"{$.channels.stable}":                         {"1.9.0"},
		"{['edge']}":                                  {"edge-1"},
		"{.channels.*}":                               {"1.9.0"},
		"{.releases[0].version}":                      {"2.0.0-rc.1"},
		"{$.releases[0].version}{.edge}":              {"2.0.0-rc.1", "edge-1"},
		`{.releases[?(@.version=="1.9.0")].version}`:  {"1.9.0"},
	} {
		listing, err := NewClient(Options{}).ListJSON(context.Background(), "ns/feed", Access{}, srv.URL, expr)
		if err != nil {
			t.Errorf("%s: %v", expr, err)
			continue
		}
		if got := listing.Names(); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s: %v, want %v", expr, got, want)
		}
	}
}

// TestJSONFeedDecodedWithinABudget: a feed inside the size bound made of
// the smallest values ({} costs a map for 3 bytes) is refused for its
// number of values before it is decoded, so its decoding cannot take the
// manager past its memory budget.
func TestJSONFeedDecodedWithinABudget(t *testing.T) {
	g := NewWithT(t)
	body := "[" + strings.Repeat("{},", 10<<20) + "{}]"
	srv := serveConstant(t, body)
	const timeout = 10 * time.Second

	stop := heapPeak(t)
	start := time.Now()
	_, err := NewClient(Options{}).ListJSON(context.Background(), "ns/feed", Access{Timeout: timeout}, srv.URL, "{[*].v}")
	elapsed := time.Since(start)
	peak := stop()
	t.Logf("%d MiB answered in %v, heap peak +%d MiB: %v", len(body)>>20, elapsed, peak>>20, err)

	g.Expect(elapsed).To(BeNumerically("<", timeout+10*time.Second))
	g.Expect(peak).To(BeNumerically("<", 128<<20), "heap peak above the start")
	g.Expect(errors.Is(err, ErrInvalidResponse)).To(BeTrue(), "%v", err)
	g.Expect(err.Error()).To(ContainSubstring("values"))
}
