package tenancy

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	imagev1 "github.com/fluxcd/image-reflector-controller/api/v1"
	"github.com/fluxcd/pkg/apis/meta"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// gceMetadata stands in for the GCE metadata server the manager's own
// Google identity comes from, following its documented contract
// (https://cloud.google.com/compute/docs/metadata/querying-metadata):
// requests carry Metadata-Flavor: Google, and
// instance/service-accounts/default/token answers an OAuth 2.0 access
// token. It counts the tokens asked for: the manager's identity at work.
type gceMetadata struct {
	mu     sync.Mutex
	tokens int
}

func (m *gceMetadata) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("Metadata-Flavor") != "Google" {
		http.Error(w, "missing Metadata-Flavor header", http.StatusForbidden)
		return
	}
	w.Header().Set("Metadata-Flavor", "Google")
	switch r.URL.Path {
	case "/computeMetadata/v1/project/project-id":
		_, _ = w.Write([]byte("acme-project"))
	case "/computeMetadata/v1/instance/service-accounts/default/token":
		m.mu.Lock()
		m.tokens++
		m.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"access_token": "ya29.manager-token", "expires_in": 3600, "token_type": "Bearer"})
	default:
		http.NotFound(w, r)
	}
}

func (m *gceMetadata) issued() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.tokens
}

// startGCEMetadata serves a metadata stand-in and points the managers this
// test starts at it.
func startGCEMetadata(t *testing.T) *gceMetadata {
	m := &gceMetadata{}
	srv := httptest.NewServer(m)
	t.Cleanup(srv.Close)
	t.Setenv("GCE_METADATA_HOST", strings.TrimPrefix(srv.URL, "http://"))
	t.Setenv("GOOGLE_APPLICATION_CREDENTIALS", "")
	t.Setenv("CLOUDSDK_CONFIG", t.TempDir())
	return m
}

const gcpImage = "europe-docker.pkg.dev/acme-project/apps/web"

func cloudRepository(t *testing.T, ns, name string, mutate func(*imagev1.ImageRepository)) *imagev1.ImageRepository {
	t.Helper()
	repo := &imagev1.ImageRepository{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: imagev1.ImageRepositorySpec{
			Image: gcpImage, Provider: "gcp", Interval: metav1.Duration{Duration: time.Hour},
			Timeout: &metav1.Duration{Duration: 5 * time.Second},
		},
	}
	if mutate != nil {
		mutate(repo)
	}
	if err := k8s.Create(context.Background(), repo); err != nil {
		t.Fatalf("creating ImageRepository: %v", err)
	}
	// Gone before the next test's manager starts, which may have the
	// manager's own identity.
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), repo) })
	return repo
}

// TestTenantRepositoryNeverUsesTheManagersCloudIdentity: under
// --default-service-account, a tenant's provider: gcp repository without
// serviceAccountName uses the namespace's default account (object-level
// workload identity, as in Flux), so the manager's own identity, the
// metadata server, is never asked for a token.
func TestTenantRepositoryNeverUsesTheManagersCloudIdentity(t *testing.T) {
	g := NewWithT(t)
	metadata := startGCEMetadata(t)
	ns := newNamespace(t, "tenant")
	repo := cloudRepository(t, ns, "web", nil)
	conds := func() []metav1.Condition { return repo.Status.Conditions }

	startManager(t, "--controllers=image", "--default-service-account=tenant")
	g.Eventually(readyCondition(repo, conds)).Should(And(
		HaveField("Status", metav1.ConditionFalse),
		HaveField("Message", ContainSubstring("--default-service-account"))))
	g.Expect(metadata.issued()).To(BeZero(), "the manager's own cloud identity was asked for a token")
}

// TestCloudProviderWithInsecureCAOrProxyIsRefused: a tenant combining a
// cloud provider with insecure, its own CA or its own proxy is refused
// before any token is made, and the proxy sees nothing.
func TestCloudProviderWithInsecureCAOrProxyIsRefused(t *testing.T) {
	g := NewWithT(t)
	metadata := startGCEMetadata(t)
	var mu sync.Mutex
	var proxied []string
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		proxied = append(proxied, r.Method+" "+r.Host+" "+r.Header.Get("Authorization"))
		mu.Unlock()
		http.Error(w, "recording only", http.StatusBadGateway)
	}))
	t.Cleanup(proxy.Close)
	ns := newNamespace(t, "tenant")
	createSecret(t, ns, "proxy", map[string][]byte{"address": []byte(proxy.URL)})
	createSecret(t, ns, "ca", map[string][]byte{"ca.crt": []byte("-----BEGIN CERTIFICATE-----\n-----END CERTIFICATE-----\n")})
	repos := map[string]*imagev1.ImageRepository{
		"proxySecretRef": cloudRepository(t, ns, "proxied", func(r *imagev1.ImageRepository) {
			r.Spec.ProxySecretRef = &meta.LocalObjectReference{Name: "proxy"}
		}),
		"insecure": cloudRepository(t, ns, "insecure", func(r *imagev1.ImageRepository) { r.Spec.Insecure = true }),
		"certSecretRef": cloudRepository(t, ns, "ca", func(r *imagev1.ImageRepository) {
			r.Spec.CertSecretRef = &meta.LocalObjectReference{Name: "ca"}
		}),
	}

	startManager(t, "--controllers=image")
	for setting, repo := range repos {
		conds := func() []metav1.Condition { return repo.Status.Conditions }
		g.Eventually(readyCondition(repo, conds)).Should(And(
			HaveField("Status", metav1.ConditionFalse),
			HaveField("Reason", "UnsafeCloudSettings"),
			HaveField("Message", ContainSubstring(setting))), setting)
	}
	mu.Lock()
	defer mu.Unlock()
	g.Expect(proxied).To(BeEmpty(), "the tenant's proxy saw requests")
	g.Expect(metadata.issued()).To(BeZero(), "a token was made for a refused repository")
}
