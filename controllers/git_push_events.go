package controllers

import (
	"context"
	"fmt"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"

	uprevv1 "github.com/uprev-dev/uprev/api/v1alpha1"
	"github.com/uprev-dev/uprev/internal/gitrepo"
)

// syncRepositoryIndex indexes Syncs by the gitrepo.RepoKey of their
// spec.git.url.
const syncRepositoryIndex = ".spec.git.repository"

// gitPushEvents tells the Sync controller about commits this manager
// pushed, so that Syncs of that repository and branch apply them at once
// instead of at their next interval.
type gitPushEvents struct {
	client client.Reader
	events chan event.GenericEvent
}

// newGitPushEvents returns a notifier reading Syncs with the manager's
// client, and indexes Syncs by repository for it.
func newGitPushEvents(ctx context.Context, mgr ctrl.Manager) (*gitPushEvents, error) {
	err := mgr.GetFieldIndexer().IndexField(ctx, &uprevv1.Sync{}, syncRepositoryIndex, func(obj client.Object) []string {
		return []string{gitrepo.RepoKey(obj.(*uprevv1.Sync).Spec.Git.URL)}
	})
	if err != nil {
		return nil, fmt.Errorf("indexing syncs by repository: %w", err)
	}
	return &gitPushEvents{client: mgr.GetClient(), events: make(chan event.GenericEvent, 64)}, nil
}

// pushed enqueues every Sync that reads branch of the repository at url,
// however its URL is spelled (see gitrepo.RepoKey).
func (p *gitPushEvents) pushed(ctx context.Context, url, branch string) {
	if p == nil {
		return
	}
	var syncs uprevv1.SyncList
	if err := p.client.List(ctx, &syncs, client.MatchingFields{syncRepositoryIndex: gitrepo.RepoKey(url)}); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Listing Syncs to notify of a push")
		return
	}
	for i := range syncs.Items {
		s := &syncs.Items[i]
		if s.Spec.Git.Ref.ReadsPush("refs/heads/" + branch) {
			select {
			case p.events <- event.GenericEvent{Object: s}:
			case <-ctx.Done():
				return
			}
		}
	}
}
