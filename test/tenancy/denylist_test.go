package tenancy

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	uprevv1 "github.com/uprev-dev/uprev/api/v1alpha1"
	"github.com/uprev-dev/uprev/internal/testenv/githubapi"
	"github.com/uprev-dev/uprev/internal/testenv/gitserver"
)

// deniedAddress is the loopback address the manager of these tests is told
// to refuse (--registry-deny-cidrs), standing for a cloud metadata service:
// the tenant's server listens there.
const deniedAddress = "127.0.0.2"

// connectionCounter is a server on the denied address that counts the
// connections it accepts: it must never see one.
type connectionCounter struct {
	*httptest.Server
	accepted atomic.Int64
}

// startOnDeniedAddress starts a connectionCounter on deniedAddress that
// answers every request with handler, stopped when the test ends.
func startOnDeniedAddress(t *testing.T, handler http.Handler) *connectionCounter {
	t.Helper()
	l, err := net.Listen("tcp", deniedAddress+":0")
	if err != nil {
		t.Fatalf("listening on %s (Linux routes all of 127.0.0.0/8 to loopback): %v", deniedAddress, err)
	}
	c := &connectionCounter{Server: httptest.NewUnstartedServer(handler)}
	c.Listener = l
	c.Config.ConnState = func(_ net.Conn, state http.ConnState) {
		if state == http.StateNew {
			c.accepted.Add(1)
		}
	}
	c.Start()
	t.Cleanup(c.Close)
	return c
}

// TestForgeCallsKeepTheDenyList: an automation whose pull request names a
// forge on a denied address, and a Sync whose Git Secret is a GitHub App
// whose API (githubAppBaseURL) is on a denied address, never reach it:
// no connection is made, not even the GitHub App's token exchange with its
// signed JWT, and each object is not Ready, naming the refused address.
func TestForgeCallsKeepTheDenyList(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	startManager(t, "--registry-deny-cidrs="+deniedAddress+"/32")
	ns := newNamespace(t, "denied")

	// The forge stand-ins, both on the denied address.
	forge := githubapi.StartRepository(t, "acme", "fleet", "forge-token")
	forgeRec := startOnDeniedAddress(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "the manager reached a denied address", http.StatusTeapot)
	}))
	app := githubapi.Start(t)
	appRec := startOnDeniedAddress(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "the manager reached a denied address", http.StatusTeapot)
	}))

	git := gitserver.Start(t, gitserver.WithBasicAuth("x-access-token", app.Token))
	gitURL := git.InitRepo(t, "fleet", "main", map[string]string{"cm.yaml": configMap(ns, "app")})
	git.Git(t, "fleet", "branch", "uprev/updates", "main")

	// The pull request of the automation names the forge on the denied address.
	createSecret(t, ns, "git", map[string][]byte{"username": []byte("x-access-token"), "password": []byte(app.Token)})
	createSecret(t, ns, "forge", map[string][]byte{"token": []byte("forge-token")})
	auto := &uprevv1.UpdateAutomation{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "pr"},
		Spec: uprevv1.UpdateAutomationSpec{
			Interval: metav1.Duration{Duration: time.Hour},
			Git: uprevv1.GitSpec{
				GitSource: uprevv1.GitSource{URL: gitURL, SecretRef: &meta.LocalObjectReference{Name: "git"}, Ref: uprevv1.GitRef{Branch: "main"}},
				Commit:    uprevv1.CommitSpec{Author: uprevv1.CommitUser{Name: "uprev", Email: "uprev@example.com"}},
				Push: &uprevv1.PushSpec{Branch: "uprev/updates", PullRequest: &uprevv1.PullRequestSpec{
					Provider: "github", URL: forgeRec.URL + "/api/v3/", Repository: "acme/fleet",
					SecretRef: &meta.LocalObjectReference{Name: "forge"},
				}},
			},
			Update: uprevv1.UpdateStrategy{Path: "./"},
		},
	}
	g.Expect(k8s.Create(ctx, auto)).To(Succeed())

	// The Sync's Git Secret is a GitHub App whose API is on the denied address.
	appData := app.SecretData()
	appData["githubAppBaseURL"] = []byte(appRec.URL)
	createSecret(t, ns, "app", appData)
	sync := &uprevv1.Sync{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "apps"},
		Spec: uprevv1.SyncSpec{
			Interval: metav1.Duration{Duration: time.Hour},
			Git:      uprevv1.GitSource{URL: gitURL, SecretRef: &meta.LocalObjectReference{Name: "app"}, Ref: uprevv1.GitRef{Branch: "main"}},
			Path:     "./",
			Targets:  []uprevv1.Target{localTarget()},
		},
	}
	g.Expect(k8s.Create(ctx, sync)).To(Succeed())

	deniedHost := func(u string) string { return strings.TrimPrefix(u, "http://") }
	g.Eventually(readyCondition(auto, func() []metav1.Condition { return auto.Status.Conditions })).Should(And(
		HaveField("Status", metav1.ConditionFalse),
		HaveField("Message", And(ContainSubstring(deniedAddress), ContainSubstring("denies")))),
		"the automation names the refused address of its forge (%s)", deniedHost(forgeRec.URL))
	g.Eventually(readyCondition(sync, func() []metav1.Condition { return sync.Status.Conditions })).Should(And(
		HaveField("Status", metav1.ConditionFalse),
		HaveField("Message", And(ContainSubstring(deniedAddress), ContainSubstring("denies")))),
		"the Sync names the refused address of its GitHub App's API (%s)", deniedHost(appRec.URL))
	g.Expect(forgeRec.accepted.Load()).To(BeZero(), "the forge on the denied address got a connection")
	g.Expect(appRec.accepted.Load()).To(BeZero(), "the GitHub App API on the denied address got a connection")
	g.Expect(forge.PullRequests()).To(BeEmpty())
	g.Expect(app.Issued()).To(BeZero())
}
