package install

import (
	"context"
	"fmt"
	"time"

	"github.com/fluxcd/cli-utils/pkg/kstatus/polling"
	"github.com/fluxcd/cli-utils/pkg/object"
	"github.com/fluxcd/pkg/ssa"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/flowcontrol"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ownerGroup is the group ssa names uprev's field ownership with.
const ownerGroup = "uprev.dev"

// ApplyOptions say how Apply waits.
type ApplyOptions struct {
	// Timeout bounds the wait for the CRDs to be established and, with
	// Wait, for the whole install to be ready.
	Timeout time.Duration
	// Interval is how often the objects' status is polled while waiting.
	Interval time.Duration
}

// Applier applies an install to one cluster with server-side apply, as
// FieldManager.
type Applier struct {
	rm *ssa.ResourceManager
}

// NewApplier returns an Applier of the cluster cfg reaches.
func NewApplier(cfg *rest.Config) (*Applier, error) {
	cfg = rest.CopyConfig(cfg)
	// One install is some thirty requests and a poll every few seconds:
	// nothing to pace on the client's side (the API server's priority and
	// fairness guards it). A client-side rate limiter also refuses a
	// request once the wait's deadline is past but before its context is
	// done, so a wait whose last poll met its deadline failed with "rate:
	// Wait(n=1) would exceed context deadline" instead of naming what was
	// not ready.
	cfg.RateLimiter = flowcontrol.NewFakeAlwaysRateLimiter()
	c, err := client.NewWithWatch(cfg, client.Options{})
	if err != nil {
		return nil, fmt.Errorf("connecting to %s: %w", cfg.Host, err)
	}
	poller := polling.NewStatusPoller(c, c.RESTMapper(), polling.Options{})
	return &Applier{rm: ssa.NewResourceManager(c, poller, ssa.Owner{Field: FieldManager, Group: ownerGroup})}, nil
}

// Apply applies m in stages: the Namespace, CRDs and ClusterRoles first,
// waiting until the CRDs are established, then the rest. It returns what
// it changed, also when it fails half way.
func (a *Applier) Apply(ctx context.Context, m *Manifests, opts ApplyOptions) (*ssa.ChangeSet, error) {
	applyOpts := ssa.DefaultApplyOptions()
	applyOpts.WaitTimeout = opts.Timeout
	applyOpts.WaitInterval = opts.Interval
	cs, err := a.rm.ApplyAllStaged(ctx, m.Objects, applyOpts)
	if err != nil {
		return cs, fmt.Errorf("applying: %w", err)
	}
	return cs, nil
}

// Wait waits until every object of m is ready (kstatus Current: the CRDs
// established, the Deployment available), within opts.Timeout.
func (a *Applier) Wait(ctx context.Context, m *Manifests, opts ApplyOptions) error {
	set := object.UnstructuredSetToObjMetadataSet(m.Objects)
	if err := a.rm.WaitForSetWithContext(ctx, set, ssa.WaitOptions{Interval: opts.Interval, Timeout: opts.Timeout}); err != nil {
		return fmt.Errorf("waiting for the install to be ready: %w", err)
	}
	return nil
}
