package controllers

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	imagev1 "github.com/fluxcd/image-reflector-controller/api/v1"
	"github.com/fluxcd/pkg/auth"
	"github.com/fluxcd/pkg/runtime/conditions"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/uprev-dev/uprev/internal/testenv/registry"
)

// gceMetadata stands in for the GCE metadata server as the Google client
// libraries use it (https://cloud.google.com/compute/docs/metadata/querying-metadata):
// requests carry Metadata-Flavor: Google, and
// instance/service-accounts/default/token answers an OAuth 2.0 access token
// with expires_in seconds. issue is told of each token it hands out.
type gceMetadata struct {
	lifetime time.Duration
	issue    func(token string, expiry time.Time)
	mu       sync.Mutex
	issued   int
}

// tokens is the number of access tokens handed out.
func (m *gceMetadata) tokens() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.issued
}

// ServeHTTP implements http.Handler.
func (m *gceMetadata) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("Metadata-Flavor") != "Google" {
		http.Error(w, "missing Metadata-Flavor header", http.StatusForbidden)
		return
	}
	w.Header().Set("Metadata-Flavor", "Google")
	switch r.URL.Path {
	case "/computeMetadata/v1/project/project-id":
		_, _ = fmt.Fprint(w, "acme-project")
	case "/computeMetadata/v1/instance/service-accounts/default/token":
		m.mu.Lock()
		m.issued++
		token := fmt.Sprintf("ya29.gce-token-%d", m.issued)
		m.mu.Unlock()
		m.issue(token, time.Now().Add(m.lifetime))
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{
			"access_token": token,
			"expires_in":   int(m.lifetime.Seconds()),
			"token_type":   "Bearer",
		})
	default:
		http.NotFound(w, r)
	}
}

// startGCEMetadata serves m and points the Google client libraries of this
// process at it (GCE_METADATA_HOST), with no other credentials to find.
func startGCEMetadata(t *testing.T, m *gceMetadata) {
	t.Helper()
	srv := httptest.NewServer(m)
	t.Cleanup(srv.Close)
	t.Setenv("GCE_METADATA_HOST", strings.TrimPrefix(srv.URL, "http://"))
	t.Setenv("GOOGLE_APPLICATION_CREDENTIALS", "")
	t.Setenv("CLOUDSDK_CONFIG", t.TempDir())
}

const gcpImage = "europe-docker.pkg.dev/acme-project/apps/web"

func TestGCPWorkloadIdentityScansWithRefreshedTokens(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	reg := registry.Start(t)
	reg.PushTags(t, "acme-project/apps/web", "1.0.0", "1.1.0")
	front := newTokenRegistry(reg.Host())
	// Tokens live 10s and are cached for 80% of that, so rescans every
	// second go through more than one token, each used at least 2s before
	// it expires (a margin for a slow scan on a loaded machine).
	metadata := &gceMetadata{lifetime: 10 * time.Second, issue: func(token string, expiry time.Time) {
		front.issue("oauth2accesstoken", token, expiry)
	}}
	startGCEMetadata(t, metadata)
	cloud := newCloudNet(t, map[string]http.Handler{"europe-docker.pkg.dev": front})

	repo := newCloudRepository(t, ns, cloud, gcpImage, "gcp", func(r *imagev1.ImageRepository) {
		r.Spec.Interval = metav1.Duration{Duration: time.Second}
	})
	waitForCloudScan(t, repo, 2)

	g.Eventually(func(g Gomega) {
		g.Expect(metadata.tokens()).To(BeNumerically(">=", 2), "the token is refreshed")
		c := readyCondition(g, repo)
		g.Expect(c.Status).To(Equal(metav1.ConditionTrue), c.Message)
	}, time.Minute).Should(Succeed())
	g.Expect(front.refused()).To(BeZero(), "no scan used an expired token")
	// Scans come every second and a token lives 10s, so scans soon outnumber
	// tokens; on a loaded machine scans may lag, hence the wait.
	g.Eventually(func() bool { return reg.Counts().TagListPages > metadata.tokens() }, time.Minute).
		Should(BeTrue(), "tokens are reused across scans")
	g.Expect(front.refused()).To(BeZero(), "no scan used an expired token")
}

func TestRefusedCloudTokenIsReportedWithoutTheToken(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	reg := registry.Start(t)
	reg.PushTags(t, "acme-project/apps/web", "1.0.0")
	front := newTokenRegistry(reg.Host())
	// The registry does not accept the tokens, as when the Google service
	// account lacks Artifact Registry Reader.
	front.refuseAll = true
	metadata := &gceMetadata{lifetime: time.Hour, issue: func(token string, expiry time.Time) {
		front.issue("oauth2accesstoken", token, expiry)
	}}
	startGCEMetadata(t, metadata)
	cloud := newCloudNet(t, map[string]http.Handler{"europe-docker.pkg.dev": front})

	repo := newCloudRepository(t, ns, cloud, gcpImage, "gcp")
	g.Eventually(func(g Gomega) {
		c := readyCondition(g, repo)
		g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(c.Reason).To(Equal(imagev1.AuthenticationFailedReason))
		g.Expect(c.Message).To(ContainSubstring("the registry refused the token"))
		g.Expect(front.refused()).To(BeNumerically(">", 0))
	}).Should(Succeed())

	g.Expect(k8s.Get(context.Background(), client.ObjectKeyFromObject(repo), repo)).To(Succeed())
	status, err := json.Marshal(repo.Status)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(status)).NotTo(ContainSubstring("gce-token"))
	g.Expect(conditions.IsStalled(repo)).To(BeFalse(), "a refused token is retried")
	var events eventsList
	g.Expect(k8s.List(context.Background(), &events, client.InNamespace(ns))).To(Succeed())
	for _, e := range events.Items {
		g.Expect(e.Note).NotTo(ContainSubstring("gce-token"))
	}
}

// TestCRDBundleReadsAChartWithCloudIdentity: the chart that ships a
// release's CRDs is read from a cloud registry with the token of the
// policy's ImageRepository provider, as its scans are.
func TestCRDBundleReadsAChartWithCloudIdentity(t *testing.T) {
	g := NewWithT(t)
	f := newAutomationFixture(t, nil, map[string]string{
		"clusters/agent/release.yaml": agentRelease,
	})
	reg := registry.Start(t)
	reg.Push(t, "acme-project/apps/web", "1.0.0", registry.HelmChart(t, "agent", "1.0.0", map[string]string{
		"crds/agents.yaml": testCRD("agents", "Agent", "1.0.0"),
	}))
	front := newTokenRegistry(reg.Host())
	metadata := &gceMetadata{lifetime: time.Hour, issue: func(token string, expiry time.Time) {
		front.issue("oauth2accesstoken", token, expiry)
	}}
	startGCEMetadata(t, metadata)
	cloud := newCloudNet(t, map[string]http.Handler{"europe-docker.pkg.dev": front})
	newCloudRepository(t, f.ns, cloud, gcpImage, "gcp", func(r *imagev1.ImageRepository) { r.Name = "chart" })
	newPolicy(t, f.ns, "agent", semverChoice(">=1.0.0 <2.0.0"), func(p *imagev1.ImagePolicy) {
		p.Spec.ImageRepositoryRef.Name = "chart"
	})
	newAutomation(t, f.ns, f.url, withChartCRDs)

	g.Eventually(func(g Gomega) {
		g.Expect(f.log("main")[0].Subject).To(Equal("Update CRDs"))
	}).Should(Succeed())
	g.Expect(f.readFile("main", "clusters/agent/crds/agents.example.com.yaml")).To(ContainSubstring("release 1.0.0"))
	// The token may be an earlier test's, still in the manager's cache.
	g.Expect(front.refused()).To(BeZero(), "every read carried a token a stand-in issued")
}

// googleSTS stands in for Google's Security Token Service token exchange
// (https://cloud.google.com/iam/docs/reference/sts/rest/v1/TopLevel/token):
// a form POST of an RFC 8693 token exchange, whose subject token is the
// workload's OIDC token for the workload identity provider's audience,
// answered with a federated access token. issue is told of each token it
// hands out.
type googleSTS struct {
	accept func(audience, subjectToken string) bool
	issue  func(token string, expiry time.Time)
	mu     sync.Mutex
	issued int
}

// ServeHTTP implements http.Handler.
func (s *googleSTS) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	if r.URL.Path != "/v1/token" || r.ParseForm() != nil ||
		r.PostForm.Get("grant_type") != "urn:ietf:params:oauth:grant-type:token-exchange" ||
		r.PostForm.Get("subject_token_type") != "urn:ietf:params:oauth:token-type:jwt" ||
		!s.accept(r.PostForm.Get("audience"), r.PostForm.Get("subject_token")) {
		w.WriteHeader(http.StatusBadRequest)
		_, _ = fmt.Fprint(w, `{"error":"invalid_grant","error_description":"The audience in ID Token does not match the expected audience."}`)
		return
	}
	s.mu.Lock()
	s.issued++
	token := fmt.Sprintf("ya29.federated-%d", s.issued)
	s.mu.Unlock()
	s.issue(token, time.Now().Add(time.Hour))
	_ = json.NewEncoder(w).Encode(map[string]any{
		"access_token":      token,
		"issued_token_type": "urn:ietf:params:oauth:token-type:access_token",
		"token_type":        "Bearer",
		"expires_in":        3600,
	})
}

func TestObjectLevelGCPIdentityScansAsTheObjectsServiceAccount(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	reg := registry.Start(t)
	reg.PushTags(t, "acme-project/apps/web", "1.0.0", "1.1.0")
	front := newTokenRegistry(reg.Host())
	const provider = "projects/123456789/locations/global/workloadIdentityPools/fleet/providers/cluster"
	sts := &googleSTS{
		accept: func(audience, token string) bool {
			return audience == "//iam.googleapis.com/"+provider && serviceAccountTokenFor(token, ns, "gar-reader", "//iam.googleapis.com/"+provider)
		},
		issue: func(token string, expiry time.Time) { front.issue("oauth2accesstoken", token, expiry) },
	}
	// The controller's own identity (the metadata server) is not used.
	metadata := &gceMetadata{lifetime: time.Hour, issue: func(string, time.Time) {}}
	startGCEMetadata(t, metadata)
	g.Expect(k8s.Create(context.Background(), &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{
		Namespace: ns, Name: "gar-reader", Annotations: map[string]string{"gcp.auth.fluxcd.io/workload-identity-provider": provider},
	}})).To(Succeed())
	auth.EnableObjectLevelWorkloadIdentity()
	t.Cleanup(auth.DisableObjectLevelWorkloadIdentity)

	cloud := newCloudNet(t, map[string]http.Handler{"europe-docker.pkg.dev": front, "sts.googleapis.com": sts})
	repo := newCloudRepository(t, ns, cloud, gcpImage, "gcp", func(r *imagev1.ImageRepository) {
		r.Spec.ServiceAccountName = "gar-reader"
	})
	waitForCloudScan(t, repo, 2)
	g.Expect(front.refused()).To(BeZero())
	g.Expect(metadata.tokens()).To(BeZero())
}
