package dashboard

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	iacv1 "github.com/fluxcd/image-automation-controller/api/v1"
	"github.com/fluxcd/pkg/apis/meta"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	uprevv1 "github.com/uprev-dev/uprev/api/v1alpha1"
)

// TestFluxAutomations: Flux's ImageUpdateAutomations are shown next to
// the UpdateAutomations: their last push and commits, the versions they
// last saw, and the holds the manager publishes in their annotation with
// the command that releases each, and the refused downgrades published
// there too; a hold or refused downgrade published later reaches an open
// page live.
func TestFluxAutomations(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace("flux")
	createFleet(t, ns)
	pushed := metav1.NewTime(time.Now().Add(-time.Minute))
	flux := &iacv1.ImageUpdateAutomation{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "flux-system"},
		Spec: iacv1.ImageUpdateAutomationSpec{
			SourceRef: iacv1.CrossNamespaceSourceReference{Kind: "GitRepository", Name: "flux-system"},
			Interval:  metav1.Duration{Duration: time.Hour},
		},
		Status: iacv1.ImageUpdateAutomationStatus{
			LastPushCommit: "feed000000111122223333444455556666777788", LastPushTime: &pushed,
			ObservedPolicies: iacv1.ObservedPolicies{"agent": {Name: "registry.example.com/acme/agent", Tag: "1.1.0"}},
			Conditions: []metav1.Condition{{Type: meta.ReadyCondition, Status: metav1.ConditionTrue, Reason: meta.SucceededReason,
				Message: "pushed feed000000 to main", LastTransitionTime: pushed}},
		},
	}
	createWithStatus(t, flux)
	g.Expect(k8s.Create(t.Context(), &eventsv1.Event{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "flux-system.1"},
		EventTime:  metav1.NewMicroTime(pushed.Time),
		Type:       corev1.EventTypeNormal, Reason: "Pushed", Action: "Push",
		Note:                "Pushed commit feed000000 to main: agent 1.0.0 --> 1.1.0",
		Regarding:           corev1.ObjectReference{Kind: iacv1.ImageUpdateAutomationKind, Namespace: ns, Name: "flux-system"},
		ReportingController: "uprev", ReportingInstance: "uprev-1",
	})).To(Succeed())
	ts := startServer(t, ns)

	code, page := get(t, ts, "/", "")
	g.Expect(code).To(Equal(http.StatusOK), page)
	g.Expect(page).To(ContainSubstring(`<article class="automation" data-kind="ImageUpdateAutomation" data-automation="` + ns + `/flux-system">`))
	g.Expect(page).To(ContainSubstring(`<a href="/object/ImageUpdateAutomation/` + ns + `/flux-system">ImageUpdateAutomation ` + ns + `/flux-system</a>`))
	g.Expect(page).To(ContainSubstring(`<a href="/object/Event/` + ns + `/flux-system.1">Pushed commit feed000000 to main: agent 1.0.0 --&gt; 1.1.0</a>`))
	g.Expect(page).To(ContainSubstring(`">agent: registry.example.com/acme/agent:<span class="version" title="1.1.0">1.1.0</span></a>`))
	g.Expect(page).To(ContainSubstring(`<code>uprev release-hold fleet web -n `+ns+`</code>`), "the UpdateAutomation's hold, as before")
	g.Expect(strings.Index(page, `data-automation="`+ns+`/fleet"`)).To(BeNumerically("<", strings.Index(page, `data-automation="`+ns+`/flux-system"`)), "by name")
	code, body := get(t, ts, "/object/ImageUpdateAutomation/"+ns+"/flux-system", "")
	g.Expect(code).To(Equal(http.StatusOK))
	g.Expect(body).To(HavePrefix("# kubectl get imageupdateautomation.image.toolkit.fluxcd.io flux-system -n " + ns + " -o yaml\n"))

	// The manager publishes a hold: the open page shows it.
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, ts.URL+"/events", nil)
	g.Expect(err).NotTo(HaveOccurred())
	resp, err := ts.Client().Do(req)
	g.Expect(err).NotTo(HaveOccurred())
	defer func() { _ = resp.Body.Close() }()
	events := make(chan string)
	go readEvents(resp.Body, events)
	g.Eventually(events).WithTimeout(10 * time.Second).Should(Receive(ContainSubstring(`data-automation="` + ns + `/flux-system"`)))
	var many []uprevv1.Hold
	for i := range uprevv1.MaxPublishedHolds + 3 {
		many = append(many, uprevv1.Hold{Policy: fmt.Sprintf("%s/p%03d", ns, i), Version: "2.0.0", RevertedIn: revert})
	}
	var manyRefused []uprevv1.RefusedDowngrade
	for i := range uprevv1.MaxPublishedHolds + 2 {
		manyRefused = append(manyRefused, uprevv1.RefusedDowngrade{Policy: fmt.Sprintf("%s/p%03d", ns, i), File: "apps/p.yaml", Current: "3.0.0", Selected: "2.0.0"})
	}
	holds := []uprevv1.Hold{{Policy: ns + "/agent", Version: "1.2.0", RevertedIn: revert}}
	refused := []uprevv1.RefusedDowngrade{{Policy: ns + "/web", File: "apps/web.yaml", Current: "3.1.0", Selected: "3.0.0"}}
	for i, published := range [][]uprevv1.Hold{holds, many} {
		g.Expect(k8s.Get(t.Context(), client.ObjectKeyFromObject(flux), flux)).To(Succeed())
		flux.Annotations = map[string]string{uprevv1.HoldsAnnotation: uprevv1.EncodeHolds(published, [][]uprevv1.RefusedDowngrade{refused, manyRefused}[i]...)}
		g.Expect(k8s.Update(t.Context(), flux)).To(Succeed())
		if len(published) == 1 {
			g.Eventually(events).WithTimeout(10 * time.Second).Should(Receive(And(
				ContainSubstring(`<li class="hold" data-policy="`+ns+`/agent"><a href="/object/ImageUpdateAutomation/`+ns+`/flux-system">`+ns+`/agent 1.2.0</a> is held: reverted in <span title="`+revert+`">9ab2c3d4e5f6</span>. Release it with <code>uprev release-hold flux-system agent -n `+ns+`</code></li>`),
				ContainSubstring(`<li><a href="/object/ImageUpdateAutomation/`+ns+`/flux-system">`+ns+`/web</a>: apps/web.yaml stays at 3.1.0; the policy selects the lower 3.0.0</li>`))))
		}
	}
	g.Eventually(events).WithTimeout(10 * time.Second).Should(Receive(And(
		ContainSubstring(`<li class="hold">3 more held, not listed: the annotation lists the first ones only</li>`),
		ContainSubstring(`<li>2 more refused, not listed: the annotation lists the first ones only</li>`))))
}

// readEvents sends the data of each server-sent event of r to events.
func readEvents(r io.Reader, events chan<- string) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	var data strings.Builder
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "data: "):
			data.WriteString(strings.TrimPrefix(line, "data: ") + "\n")
		case line == "" && data.Len() > 0:
			events <- data.String()
			data.Reset()
		}
	}
	close(events)
}
