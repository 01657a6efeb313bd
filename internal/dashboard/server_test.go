package dashboard

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	iacv1 "github.com/fluxcd/image-automation-controller/api/v1"
	imagev1 "github.com/fluxcd/image-reflector-controller/api/v1"
	"github.com/fluxcd/pkg/apis/meta"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"

	uprevv1 "github.com/uprev-dev/uprev/api/v1alpha1"
	"github.com/uprev-dev/uprev/internal/testenv/cluster"
)

// k8s reaches the tests' kube-apiserver, started once for the package; no
// manager runs there, so the status a test writes stays as written.
var k8s client.WithWatch

func TestMain(m *testing.M) {
	os.Exit(runSuite(m))
}

// runSuite starts the control plane, runs the tests and stops it.
func runSuite(m *testing.M) int {
	c, err := cluster.Start()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() {
		if err := c.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "stopping control plane:", err)
		}
	}()
	// The kinds the page reads (the manager's scheme is the controllers',
	// which an engine's tests do not import).
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, imagev1.AddToScheme, iacv1.AddToScheme, uprevv1.AddToScheme} {
		if err = add(scheme); err != nil {
			break
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if k8s, err = client.NewWithWatch(c.Config, client.Options{Scheme: scheme}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return m.Run()
}

// Commits and digests of the fixture.
const (
	oldRevision = "main@sha1:0dd0000000111122223333444455556666777788"
	newRevision = "main@sha1:c0ffee0000111122223333444455556666777788"
	digest110   = "sha256:1111111111111111111111111111111111111111111111111111111111111111"
	revert      = "9ab2c3d4e5f60718293a4b5c6d7e8f9012345678"
)

// createWithStatus creates obj and writes its status.
func createWithStatus(t *testing.T, obj client.Object) {
	t.Helper()
	withStatus := obj.DeepCopyObject().(client.Object)
	if err := k8s.Create(t.Context(), obj); err != nil {
		t.Fatalf("creating %s: %v", obj.GetName(), err)
	}
	withStatus.SetResourceVersion(obj.GetResourceVersion())
	if err := k8s.Status().Update(t.Context(), withStatus); err != nil {
		t.Fatalf("writing the status of %s: %v", obj.GetName(), err)
	}
	if err := k8s.Get(t.Context(), client.ObjectKeyFromObject(obj), obj); err != nil {
		t.Fatalf("reading %s: %v", obj.GetName(), err)
	}
}

// runs counts the namespaces newNamespace made per name, so that a test run
// again (-count) gets a namespace of its own too.
var runs = map[string]int{}

// newNamespace returns name, or, when a test runs again, name and the run.
func newNamespace(name string) string {
	runs[name]++
	if n := runs[name]; n > 1 {
		return fmt.Sprintf("%s-%d", name, n)
	}
	return name
}

// createFleet creates in a new namespace a fleet mid-rollout: agent 1.1.0
// is the latest, eu-1 (wave 1) runs it and us-1 (wave 2) waits with
// 1.0.0; the automation pushed it and holds web 2.1.0.
func createFleet(t *testing.T, ns string) *uprevv1.Sync {
	t.Helper()
	if err := k8s.Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatalf("creating namespace %s: %v", ns, err)
	}
	agent := &imagev1.ImagePolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "agent"},
		Spec: imagev1.ImagePolicySpec{
			ImageRepositoryRef: meta.NamespacedObjectReference{Name: "agent"},
			Policy:             imagev1.ImagePolicyChoice{SemVer: &imagev1.SemVerPolicy{Range: ">=1.0.0"}},
		},
	}
	agent.Status.LatestRef = &imagev1.ImageRef{Name: "registry.example.com/acme/agent", Tag: "1.1.0", Digest: digest110}
	createWithStatus(t, agent)
	pushed := metav1.NewTime(time.Now().Add(-time.Minute))
	auto := &uprevv1.UpdateAutomation{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "fleet"},
		Spec: uprevv1.UpdateAutomationSpec{
			Interval: metav1.Duration{Duration: time.Hour},
			Git: uprevv1.GitSpec{
				GitSource: uprevv1.GitSource{URL: "https://git.example.com/fleet.git", Ref: uprevv1.GitRef{Branch: "main"}},
				Commit:    uprevv1.CommitSpec{Author: uprevv1.CommitUser{Name: "uprev", Email: "uprev@example.com"}},
			},
		},
		Status: uprevv1.UpdateAutomationStatus{
			LastPushCommit: "c0ffee0000111122223333444455556666777788", LastPushTime: &pushed,
			Holds:             []uprevv1.Hold{{Policy: ns + "/web", Version: "2.1.0", RevertedIn: revert}},
			RefusedDowngrades: []uprevv1.RefusedDowngrade{{Policy: ns + "/kms", File: "apps/kms.yaml", Current: "2.3.0", Selected: "2.2.0"}},
		},
	}
	createWithStatus(t, auto)
	applied := metav1.NewTime(time.Now().Add(-2 * time.Minute))
	sync := &uprevv1.Sync{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "agent"},
		Spec: uprevv1.SyncSpec{
			Interval: metav1.Duration{Duration: time.Hour},
			Git:      uprevv1.GitSource{URL: "https://git.example.com/fleet.git", Ref: uprevv1.GitRef{Branch: "main"}},
			Targets:  []uprevv1.Target{{Name: "eu-1"}, {Name: "us-1"}},
			Rollout:  &uprevv1.Rollout{Waves: [][]string{{"eu-1"}, {"us-1"}}},
		},
		Status: uprevv1.SyncStatus{
			LastAttemptedRevision: newRevision,
			Targets: []uprevv1.TargetStatus{
				{Name: "eu-1", LastAppliedRevision: newRevision, LastAttemptedRevision: newRevision, Healthy: true, LastAppliedTime: &applied,
					Components: []uprevv1.AppliedComponent{{Image: "registry.example.com/acme/agent", Tag: "1.1.0", Digest: digest110}}},
				{Name: "us-1", LastAppliedRevision: oldRevision, LastAttemptedRevision: oldRevision, Healthy: true, LastAppliedTime: &applied,
					Components: []uprevv1.AppliedComponent{{Image: "registry.example.com/acme/agent", Tag: "1.0.0"}}},
			},
			Conditions: []metav1.Condition{{Type: meta.ReadyCondition, Status: metav1.ConditionFalse, Reason: "Progressing",
				Message: "rollout of " + newRevision + ": 1 of 2 waves done, next wave in 8s", LastTransitionTime: pushed}},
		},
	}
	createWithStatus(t, sync)
	event := &eventsv1.Event{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "agent.1"},
		EventTime:  metav1.NewMicroTime(time.Now().Add(-3 * time.Minute)),
		Type:       corev1.EventTypeNormal, Reason: "LatestImageChanged", Action: "Select",
		Note:                "Latest image for registry.example.com/acme/agent updated from 1.0.0 to 1.1.0",
		Regarding:           corev1.ObjectReference{Kind: "ImagePolicy", Namespace: ns, Name: "agent"},
		ReportingController: "uprev", ReportingInstance: "uprev-1",
	}
	if err := k8s.Create(t.Context(), event); err != nil {
		t.Fatalf("creating an event: %v", err)
	}
	return sync
}

// startServer serves the dashboard of namespace ns and runs it until the
// test ends.
func startServer(t *testing.T, ns string) *httptest.Server {
	t.Helper()
	ts := httptest.NewUnstartedServer(nil)
	srv, err := New(Options{Client: k8s, Namespace: ns, Address: ts.Listener.Addr().String()})
	if err != nil {
		t.Fatal(err)
	}
	ts.Config.Handler = srv
	ctx, cancel := context.WithCancel(context.Background())
	go srv.Run(ctx)
	ts.Start()
	t.Cleanup(func() {
		cancel()
		ts.CloseClientConnections()
		ts.Close()
	})
	return ts
}

// get returns the status code and body of path on ts, sent with host as
// the Host header ("" for ts's own address).
func get(t *testing.T, ts *httptest.Server, path, host string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, ts.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if host != "" {
		req.Host = host
	}
	resp, err := ts.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(body)
}

func TestPage(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace("page")
	createFleet(t, ns)
	ts := startServer(t, ns)
	code, page := get(t, ts, "/", "")
	g.Expect(code).To(Equal(http.StatusOK), page)
	g.Expect(page).To(ContainSubstring(`data-component="` + ns + `/agent" data-target="` + ns + `/agent/eu-1" data-state="up-to-date"`))
	g.Expect(page).To(ContainSubstring(`data-component="` + ns + `/agent" data-target="` + ns + `/agent/us-1" data-state="waiting"`))
	g.Expect(page).To(ContainSubstring(`1.1.0<span class="digest">@sha256:111111111111</span>`), "the latest version with its digest")
	g.Expect(page).To(ContainSubstring("Wave 2: waiting (rollout of " + newRevision + ": 1 of 2 waves done, next wave in 8s)"))
	g.Expect(page).To(ContainSubstring(`<code>uprev release-hold fleet web -n ` + ns + `</code>`))
	g.Expect(page).To(ContainSubstring("apps/kms.yaml stays at 2.3.0; the policy selects the lower 2.2.0"))
	g.Expect(page).To(ContainSubstring("Latest image for registry.example.com/acme/agent updated from 1.0.0 to 1.1.0"), "history from Events")
	g.Expect(page).To(ContainSubstring("eu-1 got 1.1.0 ("+newRevision+")"), "history from status")
	g.Expect(page).To(ContainSubstring(`href="/object/Sync/` + ns + `/agent"`))
	g.Expect(page).To(ContainSubstring(`href="/object/Event/` + ns + `/agent.1"`))

	code, yaml := get(t, ts, "/object/Sync/"+ns+"/agent", "")
	g.Expect(code).To(Equal(http.StatusOK))
	g.Expect(yaml).To(HavePrefix("# kubectl get sync.uprev.dev agent -n " + ns + " -o yaml\n"))
	g.Expect(yaml).To(ContainSubstring("lastAttemptedRevision: " + newRevision))
	g.Expect(yaml).NotTo(ContainSubstring("managedFields"))
	code, _ = get(t, ts, "/object/Event/"+ns+"/agent.1", "")
	g.Expect(code).To(Equal(http.StatusOK))
}

// TestObjectKinds: the YAML pages show the kinds the page reads and no
// other; a Secret the user may read is not served.
func TestObjectKinds(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace("kinds")
	createFleet(t, ns)
	g.Expect(k8s.Create(t.Context(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "token"}, StringData: map[string]string{"token": "s3cr3t"}})).To(Succeed())
	ts := startServer(t, ns)
	code, body := get(t, ts, "/object/Secret/"+ns+"/token", "")
	g.Expect(code).To(Equal(http.StatusNotFound))
	g.Expect(body).NotTo(ContainSubstring("s3cr3t"))
	code, body = get(t, ts, "/object/Sync/"+ns+"/missing", "")
	g.Expect(code).To(Equal(http.StatusNotFound))
	g.Expect(body).To(ContainSubstring("reading Sync " + ns + "/missing"))
}

// TestForeignHost is a web page of another site that points its DNS name
// at 127.0.0.1 (DNS rebinding) and reads the dashboard from the user's
// browser: the dashboard answers no Host but its own.
func TestForeignHost(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace("rebinding")
	createFleet(t, ns)
	ts := startServer(t, ns)
	_, port, _ := strings.Cut(strings.TrimPrefix(ts.URL, "http://"), ":")
	for _, path := range []string{"/", "/events", "/object/Sync/" + ns + "/agent", "/web/dashboard.js"} {
		code, body := get(t, ts, path, "attacker.example:"+port)
		g.Expect(code).To(Equal(http.StatusForbidden), path)
		g.Expect(body).NotTo(ContainSubstring("agent"), path)
	}
	for _, host := range []string{"localhost:" + port, "127.0.0.1:" + port, "[::1]:" + port} {
		code, _ := get(t, ts, "/", host)
		g.Expect(code).To(Equal(http.StatusOK), host)
	}
}

// TestLiveUpdates: a change of a Sync's status reaches an open page as a
// server-sent event, the waiting cell now current.
func TestLiveUpdates(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace("live")
	sync := createFleet(t, ns)
	ts := startServer(t, ns)
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, ts.URL+"/events", nil)
	g.Expect(err).NotTo(HaveOccurred())
	resp, err := ts.Client().Do(req)
	g.Expect(err).NotTo(HaveOccurred())
	defer func() { _ = resp.Body.Close() }()
	g.Expect(resp.Header.Get("Content-Type")).To(Equal("text/event-stream"))
	events := make(chan string)
	go readEvents(resp.Body, events)
	us1 := func(state string) string {
		return `data-target="` + ns + `/agent/us-1" data-state="` + state + `"`
	}
	g.Eventually(events).WithTimeout(10 * time.Second).Should(Receive(ContainSubstring(us1("waiting"))))

	applied := metav1.Now()
	sync.Status.Targets[1] = uprevv1.TargetStatus{Name: "us-1", LastAppliedRevision: newRevision, LastAttemptedRevision: newRevision, Healthy: true, LastAppliedTime: &applied,
		Components: []uprevv1.AppliedComponent{{Image: "registry.example.com/acme/agent", Tag: "1.1.0", Digest: digest110}}}
	g.Expect(k8s.Status().Update(t.Context(), sync)).To(Succeed())
	g.Eventually(events).WithTimeout(10 * time.Second).Should(Receive(ContainSubstring(us1("up-to-date"))))
}
