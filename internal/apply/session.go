package apply

import (
	"errors"
	"fmt"

	"github.com/fluxcd/cli-utils/pkg/kstatus/polling"
	"github.com/fluxcd/pkg/ssa"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
)

// identity is what an Applier keeps per user it acts as: the versions it
// verified, and, while Applies or Deletes run as that user, their clients.
type identity struct {
	versions *versionCache

	// The fields below are guarded by the Applier's mutex.
	rm      *ssa.ResourceManager
	mapping *mapping
	users   int
}

// session returns the resource manager and remembered versions of the
// user that opts impersonate (or of the config's own user), making the
// clients if no Apply or Delete holds them, and a func that gives them
// back: once the last user gives them back they are dropped, and the
// Applier keeps only its remembered versions. Versions are kept per user:
// what one user verified says nothing of what another may read or write.
func (a *Applier) session(opts Options) (*identity, func(), error) {
	var user string
	if opts.ServiceAccount != "" {
		if opts.ServiceAccountNamespace == "" {
			return nil, nil, errors.New("impersonating service account " + opts.ServiceAccount + ": no namespace given")
		}
		user = "system:serviceaccount:" + opts.ServiceAccountNamespace + ":" + opts.ServiceAccount
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	ident, ok := a.identities[user]
	if !ok {
		ident = &identity{versions: newVersionCache(&a.shared.remembered)}
		a.identities[user] = ident
	}
	if ident.rm == nil {
		rm, m, err := a.connect(user)
		if err != nil {
			return nil, nil, err
		}
		ident.rm, ident.mapping = rm, m
		a.shared.sessions.Add(1)
	}
	ident.users++
	return ident, func() { a.release(ident) }, nil
}

// release gives back the clients of ident that session handed out.
func (a *Applier) release(ident *identity) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if ident.users--; ident.users > 0 {
		return
	}
	a.shared.releaseMapping(ident.mapping)
	ident.rm, ident.mapping = nil, nil
	a.shared.sessions.Add(-1)
}

// connect makes the clients of user (the config's own when empty), over
// the shared REST mapping of the Applier's API server.
func (a *Applier) connect(user string) (*ssa.ResourceManager, *mapping, error) {
	cfg := rest.CopyConfig(a.config)
	if user != "" {
		cfg.Impersonate = rest.ImpersonationConfig{UserName: user}
	}
	httpClient, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, nil, fmt.Errorf("creating HTTP client: %w", err)
	}
	disco, err := discovery.NewDiscoveryClientForConfigAndClient(cfg, httpClient)
	if err != nil {
		return nil, nil, fmt.Errorf("creating discovery client: %w", err)
	}
	m := a.shared.acquireMapping(a.mappingKey)
	mapper := &clusterMapper{mapping: m, disco: disco}
	c, err := client.NewWithWatch(cfg, client.Options{HTTPClient: httpClient, Mapper: mapper})
	if err != nil {
		a.shared.releaseMapping(m)
		return nil, nil, fmt.Errorf("creating client: %w", err)
	}
	poller := polling.NewStatusPoller(c, mapper, polling.Options{})
	recording := interceptor.NewClient(c, interceptor.Funcs{Patch: recordApply})
	rm := ssa.NewResourceManager(recording, poller, ssa.Owner{Field: FieldManager, Group: ownerGroup})
	rm.SetConcurrency(concurrency)
	return rm, m, nil
}
