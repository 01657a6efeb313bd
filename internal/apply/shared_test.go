package apply

import (
	"context"
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clocktesting "k8s.io/utils/clock/testing"
)

// userApplier returns an Applier of shared to testCluster that acts as a
// user of its own (a client certificate in system:masters), and a count of
// the discovery requests it sends.
func userApplier(t *testing.T, shared *Shared, user string) (*Applier, *atomic.Int64) {
	t.Helper()
	g := NewWithT(t)
	kc, err := testCluster.KubeConfigAs(user, "system:masters")
	g.Expect(err).NotTo(HaveOccurred())
	cfg, err := clientcmd.RESTConfigFromKubeConfig(kc)
	g.Expect(err).NotTo(HaveOccurred())
	discoveries := &atomic.Int64{}
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(r *http.Request) (*http.Response, error) {
			if isDiscovery(r) {
				discoveries.Add(1)
			}
			return rt.RoundTrip(r)
		})
	}
	a, err := shared.NewApplier(cfg)
	g.Expect(err).NotTo(HaveOccurred())
	return a, discoveries
}

// configMaps returns n ConfigMaps in ns.
func configMaps(t *testing.T, ns string, n int) []*unstructured.Unstructured {
	t.Helper()
	files := map[string]string{}
	for i := range n {
		files[fmt.Sprintf("cm-%d.yaml", i)] = fmt.Sprintf(configMapYAML, fmt.Sprintf("cm-%d", i), ns, "v")
	}
	return manifests(t, files)
}

// TestTargetsOfOtherCredentialsShareOneMapping: two targets on one API
// server with credentials of their own (two users) share one REST mapping:
// the first loads it with two discovery requests (aggregated discovery),
// the second sends none. Each Applier holds its clients only while it
// applies.
func TestTargetsOfOtherCredentialsShareOneMapping(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	shared := NewShared(nil)
	first, firstDiscoveries := userApplier(t, shared, uniqueName("fleet-a"))
	second, secondDiscoveries := userApplier(t, shared, uniqueName("fleet-b"))
	ns := newNamespace(t)

	var during int
	opts := Options{Owner: testOwner, BeforeWrite: func(context.Context, []Entry) error {
		during = shared.Sessions()
		return nil
	}}
	_, err := first.Apply(ctx, configMaps(t, ns, 3), nil, opts)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(during).To(Equal(1), "the Applier holds its clients while it applies")
	g.Expect(firstDiscoveries.Load()).To(BeEquivalentTo(2), "/api and /apis, aggregated")
	g.Expect(shared.Sessions()).To(BeZero(), "and drops them once done")

	result, err := second.Apply(ctx, configMaps(t, ns, 4), nil, opts)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(result.Created()).To(HaveLen(1))
	g.Expect(secondDiscoveries.Load()).To(BeZero(), "the second user's Applier uses the mapping the first loaded")
	g.Expect(shared.Mappings()).To(Equal(1))
	g.Expect(shared.Sessions()).To(BeZero())
}

// TestSharedMappingFindsKindsOfCRDsTheSetApplies: a mapping loaded before
// a CRD existed finds the CRD's kind once a set applies it, for the
// Applier that applied it and for another user's Applier that shares the
// mapping.
func TestSharedMappingFindsKindsOfCRDsTheSetApplies(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	shared := NewShared(nil)
	first, _ := userApplier(t, shared, uniqueName("fleet-a"))
	second, secondDiscoveries := userApplier(t, shared, uniqueName("fleet-b"))
	ns := newNamespace(t)
	_, err := first.Apply(ctx, configMaps(t, ns, 1), nil, Options{Owner: testOwner})
	g.Expect(err).NotTo(HaveOccurred())

	group := uniqueName("w") + ".uprev.test"
	withCRD := manifests(t, map[string]string{
		"crd.yaml":     fmt.Sprintf(crdYAML, group),
		"widgets.yaml": fmt.Sprintf(widgetYAML, group, "small", ns, 1),
	})
	result, err := first.Apply(ctx, withCRD, nil, Options{Owner: testOwner})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(result.Created()).To(ContainElement(id(ns, "small", group, "Widget")))

	before := secondDiscoveries.Load()
	widget := manifests(t, map[string]string{"widgets.yaml": fmt.Sprintf(widgetYAML, group, "large", ns, 9)})
	result, err = second.Apply(ctx, widget, nil, Options{Owner: testOwner})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(result.Created()).To(ConsistOf(id(ns, "large", group, "Widget")))
	g.Expect(secondDiscoveries.Load()).To(Equal(before), "the kind the first Applier learned serves the second")
	g.Expect(shared.Mappings()).To(Equal(1))
}

// TestMappingIsRebuiltWhenOld: a mapping older than mappingFreshFor is
// loaded again from discovery at its next use, two requests.
func TestMappingIsRebuiltWhenOld(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	clk := clocktesting.NewFakePassiveClock(time.Now())
	shared := NewShared(clk)
	a, discoveries := userApplier(t, shared, uniqueName("fleet"))
	ns := newNamespace(t)
	set := configMaps(t, ns, 2)
	_, err := a.Apply(ctx, set, nil, Options{Owner: testOwner})
	g.Expect(err).NotTo(HaveOccurred())
	_, err = a.Apply(ctx, set, nil, Options{Owner: testOwner})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(discoveries.Load()).To(BeEquivalentTo(2), "a fresh mapping serves again")

	clk.SetTime(clk.Now().Add(mappingFreshFor))
	_, err = a.Apply(ctx, set, nil, Options{Owner: testOwner})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(discoveries.Load()).To(BeEquivalentTo(4))
}

// TestIdleMappingsAreBounded: past maxIdleMappings API servers no Apply
// uses, the least recently used mappings are dropped.
func TestIdleMappingsAreBounded(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	shared := NewShared(nil)
	ns := newNamespace(t)
	set := configMaps(t, ns, 1)
	for i := range maxIdleMappings + 3 {
		// Unreachable API servers, each a mapping of its own.
		a, err := shared.NewApplier(&rest.Config{Host: fmt.Sprintf("https://127.0.0.1:%d", i+1)})
		g.Expect(err).NotTo(HaveOccurred())
		_, err = a.Apply(ctx, set, nil, Options{Owner: testOwner})
		var unreachable *UnreachableError
		g.Expect(err).To(BeAssignableToTypeOf(unreachable))
	}
	g.Expect(shared.Mappings()).To(Equal(maxIdleMappings))
	g.Expect(shared.Sessions()).To(BeZero())
}

// TestClosedApplierGivesBackItsRememberedVersions: the versions an
// Applier remembers count against its Shared's bound until it is closed.
func TestClosedApplierGivesBackItsRememberedVersions(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	shared := NewShared(nil)
	a, _ := userApplier(t, shared, uniqueName("fleet"))
	ns := newNamespace(t)
	_, err := a.Apply(ctx, configMaps(t, ns, 5), nil, Options{Owner: testOwner})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(shared.Remembered()).To(Equal(5))
	a.Close()
	g.Expect(shared.Remembered()).To(BeZero())
}

// TestUnverifiedConnectionsDoNotShareAMapping: Appliers whose kubeconfig
// turns TLS verification off (insecure-skip-tls-verify) cannot tell which
// server answered their discovery, so each keeps a mapping of its own and
// none serves another Applier of the same URL.
func TestUnverifiedConnectionsDoNotShareAMapping(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	shared := NewShared(nil)
	ns := newNamespace(t)
	for range 2 {
		cfg := rest.CopyConfig(testCluster.Config)
		cfg.Insecure, cfg.CAData, cfg.CAFile = true, nil, ""
		a, err := shared.NewApplier(cfg)
		g.Expect(err).NotTo(HaveOccurred())
		_, err = a.Apply(ctx, configMaps(t, ns, 1), nil, Options{Owner: testOwner})
		g.Expect(err).NotTo(HaveOccurred())
	}
	g.Expect(shared.Mappings()).To(Equal(2))
}
