package crds

import (
	"crypto/rand"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"sync"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"

	testregistry "github.com/uprev-dev/uprev/internal/testenv/registry"
)

// BenchmarkExtractCRDsFromImage50MB extracts the CRDs of a 50 MB image of
// 10 layers, each of 5 MB of random (incompressible) filler files and one
// or two CRDs under /crds, one of which an upper layer whites out. The
// image is a local v1.Image whose layers are gzip files written to a
// temporary folder before the timer starts, so each iteration reads and
// gunzips the 50 MB as it would from a registry, without the network, and
// the heap holds nothing of the image between iterations.
//
// Besides ns/op and B/op (all that is allocated per extraction) it reports
// peak-heap-MB, the largest heap (live objects and garbage not yet
// collected) seen by a sampler every 200µs during the run, next to
// idle-heap-MB, the heap after a GC before the run: both B/op and the peak
// stay below the 5 MB of one layer, let alone the 50 MB of the image, which
// shows that layers are streamed, not held whole.
func BenchmarkExtractCRDsFromImage50MB(b *testing.B) {
	const layers, fillerPerLayer, fileSize = 10, 5 << 20, 1 << 20
	var adds []v1.Layer
	var total int
	dir := b.TempDir()
	for i := range layers {
		entries := []entry{file(fmt.Sprintf("crds/layer%d.yaml", i), crdYAML(fmt.Sprintf("layer%ds", i), "example.com", "1.0.0"))}
		if i == 0 {
			entries = append(entries, file("crds/olds.yaml", crdYAML("olds", "example.com", "1.0.0")))
		}
		if i == 5 {
			entries = append(entries, file("crds/.wh.olds.yaml", ""))
		}
		for j := range fillerPerLayer / fileSize {
			filler := make([]byte, fileSize)
			if _, err := rand.Read(filler); err != nil {
				b.Fatal(err)
			}
			entries = append(entries, entry{Name: fmt.Sprintf("usr/lib/layer%d/blob%d", i, j), Body: string(filler)})
		}
		compressed := testregistry.Gzip(b, tarBytes(b, entries...))
		total += len(compressed)
		name := filepath.Join(dir, fmt.Sprintf("layer%d.tar.gz", i))
		if err := os.WriteFile(name, compressed, 0o644); err != nil {
			b.Fatal(err)
		}
		layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
			return os.Open(name)
		}, tarball.WithMediaType(types.OCILayer))
		if err != nil {
			b.Fatal(err)
		}
		adds = append(adds, layer)
	}
	img := testregistry.ImageOf(b, adds...)
	// Compute the digests once, outside the timer.
	if _, err := img.Digest(); err != nil {
		b.Fatal(err)
	}
	src := Source{ImagePath: "/crds"}
	b.Logf("image: %d layers, %.1f MB compressed", layers, float64(total)/1e6)

	runtime.GC()
	idle := heapObjectBytes()
	sampler := startHeapSampler(200 * time.Microsecond)
	b.SetBytes(int64(total))
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		bundle, err := Extract(b.Context(), img, src, Options{})
		if err != nil {
			b.Fatal(err)
		}
		if len(bundle.CRDs) != layers {
			b.Fatalf("got %d CRDs, want %d", len(bundle.CRDs), layers)
		}
	}
	b.StopTimer()
	peak := sampler.stop()
	b.ReportMetric(float64(idle)/(1<<20), "idle-heap-MB")
	b.ReportMetric(float64(peak)/(1<<20), "peak-heap-MB")
}

// heapObjectBytes returns the bytes of live and not yet swept heap
// objects, read without stopping the world.
func heapObjectBytes() uint64 {
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// heapSampler records the largest heapObjectBytes seen.
type heapSampler struct {
	done chan struct{}
	wg   sync.WaitGroup
	peak uint64
}

func startHeapSampler(every time.Duration) *heapSampler {
	s := &heapSampler{done: make(chan struct{})}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		tick := time.NewTicker(every)
		defer tick.Stop()
		for {
			s.peak = max(s.peak, heapObjectBytes())
			select {
			case <-s.done:
				return
			case <-tick.C:
			}
		}
	}()
	return s
}

func (s *heapSampler) stop() uint64 {
	close(s.done)
	s.wg.Wait()
	return s.peak
}
