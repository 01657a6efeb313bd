package update

import (
	"crypto/sha256"
	"fmt"
	"sync"
	"testing"

	. "github.com/onsi/gomega"
)

// TestScanCacheIsScanMarkers shows that a cached scan is the scan of the
// same bytes, for the namespace it was read with, errors included; that
// the cache forgets its oldest contents past its bound; and that runs may
// share it.
func TestScanCacheIsScanMarkers(t *testing.T) {
	g := NewWithT(t)
	marked := func(tag string) []byte {
		return []byte(fmt.Sprintf("kind: Deployment\nmetadata:\n  name: app\nspec:\n  image: ghcr.io/acme/app:%s # {\"$imagepolicy\": \"agent\"}\n", tag))
	}
	broken := []byte("a: [\nimage: x # {\"$imagepolicy\": \"apps:agent\"}\n")
	c := NewScanCache(2)
	for _, tc := range []struct {
		src []byte
		ns  string
	}{{marked("1.0.0"), "apps"}, {marked("1.0.0"), "apps"}, {marked("1.0.0"), ""}, {broken, "apps"}, {broken, "apps"}} {
		wantSites, wantErrs := scanMarkers(tc.src, tc.ns)
		sites, errs := c.scan(tc.src, tc.ns)
		g.Expect(sites).To(Equal(wantSites))
		g.Expect(errs).To(Equal(wantErrs))
	}
	g.Expect(c.entries).To(HaveLen(2), "bounded")
	g.Expect(c.entries).To(HaveKey(scanKey{sum: sha256Of(broken), namespace: "apps"}), "the newest kept")
	g.Expect(c.entries).NotTo(HaveKey(scanKey{sum: sha256Of(marked("1.0.0")), namespace: "apps"}), "the oldest forgotten")

	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			for j := range 50 {
				sites, _ := c.scan(marked(fmt.Sprintf("1.%d.%d", i, j%5)), "apps")
				if len(sites) != 1 || sites[0].value != fmt.Sprintf("ghcr.io/acme/app:1.%d.%d", i, j%5) {
					t.Errorf("scan %d/%d: %+v", i, j, sites)
				}
			}
		})
	}
	wg.Wait()
	var nilCache *ScanCache
	sites, _ := nilCache.scan(marked("2.0.0"), "apps")
	g.Expect(sites).To(HaveLen(1), "the nil cache scans")
}

// sha256Of is the key sum of src.
func sha256Of(src []byte) [sha256.Size]byte { return sha256.Sum256(src) }
