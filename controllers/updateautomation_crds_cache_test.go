package controllers

import (
	"bytes"
	"fmt"
	"sync"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/uprev-dev/uprev/internal/crds"
)

// TestCRDBundleCacheIsBounded: the bundles kept between runs are at most
// maxCachedCRDBundles, the least recently used dropped first; a bundle
// over maxCachedCRDBundleBytes is not kept; a slot is read back only for
// the artifact it was read from; forget drops an automation's slots.
func TestCRDBundleCacheIsBounded(t *testing.T) {
	g := NewWithT(t)
	c, err := newCRDBundleCache()
	g.Expect(err).NotTo(HaveOccurred())
	small := &crds.Bundle{CRDs: []crds.CRD{{Name: "agents.example.com", Manifest: []byte("kind: CustomResourceDefinition\n")}}}
	for i := range maxCachedCRDBundles + 8 {
		c.keep(fmt.Sprintf("UpdateAutomation/ns/a%02d crds[0]", i), "img@sha256:1", small)
	}
	slots, err := c.lru.ListKeys()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(slots).To(HaveLen(maxCachedCRDBundles))
	_, ok := c.get("UpdateAutomation/ns/a00 crds[0]", "img@sha256:1")
	g.Expect(ok).To(BeFalse(), "the least recently used was dropped")
	b, ok := c.get(fmt.Sprintf("UpdateAutomation/ns/a%02d crds[0]", maxCachedCRDBundles+7), "img@sha256:1")
	g.Expect(ok).To(BeTrue())
	g.Expect(b).To(BeIdenticalTo(small))
	_, ok = c.get(fmt.Sprintf("UpdateAutomation/ns/a%02d crds[0]", maxCachedCRDBundles+7), "img@sha256:2")
	g.Expect(ok).To(BeFalse(), "another artifact")

	large := &crds.Bundle{CRDs: []crds.CRD{{Name: "huge.example.com", Manifest: bytes.Repeat([]byte("x"), maxCachedCRDBundleBytes+1)}}}
	slot := fmt.Sprintf("UpdateAutomation/ns/a%02d crds[0]", maxCachedCRDBundles+7)
	c.keep(slot, "img@sha256:3", large)
	_, ok = c.get(slot, "img@sha256:3")
	g.Expect(ok).To(BeFalse(), "a bundle over the size bound is not kept")
	_, ok = c.get(slot, "img@sha256:1")
	g.Expect(ok).To(BeFalse(), "nor the slot's previous one")

	c.keep("UpdateAutomation/ns/b crds[0]", "img@sha256:1", small)
	c.forget("UpdateAutomation/ns/b crds[")
	_, ok = c.get("UpdateAutomation/ns/b crds[0]", "img@sha256:1")
	g.Expect(ok).To(BeFalse(), "forgotten")
}

// TestCRDBundleCacheIsSafeForConcurrentRuns: automations run side by
// side, each keeping its bundles while another is deleted and forgotten;
// the race detector finds no unguarded access (fluxcd/pkg/cache's
// ListKeys reads the map's size before taking its lock).
func TestCRDBundleCacheIsSafeForConcurrentRuns(t *testing.T) {
	g := NewWithT(t)
	c, err := newCRDBundleCache()
	g.Expect(err).NotTo(HaveOccurred())
	small := &crds.Bundle{CRDs: []crds.CRD{{Name: "agents.example.com", Manifest: []byte("kind: CustomResourceDefinition\n")}}}
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := range 200 {
				slot := fmt.Sprintf("UpdateAutomation/ns/a%d crds[%d]", w, i%4)
				if w%2 == 0 {
					c.keep(slot, "img@sha256:1", small)
					c.get(slot, "img@sha256:1")
				} else {
					c.forget(fmt.Sprintf("UpdateAutomation/ns/a%d ", w-1))
				}
			}
		})
	}
	wg.Wait()
}
