// Package notify forwards the events uprev records to Flux's
// notification-controller, in Flux's event format (fluxcd/pkg/runtime/events),
// so that existing Alerts and Providers (Slack, Teams, Git commit statuses)
// keep working when uprev replaces Flux's image controllers.
//
// Events are posted by one worker from a bounded queue: a slow or absent
// notification-controller never holds up a reconcile, and when the queue is
// full an event is dropped and logged, as a Kubernetes event would be
// dropped by a throttled recorder. Each event is still recorded in
// Kubernetes at once.
package notify

import (
	"context"
	"fmt"
	"maps"

	fluxevents "github.com/fluxcd/pkg/runtime/events"
	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
)

// QueueSize bounds the events waiting to be posted.
const QueueSize = 1024

// MetadataFunc returns the metadata of an event about obj with reason,
// keyed as Flux's controllers key it (`<api group>/revision`,
// `<api group>/commit`); nil for none.
type MetadataFunc func(obj runtime.Object, reason string) map[string]string

// Forwarder posts events to a notification-controller address. Start runs
// its worker; it is a controller-runtime Runnable.
type Forwarder struct {
	flux     *fluxevents.Recorder
	metadata MetadataFunc
	queue    chan post
	log      logr.Logger
}

// post is one event waiting to be posted.
type post struct {
	obj                        runtime.Object
	metadata                   map[string]string
	eventType, reason, message string
}

// New returns a Forwarder posting to address (for example
// http://notification-controller.flux-system.svc.cluster.local./) as the
// controller named controller. scheme resolves the kinds of objects.
func New(address, controller string, scheme *runtime.Scheme, metadata MetadataFunc, log logr.Logger) (*Forwarder, error) {
	// The Kubernetes events are recorded by the recorders Wrap wraps; Flux's
	// recorder only posts.
	flux, err := fluxevents.NewRecorderForScheme(scheme, discard{}, log, address, controller)
	if err != nil {
		return nil, fmt.Errorf("--events-addr %q: %w", address, err)
	}
	return &Forwarder{flux: flux, metadata: metadata, queue: make(chan post, QueueSize), log: log}, nil
}

// Start posts queued events until ctx is done.
func (f *Forwarder) Start(ctx context.Context) error {
	for {
		select {
		case <-ctx.Done():
			return nil
		case p := <-f.queue:
			f.flux.AnnotatedEventf(p.obj, p.metadata, p.eventType, p.reason, "%s", p.message)
		}
	}
}

// Wrap returns a recorder that records with r and also posts every event
// to notification-controller.
func (f *Forwarder) Wrap(r events.EventRecorder) events.EventRecorder {
	return &recorder{EventRecorder: r, forwarder: f}
}

// enqueue queues an event about obj, a copy taken now.
func (f *Forwarder) enqueue(obj runtime.Object, eventType, reason, message string) {
	p := post{obj: obj.DeepCopyObject(), eventType: eventType, reason: reason, message: message}
	if f.metadata != nil {
		p.metadata = maps.Clone(f.metadata(obj, reason))
	}
	select {
	case f.queue <- p:
	default:
		f.log.Info("Dropped an event for notification-controller: the queue is full", "reason", reason)
	}
}

// recorder records events in Kubernetes and forwards them.
type recorder struct {
	events.EventRecorder
	forwarder *Forwarder
}

// Eventf records the event and queues it for notification-controller.
func (r *recorder) Eventf(regarding, related runtime.Object, eventType, reason, action, note string, args ...any) {
	r.EventRecorder.Eventf(regarding, related, eventType, reason, action, note, args...)
	r.forwarder.enqueue(regarding, eventType, reason, fmt.Sprintf(note, args...))
}

// discard is a Kubernetes event recorder (the older interface Flux's
// recorder takes) that records nothing.
type discard struct{}

func (discard) Event(runtime.Object, string, string, string)          {}
func (discard) Eventf(runtime.Object, string, string, string, ...any) {}
func (discard) AnnotatedEventf(runtime.Object, map[string]string, string, string, string, ...any) {
}
