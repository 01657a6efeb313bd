package dashboard

import (
	"net/http"
	"testing"

	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/client"

	uprevv1 "github.com/uprev-dev/uprev/api/v1alpha1"
)

// TestGroupPullRequestsOnThePage: an automation that groups its changes
// shows each group's pull request, linked, with its state.
func TestGroupPullRequestsOnThePage(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace("grouped")
	createFleet(t, ns)
	auto := &uprevv1.UpdateAutomation{}
	g.Expect(k8s.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "fleet"}, auto)).To(Succeed())
	auto.Status.PullRequests = []uprevv1.PullRequestStatus{
		{Group: "agent", Branch: "uprev/updates-agent", URL: "https://github.com/acme/fleet/pull/7", Number: 7, State: "open"},
		{Group: "web", Branch: "uprev/updates-web", URL: "javascript:alert(1)", Number: 8, State: "merged"},
	}
	g.Expect(k8s.Status().Update(t.Context(), auto)).To(Succeed())
	ts := startServer(t, ns)
	g.Eventually(func(g Gomega) {
		code, page := get(t, ts, "/", "")
		g.Expect(code).To(Equal(http.StatusOK))
		g.Expect(page).To(ContainSubstring(`<span class="group-pr" data-group="agent">pull request of agent <a href="https://github.com/acme/fleet/pull/7">#7</a> open</span>`))
		g.Expect(page).To(ContainSubstring(`<span class="group-pr" data-group="web">pull request of web <a href="#ZgotmplZ">#8</a> merged</span>`), "a URL that is no web address is not linked")
	}).Should(Succeed())
}
