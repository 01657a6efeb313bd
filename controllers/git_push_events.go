package controllers

import (
	"context"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"

	uprevv1 "github.com/uprev-dev/uprev/api/v1alpha1"
)

// gitPushEvents tells the Sync controller about commits this manager
// pushed, so that Syncs of that repository and branch apply them at once
// instead of at their next interval.
type gitPushEvents struct {
	client client.Reader
	events chan event.GenericEvent
}

// newGitPushEvents returns a notifier reading Syncs with c.
func newGitPushEvents(c client.Reader) *gitPushEvents {
	return &gitPushEvents{client: c, events: make(chan event.GenericEvent, 64)}
}

// pushed enqueues every Sync that reads branch of the repository at url.
func (p *gitPushEvents) pushed(ctx context.Context, url, branch string) {
	if p == nil {
		return
	}
	var syncs uprevv1.SyncList
	if err := p.client.List(ctx, &syncs); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Listing Syncs to notify of a push")
		return
	}
	for i := range syncs.Items {
		s := &syncs.Items[i]
		if s.Spec.Git.URL == url && s.Spec.Git.Ref.Branch == branch && s.Spec.Git.Ref.Commit == "" && s.Spec.Git.Ref.Tag == "" {
			select {
			case p.events <- event.GenericEvent{Object: s}:
			case <-ctx.Done():
				return
			}
		}
	}
}
