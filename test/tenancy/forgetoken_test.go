package tenancy

import (
	"context"
	"encoding/base64"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	iacv1 "github.com/fluxcd/image-automation-controller/api/v1"
	"github.com/fluxcd/pkg/apis/meta"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	uprevv1 "github.com/uprev-dev/uprev/api/v1alpha1"
	"github.com/uprev-dev/uprev/internal/testenv/githubapi"
	"github.com/uprev-dev/uprev/internal/testenv/gitserver"
)

// recorder is the tenant's server: it records every request's headers and
// passes it on to a GitHub API stand-in.
type recorder struct {
	*httptest.Server
	mu      sync.Mutex
	headers []string
}

// startRecorder starts a recorder in front of the GitHub API stand-in at
// api, stopped when the test ends.
func startRecorder(t *testing.T, api string) *recorder {
	t.Helper()
	target, err := url.Parse(api)
	if err != nil {
		t.Fatal(err)
	}
	rec := &recorder{}
	proxy := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: target.Scheme, Host: target.Host})
	rec.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec.mu.Lock()
		for name, values := range r.Header {
			rec.headers = append(rec.headers, name+": "+strings.Join(values, ","))
		}
		rec.mu.Unlock()
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(rec.Close)
	return rec
}

// seen is every header line received so far, one string.
func (r *recorder) seen() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return strings.Join(r.headers, "\n")
}

// TestForgeTokenStaysWithItsGitHost: a tenant's ImageUpdateAutomation
// whose sourceRef names another team's GitRepository (allowed without
// --no-cross-namespace-refs, as in Flux) and whose pull request annotation
// names the tenant's own server never gets that team's Git password sent
// there; it is Stalled saying the pull request needs its own secretRef.
// With a secretRef of the tenant's, the pull request is opened with the
// tenant's token.
func TestForgeTokenStaysWithItsGitHost(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	startManager(t)
	team, tenant := newNamespace(t, "team"), newNamespace(t, "tenant")

	const teamPassword = "team-git-password-P4x"
	git := gitserver.Start(t, gitserver.WithBasicAuth("team", teamPassword))
	gitURL := git.InitRepo(t, "fleet", "main", map[string]string{"cm.yaml": configMap(team, "app")})
	git.Git(t, "fleet", "branch", "uprev/updates", "main")
	createSecret(t, team, "git", map[string][]byte{"username": []byte("team"), "password": []byte(teamPassword)})
	g.Expect(k8s.Create(ctx, &sourcev1.GitRepository{
		ObjectMeta: metav1.ObjectMeta{Namespace: team, Name: "fleet"},
		Spec: sourcev1.GitRepositorySpec{
			URL: gitURL, Interval: metav1.Duration{Duration: time.Hour},
			SecretRef: &meta.LocalObjectReference{Name: "git"},
			Reference: &sourcev1.GitRepositoryRef{Branch: "main"},
		},
	})).To(Succeed())

	const tenantToken = "tenant-token-T5x"
	api := githubapi.StartRepository(t, "acme", "fleet", tenantToken)
	rec := startRecorder(t, api.URL)
	auto := &iacv1.ImageUpdateAutomation{
		ObjectMeta: metav1.ObjectMeta{Namespace: tenant, Name: "steal", Annotations: map[string]string{
			uprevv1.PullRequestAnnotation: `{"provider": "github", "url": "` + rec.URL + `/api/v3/", "repository": "acme/fleet"}`,
		}},
		Spec: iacv1.ImageUpdateAutomationSpec{
			SourceRef: iacv1.CrossNamespaceSourceReference{Kind: sourcev1.GitRepositoryKind, Name: "fleet", Namespace: team},
			Interval:  metav1.Duration{Duration: time.Hour},
			GitSpec: &iacv1.GitSpec{
				Checkout: &iacv1.GitCheckoutSpec{Reference: sourcev1.GitRepositoryRef{Branch: "main"}},
				Commit:   iacv1.CommitSpec{Author: iacv1.CommitUser{Name: "tenant", Email: "tenant@example.com"}},
				Push:     &iacv1.PushSpec{Branch: "uprev/updates"},
			},
			Update: &iacv1.UpdateStrategy{Strategy: iacv1.UpdateStrategySetters, Path: "./"},
		},
	}
	g.Expect(k8s.Create(ctx, auto)).To(Succeed())

	stalled := func(g Gomega) *metav1.Condition {
		g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(auto), auto)).To(Succeed())
		for _, c := range auto.Status.Conditions {
			if c.Type == meta.StalledCondition {
				return &c
			}
		}
		return nil
	}
	g.Eventually(func(g Gomega) {
		for _, form := range []string{teamPassword, base64.StdEncoding.EncodeToString([]byte("team:" + teamPassword))} {
			g.Expect(rec.seen()).NotTo(ContainSubstring(form), "the tenant's server got the team's Git password")
		}
		g.Expect(stalled(g)).To(And(Not(BeNil()),
			HaveField("Reason", uprevv1.InvalidSpecReason),
			HaveField("Message", ContainSubstring("needs its own secretRef"))),
			"the pull request is refused the other namespace's Git Secret")
	}).Should(Succeed())
	g.Expect(rec.seen()).To(BeEmpty(), "the tenant's server got no call")

	// With the tenant's own token, the pull request is opened.
	createSecret(t, tenant, "forge", map[string][]byte{"token": []byte(tenantToken)})
	g.Eventually(func() error {
		g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(auto), auto)).To(Succeed())
		auto.Annotations[uprevv1.PullRequestAnnotation] = `{"provider": "github", "url": "` + rec.URL + `/api/v3/", "repository": "acme/fleet", "secretRef": {"name": "forge"}}`
		return k8s.Update(ctx, auto)
	}).Should(Succeed())
	g.Eventually(api.PullRequests).Should(HaveLen(1), "the pull request is opened with the tenant's token")
	g.Expect(rec.seen()).To(ContainSubstring(tenantToken))
	g.Expect(rec.seen()).NotTo(ContainSubstring(teamPassword))
}
