package apply

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/restmapper"
	"k8s.io/utils/clock"
)

// mapping is the REST mapping of one API server, shared by the Appliers
// that reach it (see Shared). It is loaded lazily, through the discovery
// client of whichever Applier first needs it.
type mapping struct {
	key   string
	clock clock.PassiveClock
	// users and lastUsed are guarded by the Shared's mutex.
	users    int
	lastUsed time.Time

	// mu serializes loads, so that Appliers that miss one kind at once
	// cause one discovery, not one each.
	mu    sync.Mutex
	state atomic.Pointer[mappingState]
}

// mappingState is one immutable snapshot of a mapping.
type mappingState struct {
	groups []*restmapper.APIGroupResources
	mapper meta.RESTMapper
	loaded time.Time
}

// current returns the mapping's snapshot, loading it through disco when
// there is none or it is older than mappingFreshFor.
func (m *mapping) current(disco discovery.DiscoveryInterface) (*mappingState, error) {
	if st := m.state.Load(); st != nil && m.clock.Since(st.loaded) < mappingFreshFor {
		return st, nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if st := m.state.Load(); st != nil && m.clock.Since(st.loaded) < mappingFreshFor {
		return st, nil
	}
	return m.loadLocked(disco)
}

// loadLocked rebuilds the mapping from the whole discovery document: two
// requests (/api and /apis) where the API server serves aggregated
// discovery. Groups whose discovery failed (an aggregated API that is
// down) are left out until asked for. The caller holds mu.
func (m *mapping) loadLocked(disco discovery.DiscoveryInterface) (*mappingState, error) {
	groups, err := restmapper.GetAPIGroupResources(disco)
	if err != nil {
		return nil, fmt.Errorf("discovering the API server's kinds: %w", err)
	}
	return m.storeLocked(groups), nil
}

// storeLocked makes groups the mapping's snapshot. The caller holds mu.
func (m *mapping) storeLocked(groups []*restmapper.APIGroupResources) *mappingState {
	st := &mappingState{groups: groups, mapper: restmapper.NewDiscoveryRESTMapper(groups), loaded: m.clock.Now()}
	m.state.Store(st)
	return st
}

// learn makes the mapping know what found asks for, if the API server
// serves it: the given versions of group are read from discovery (one
// request each) and added, or without versions the whole mapping is
// reloaded. A snapshot another Applier loaded meanwhile that satisfies
// found is returned as it is.
func (m *mapping) learn(disco discovery.DiscoveryInterface, group string, versions []string, found func(meta.RESTMapper) bool) (*mappingState, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	st := m.state.Load()
	if st != nil && found(st.mapper) {
		return st, nil
	}
	if len(versions) == 1 && versions[0] == "" {
		versions = nil
	}
	if st == nil || len(versions) == 0 {
		return m.loadLocked(disco)
	}
	groups := st.groups
	for _, version := range versions {
		gv := schema.GroupVersion{Group: group, Version: version}
		list, err := disco.ServerResourcesForGroupVersion(gv.String())
		switch {
		case apierrors.IsNotFound(err):
			continue
		case err != nil:
			return nil, fmt.Errorf("discovering %s: %w", gv, err)
		}
		groups = withVersion(groups, gv, list.APIResources)
	}
	return m.storeLocked(groups), nil
}

// withVersion returns groups with the resources of gv added, leaving
// groups as it was.
func withVersion(groups []*restmapper.APIGroupResources, gv schema.GroupVersion, resources []metav1.APIResource) []*restmapper.APIGroupResources {
	out := make([]*restmapper.APIGroupResources, 0, len(groups)+1)
	var found bool
	for _, g := range groups {
		if g.Group.Name != gv.Group {
			out = append(out, g)
			continue
		}
		found = true
		c := &restmapper.APIGroupResources{Group: g.Group, VersionedResources: make(map[string][]metav1.APIResource, len(g.VersionedResources)+1)}
		for v, r := range g.VersionedResources {
			c.VersionedResources[v] = r
		}
		if _, ok := c.VersionedResources[gv.Version]; !ok {
			c.Group.Versions = append(append([]metav1.GroupVersionForDiscovery(nil), g.Group.Versions...), metav1.GroupVersionForDiscovery{GroupVersion: gv.String(), Version: gv.Version})
		}
		c.VersionedResources[gv.Version] = resources
		out = append(out, c)
	}
	if !found {
		version := metav1.GroupVersionForDiscovery{GroupVersion: gv.String(), Version: gv.Version}
		out = append(out, &restmapper.APIGroupResources{
			Group:              metav1.APIGroup{Name: gv.Group, Versions: []metav1.GroupVersionForDiscovery{version}, PreferredVersion: version},
			VersionedResources: map[string][]metav1.APIResource{gv.Version: resources},
		})
	}
	return out
}

// clusterMapper is the meta.RESTMapper of one Applier's clients: a view of
// its API server's shared mapping that loads what it lacks through the
// Applier's own discovery client.
type clusterMapper struct {
	mapping *mapping
	disco   discovery.DiscoveryInterface
}

var _ meta.RESTMapper = (*clusterMapper)(nil)

// lookup answers f from the shared mapping; a kind or resource it does not
// know is looked up in discovery (learn) and f asked again.
func lookup[T any](c *clusterMapper, group string, versions []string, f func(meta.RESTMapper) (T, error)) (T, error) {
	var zero T
	st, err := c.mapping.current(c.disco)
	if err != nil {
		return zero, err
	}
	res, err := f(st.mapper)
	if !meta.IsNoMatchError(err) {
		return res, err
	}
	st, err = c.mapping.learn(c.disco, group, versions, func(m meta.RESTMapper) bool {
		_, err := f(m)
		return !meta.IsNoMatchError(err)
	})
	if err != nil {
		return zero, err
	}
	return f(st.mapper)
}

// KindFor implements meta.RESTMapper.
func (c *clusterMapper) KindFor(resource schema.GroupVersionResource) (schema.GroupVersionKind, error) {
	return lookup(c, resource.Group, []string{resource.Version}, func(m meta.RESTMapper) (schema.GroupVersionKind, error) { return m.KindFor(resource) })
}

// KindsFor implements meta.RESTMapper.
func (c *clusterMapper) KindsFor(resource schema.GroupVersionResource) ([]schema.GroupVersionKind, error) {
	return lookup(c, resource.Group, []string{resource.Version}, func(m meta.RESTMapper) ([]schema.GroupVersionKind, error) { return m.KindsFor(resource) })
}

// ResourceFor implements meta.RESTMapper.
func (c *clusterMapper) ResourceFor(input schema.GroupVersionResource) (schema.GroupVersionResource, error) {
	return lookup(c, input.Group, []string{input.Version}, func(m meta.RESTMapper) (schema.GroupVersionResource, error) { return m.ResourceFor(input) })
}

// ResourcesFor implements meta.RESTMapper.
func (c *clusterMapper) ResourcesFor(input schema.GroupVersionResource) ([]schema.GroupVersionResource, error) {
	return lookup(c, input.Group, []string{input.Version}, func(m meta.RESTMapper) ([]schema.GroupVersionResource, error) { return m.ResourcesFor(input) })
}

// RESTMapping implements meta.RESTMapper.
func (c *clusterMapper) RESTMapping(gk schema.GroupKind, versions ...string) (*meta.RESTMapping, error) {
	return lookup(c, gk.Group, versions, func(m meta.RESTMapper) (*meta.RESTMapping, error) { return m.RESTMapping(gk, versions...) })
}

// RESTMappings implements meta.RESTMapper.
func (c *clusterMapper) RESTMappings(gk schema.GroupKind, versions ...string) ([]*meta.RESTMapping, error) {
	return lookup(c, gk.Group, versions, func(m meta.RESTMapper) ([]*meta.RESTMapping, error) { return m.RESTMappings(gk, versions...) })
}

// ResourceSingularizer implements meta.RESTMapper.
func (c *clusterMapper) ResourceSingularizer(resource string) (string, error) {
	st, err := c.mapping.current(c.disco)
	if err != nil {
		return "", err
	}
	return st.mapper.ResourceSingularizer(resource)
}
