package tenancy

import (
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/uprev-dev/uprev/internal/testenv/freeport"
	"github.com/uprev-dev/uprev/internal/testenv/reporoot"
)

// TestMetricsNeedAnAuthorizedClient: by default the manager serves its
// metrics (every tenant's images, tags and digests among them) over HTTPS
// only to a client the API server authenticates and authorizes for the
// /metrics non-resource URL: an anonymous request, over HTTP or HTTPS,
// gets none; a ServiceAccount without the right is refused; one bound to
// config/rbac's uprev-metrics-reader gets them.
func TestMetricsNeedAnAuthorizedClient(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	addr := freeport.Addr(t)
	startManager(t, "--metrics-addr="+addr)
	ns := newNamespace(t, "metrics")

	// The manifest's ClusterRole, bound to a ServiceAccount "prometheus".
	reader := &rbacv1.ClusterRole{}
	manifest, err := os.ReadFile(filepath.Join(reporoot.Dir(), "config", "rbac", "metrics_reader_role.yaml"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(yaml.UnmarshalStrict(manifest, reader)).To(Succeed())
	reader.Name += "-" + ns
	g.Expect(k8s.Create(ctx, reader)).To(Succeed())
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), reader) })
	prometheus, stranger := serviceAccountToken(t, ns, "prometheus"), serviceAccountToken(t, ns, "stranger")
	g.Expect(k8s.Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: reader.Name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: reader.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "prometheus", Namespace: ns}},
	})).To(Succeed())
	t.Cleanup(func() {
		_ = k8s.Delete(context.Background(), &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: reader.Name}})
	})

	// The manager's certificate is its own, self-signed: the test checks
	// who may read, not the certificate.
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	get := func(g Gomega, url, token string) (int, string) {
		req, err := http.NewRequest(http.MethodGet, url, nil)
		g.Expect(err).NotTo(HaveOccurred())
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := hc.Do(req)
		if err != nil {
			return 0, err.Error()
		}
		defer func() { _ = resp.Body.Close() }()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	g.Eventually(func() error {
		conn, err := net.Dial("tcp", addr)
		if err == nil {
			return conn.Close()
		}
		return err
	}).Should(Succeed(), "the metrics endpoint listens")
	code, body := get(g, "http://"+addr+"/metrics", "")
	g.Expect(body).NotTo(ContainSubstring("controller_runtime"), "an anonymous request over HTTP got the metrics (HTTP %d)", code)
	g.Eventually(func(g Gomega) {
		code, body := get(g, "https://"+addr+"/metrics", prometheus)
		g.Expect(code).To(Equal(http.StatusOK), body)
		g.Expect(body).To(ContainSubstring("controller_runtime_reconcile_total"))
	}).Should(Succeed(), "an authorized ServiceAccount reads the metrics")
	code, body = get(g, "https://"+addr+"/metrics", "")
	g.Expect(code).To(Equal(http.StatusUnauthorized), "anonymous over HTTPS: %s", body)
	// controller-runtime's filter answers 500 when the TokenReview itself
	// reports an error, as it does for a token that is not a JWT.
	code, body = get(g, "https://"+addr+"/metrics", "not-a-token")
	g.Expect(code).To(BeElementOf(http.StatusUnauthorized, http.StatusInternalServerError), "a token the API server does not know: %s", body)
	g.Expect(body).NotTo(ContainSubstring("controller_runtime"))
	code, body = get(g, "https://"+addr+"/metrics", stranger)
	g.Expect(code).To(Equal(http.StatusForbidden), "a ServiceAccount without the right: %s", body)
}

// serviceAccountToken creates the ServiceAccount name in ns and returns a
// token of it.
func serviceAccountToken(t *testing.T, ns, name string) string {
	t.Helper()
	ctx := context.Background()
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	if err := k8s.Create(ctx, sa); err != nil {
		t.Fatalf("creating ServiceAccount: %v", err)
	}
	req := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To(int64(3600))}}
	if err := k8s.SubResource("token").Create(ctx, sa, req); err != nil {
		t.Fatalf("requesting a token of %s/%s: %v", ns, name, err)
	}
	return req.Status.Token
}
