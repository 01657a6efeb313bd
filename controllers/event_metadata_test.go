package controllers

import (
	"encoding/json"
	"net/http"
	"sync"
	"testing"

	eventv1 "github.com/fluxcd/pkg/apis/event/v1beta1"
	"github.com/fluxcd/pkg/apis/meta"
	. "github.com/onsi/gomega"
	"github.com/onsi/gomega/gstruct"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/uprev-dev/uprev/internal/testenv/gitserver"
)

// notificationController stands in for Flux's notification-controller: its
// event receiver, which the suite's manager posts every event to. It
// decodes each payload as notification-controller does.
var notificationController = &eventReceiver{}

// eventReceiver keeps the events posted to it.
type eventReceiver struct {
	mu     sync.Mutex
	events []eventv1.Event
}

// receive accepts one event, as notification-controller's POST / does.
func (r *eventReceiver) receive(w http.ResponseWriter, req *http.Request) {
	var e eventv1.Event
	if req.Method != http.MethodPost || req.Header.Get("Content-Type") != "application/json" {
		http.Error(w, "want a JSON POST", http.StatusBadRequest)
		return
	}
	if err := json.NewDecoder(req.Body).Decode(&e); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	r.mu.Lock()
	r.events = append(r.events, e)
	r.mu.Unlock()
	w.WriteHeader(http.StatusAccepted)
}

// about returns the events received about obj of kind.
func (r *eventReceiver) about(kind string, obj client.Object) []eventv1.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []eventv1.Event
	for _, e := range r.events {
		if e.InvolvedObject.Kind == kind && e.InvolvedObject.Namespace == obj.GetNamespace() && e.InvolvedObject.Name == obj.GetName() {
			out = append(out, e)
		}
	}
	return out
}

func TestEventsReachNotificationController(t *testing.T) {
	g := NewWithT(t)
	f, auto := settledAgentAutomation(t)
	f.pushTag("1.1.0")
	sha := waitForPush(t, auto, "")

	g.Eventually(func() []eventv1.Event { return notificationController.about("UpdateAutomation", auto) }).Should(ContainElement(gstruct.MatchFields(gstruct.IgnoreExtras, gstruct.Fields{
		"Reason":              Equal("Pushed"),
		"Severity":            Equal(eventv1.EventSeverityInfo),
		"Message":             Equal("Pushed commit " + sha[:10] + " to main: Update agent to 1.1.0"),
		"ReportingController": Equal("uprev"),
		"Metadata": Equal(map[string]string{
			"uprev.dev/commit":   sha,
			"uprev.dev/revision": "main@sha1:" + sha,
		}),
	})), "the push, with its commit, as Flux's Git commit status providers read it")
	got := notificationController.about("UpdateAutomation", auto)[0]
	g.Expect(got.InvolvedObject.APIVersion).To(Equal("uprev.dev/v1alpha1"))

	// A Sync's events carry the revision it applies.
	srv := gitserver.Start(t)
	url := srv.InitRepo(t, "fleet", "main", map[string]string{"app/config.yaml": configMap(f.ns, "settings", "v1")})
	s := newSync(t, f.ns, url, "app")
	tip := srv.Log(t, "fleet", "main")[0].SHA
	g.Eventually(func() []eventv1.Event { return notificationController.about("Sync", s) }).Should(ContainElement(gstruct.MatchFields(gstruct.IgnoreExtras, gstruct.Fields{
		"Reason":   Equal(meta.SucceededReason),
		"Severity": Equal(eventv1.EventSeverityInfo),
		"Metadata": Equal(map[string]string{"uprev.dev/revision": "main@sha1:" + tip}),
	})))
}
