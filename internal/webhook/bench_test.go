package webhook_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	imagev1 "github.com/fluxcd/image-reflector-controller/api/v1"
	"github.com/fluxcd/pkg/apis/meta"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/uprev-dev/uprev/internal/webhook"
)

// Load of BenchmarkReceiverUnderBadSignatureFlood.
const (
	floodRate     = 500 // bad-signature requests per second
	floodDuration = 4 * time.Second
	goodEvery     = 200 * time.Millisecond // one good notification this often
	floodWorkers  = 32
)

// BenchmarkReceiverUnderBadSignatureFlood sends floodRate requests per
// second with bad signatures to a receiver on loopback for floodDuration,
// and meanwhile a correctly signed notification every goodEvery. Every bad
// request must be answered 401; every good one must set the annotation on
// the one matching ImageRepository exactly once (counted by a watch). One
// iteration is the whole bounded run; run with -benchtime=1x.
func BenchmarkReceiverUnderBadSignatureFlood(b *testing.B) {
	cp := startControlPlane(b)
	for range b.N {
		runFlood(b, cp)
	}
}

func runFlood(b *testing.B, cp *controlPlane) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ns := cp.newNamespace(b, token)
	cp.newImageRepository(b, ns, "agent", "registry.example.com/acme/agent")
	cp.newImageRepository(b, ns, "app", "registry.example.com/acme/app")
	waitCached(b, cp, ns)

	// Count the changes of the annotation the receiver sets.
	w, err := cp.direct.Watch(ctx, &imagev1.ImageRepositoryList{}, client.InNamespace(ns))
	if err != nil {
		b.Fatal(err)
	}
	defer w.Stop()
	var updates, otherUpdates atomic.Int64
	go func() {
		last := map[string]string{}
		for ev := range w.ResultChan() {
			repo, ok := ev.Object.(*imagev1.ImageRepository)
			if !ok || ev.Type != watch.Modified && ev.Type != watch.Added {
				continue
			}
			v := repo.Annotations[meta.ReconcileRequestAnnotation]
			if v != "" && v != last[repo.Name] {
				if repo.Name == "agent" {
					updates.Add(1)
				} else {
					otherUpdates.Add(1)
				}
			}
			last[repo.Name] = v
		}
	}()

	srv := httptest.NewServer(cp.newReceiver().Handler())
	defer srv.Close()
	transport := &http.Transport{MaxIdleConnsPerHost: floodWorkers * 2}
	defer transport.CloseIdleConnections()
	hc := &http.Client{Transport: transport, Timeout: 10 * time.Second}
	url := srv.URL + "/hooks/registry/" + ns
	body := pushNotification("registry.example.com", "acme/agent", "1.4.2")
	badSig := webhook.Sign([]byte("not-the-token"), body)
	goodSig := webhook.Sign([]byte(token), body)

	send := func(sig string) (int, time.Duration) {
		start := time.Now()
		req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(string(body)))
		req.Header.Set("X-Hub-Signature-256", sig)
		resp, err := hc.Do(req)
		if err != nil {
			return 0, time.Since(start)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		return resp.StatusCode, time.Since(start)
	}

	var (
		mu          sync.Mutex
		badLatency  []time.Duration
		goodLatency []time.Duration
		badWrong    atomic.Int64
		goodWrong   atomic.Int64
		good        int64
	)
	jobs := make(chan struct{}, floodRate) // a second of backlog at most
	var workers sync.WaitGroup
	for range floodWorkers {
		workers.Go(func() {
			for range jobs {
				code, d := send(badSig)
				if code != http.StatusUnauthorized {
					badWrong.Add(1)
				}
				mu.Lock()
				badLatency = append(badLatency, d)
				mu.Unlock()
			}
		})
	}
	b.ResetTimer()
	start := time.Now()
	tick := time.NewTicker(time.Second / floodRate)
	goodTick := time.NewTicker(goodEvery)
	dropped, queued := 0, 0
	for time.Since(start) < floodDuration {
		select {
		case <-tick.C:
			// A ticker drops ticks when this loop is late; catch up to
			// the rate since the start instead.
			for due := int(time.Since(start).Seconds() * floodRate); queued < due; queued++ {
				select {
				case jobs <- struct{}{}:
				default:
					dropped++ // the client side fell a second behind
				}
			}
		case <-goodTick.C:
			good++
			go func() {
				code, d := send(goodSig)
				if code != http.StatusAccepted {
					goodWrong.Add(1)
				}
				mu.Lock()
				goodLatency = append(goodLatency, d)
				mu.Unlock()
			}()
		}
	}
	tick.Stop()
	goodTick.Stop()
	close(jobs)
	workers.Wait()
	elapsed := time.Since(start)
	b.StopTimer()

	// Wait for the last good answers, and for the watch to deliver their
	// updates; an update too many shows up below.
	NewWithT(b).Eventually(func() bool {
		mu.Lock()
		defer mu.Unlock()
		return int64(len(goodLatency)) == good && updates.Load() >= good
	}).WithTimeout(30 * time.Second).Should(BeTrue())
	if badWrong.Load() > 0 || goodWrong.Load() > 0 {
		b.Fatalf("%d bad-signature requests not answered 401, %d good notifications not accepted", badWrong.Load(), goodWrong.Load())
	}
	if updates.Load() != good || otherUpdates.Load() != 0 {
		b.Fatalf("%d good notifications made %d annotation updates on the matching repository and %d on others", good, updates.Load(), otherUpdates.Load())
	}
	mu.Lock()
	defer mu.Unlock()
	b.ReportMetric(float64(len(badLatency))/elapsed.Seconds(), "bad-req/s")
	b.ReportMetric(float64(dropped), "bad-dropped")
	b.ReportMetric(ms(percentile(badLatency, 50)), "bad-p50-ms")
	b.ReportMetric(ms(percentile(badLatency, 99)), "bad-p99-ms")
	b.ReportMetric(ms(percentile(badLatency, 100)), "bad-max-ms")
	b.ReportMetric(float64(good), "good-sent")
	b.ReportMetric(float64(updates.Load()), "annotation-updates")
	b.ReportMetric(ms(percentile(goodLatency, 50)), "good-p50-ms")
	b.ReportMetric(ms(percentile(goodLatency, 100)), "good-max-ms")
}

// waitCached waits until the manager's cache holds the namespace's Secret
// and both ImageRepositories.
func waitCached(b *testing.B, cp *controlPlane, ns string) {
	b.Helper()
	NewWithT(b).Eventually(func(g Gomega) {
		var list imagev1.ImageRepositoryList
		g.Expect(cp.cached.List(context.Background(), &list, client.InNamespace(ns))).To(Succeed())
		g.Expect(list.Items).To(HaveLen(2))
		g.Expect(cp.cached.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: webhook.DefaultSecretName}, &corev1.Secret{})).To(Succeed())
	}).WithTimeout(30 * time.Second).Should(Succeed())
}

func percentile(d []time.Duration, p int) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	i := (len(s)*p + 99) / 100
	return s[max(0, min(len(s)-1, i-1))]
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
