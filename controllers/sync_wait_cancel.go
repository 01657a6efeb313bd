package controllers

import (
	"context"
	"sync"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// healthWaits lets a new revision, a reconcile request or a spec change
// cancel the health wait of a Sync's run in progress, as
// kustomize-controller's CancelHealthCheckOnRequeue does: a Sync stuck
// waiting on a broken revision takes the fix at once.
type healthWaits struct {
	mu      sync.Mutex
	cancels map[types.NamespacedName]context.CancelFunc
}

// start registers the run of the Sync key and returns the context that
// cancel ends, and the func that unregisters the run when it ends.
func (w *healthWaits) start(key types.NamespacedName) (context.Context, func()) {
	ctx, cancel := context.WithCancel(context.Background())
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.cancels == nil {
		w.cancels = map[types.NamespacedName]context.CancelFunc{}
	}
	w.cancels[key] = cancel
	return ctx, func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		delete(w.cancels, key)
		cancel()
	}
}

// cancel ends the health wait of the run of the Sync key, if one is in
// progress.
func (w *healthWaits) cancel(key types.NamespacedName) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if cancel, ok := w.cancels[key]; ok {
		cancel()
	}
}

// cancelOnUpdate is the handler of the Sync updates that start a new run
// (a new generation, a reconcile request): it cancels the health wait of
// the run in progress. It enqueues nothing; the Sync's own watch does.
func (w *healthWaits) cancelOnUpdate() handler.EventHandler {
	return handler.Funcs{
		UpdateFunc: func(_ context.Context, e event.UpdateEvent, _ workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			w.cancel(client.ObjectKeyFromObject(e.ObjectNew))
		},
	}
}

// cancelAndEnqueue is the handler of the commits pushed to a Sync's
// branch: it cancels the health wait of the run in progress and enqueues
// the Sync.
func (w *healthWaits) cancelAndEnqueue() handler.EventHandler {
	return handler.Funcs{
		GenericFunc: func(_ context.Context, e event.GenericEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			key := client.ObjectKeyFromObject(e.Object)
			w.cancel(key)
			q.Add(reconcile.Request{NamespacedName: key})
		},
	}
}
