package controllers

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"sync"
	"testing"
	"time"

	imagev1 "github.com/fluxcd/image-reflector-controller/api/v1"
	"github.com/fluxcd/pkg/apis/meta"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// cloudNet stands in for the cloud's fixed hostnames (the registry, and
// token services the library reaches over HTTPS): an HTTP proxy that
// tunnels every CONNECT to one TLS server, which serves each hostname with
// its own handler under a certificate of a test CA. ImageRepositories reach
// it through spec.proxySecretRef and trust it through spec.certSecretRef.
type cloudNet struct {
	proxy *httptest.Server
	caPEM []byte
}

// cloudCA signs the certificates of the cloud stand-ins. The auth
// library's HTTP clients trust only the system roots, so runSuite makes the
// process trust it through SSL_CERT_FILE (trustCloudCA) before any TLS.
var cloudCA = newTestCA()

// testCA is a certificate authority of the tests.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
	err  error
}

// newTestCA makes a CA valid for a day.
func newTestCA() *testCA {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return &testCA{err: err}
	}
	now := time.Now()
	template := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "cloud stand-in CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, template, template, &key.PublicKey, key)
	if err != nil {
		return &testCA{err: err}
	}
	cert, err := x509.ParseCertificate(der)
	return &testCA{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), err: err}
}

// trustCloudCA writes cloudCA to a file that SSL_CERT_FILE names and
// returns the file, for the caller to remove.
func trustCloudCA() (string, error) {
	if cloudCA.err != nil {
		return "", cloudCA.err
	}
	f, err := os.CreateTemp("", "uprev-cloud-ca-*.pem")
	if err != nil {
		return "", err
	}
	if _, err := f.Write(cloudCA.pem); err != nil {
		_ = f.Close()
		return f.Name(), err
	}
	if err := f.Close(); err != nil {
		return f.Name(), err
	}
	return f.Name(), os.Setenv("SSL_CERT_FILE", f.Name())
}

// newCloudNet starts the proxy and the TLS server for hosts.
func newCloudNet(t *testing.T, hosts map[string]http.Handler) *cloudNet {
	t.Helper()
	names := make([]string, 0, len(hosts))
	for h := range hosts {
		names = append(names, h)
	}
	caPEM, leaf := testCertificate(t, names)
	backend := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host, _, err := net.SplitHostPort(r.Host)
		if err != nil {
			host = r.Host
		}
		h, ok := hosts[host]
		if !ok {
			http.Error(w, "unknown host "+host, http.StatusBadGateway)
			return
		}
		h.ServeHTTP(w, r)
	}))
	backend.TLS = &tls.Config{Certificates: []tls.Certificate{leaf}, MinVersion: tls.VersionTLS12}
	backend.StartTLS()
	t.Cleanup(backend.Close)
	backendAddr := backend.Listener.Addr().String()

	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodConnect {
			http.Error(w, "only CONNECT is proxied", http.StatusMethodNotAllowed)
			return
		}
		upstream, err := net.Dial("tcp", backendAddr)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		conn, _, err := w.(http.Hijacker).Hijack()
		if err != nil {
			_ = upstream.Close()
			return
		}
		_, _ = conn.Write([]byte("HTTP/1.1 200 Connection established\r\n\r\n"))
		go func() {
			_, _ = io.Copy(upstream, conn)
			_ = upstream.Close()
		}()
		go func() {
			_, _ = io.Copy(conn, upstream)
			_ = conn.Close()
		}()
	}))
	t.Cleanup(proxy.Close)
	return &cloudNet{proxy: proxy, caPEM: caPEM}
}

// testCertificate returns cloudCA, PEM-encoded, and a server certificate
// it signed for names.
func testCertificate(t *testing.T, names []string) ([]byte, tls.Certificate) {
	t.Helper()
	if cloudCA.err != nil {
		t.Fatal(cloudCA.err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	template := &x509.Certificate{
		SerialNumber: big.NewInt(now.UnixNano()), Subject: pkix.Name{CommonName: names[0]}, DNSNames: names,
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, template, cloudCA.cert, &key.PublicKey, cloudCA.key)
	if err != nil {
		t.Fatal(err)
	}
	return cloudCA.pem, tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// tokenRegistry fronts an in-process registry and lets through only
// requests with the basic credentials a stand-in token service issued and
// that have not expired, as a cloud registry does.
type tokenRegistry struct {
	next     http.Handler
	mu       sync.Mutex
	valid    map[string]time.Time // "user:password" → expiry
	refusals int
}

// newTokenRegistry fronts the plain-HTTP registry at host.
func newTokenRegistry(host string) *tokenRegistry {
	return &tokenRegistry{
		next:  httputil.NewSingleHostReverseProxy(&url.URL{Scheme: "http", Host: host}),
		valid: map[string]time.Time{},
	}
}

// issue makes user and password valid until expiry.
func (r *tokenRegistry) issue(user, password string, expiry time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.valid[user+":"+password] = expiry
}

// refused is the number of requests refused with credentials.
func (r *tokenRegistry) refused() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.refusals
}

// ServeHTTP implements http.Handler.
func (r *tokenRegistry) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	user, password, ok := req.BasicAuth()
	r.mu.Lock()
	expiry, known := r.valid[user+":"+password]
	allowed := ok && known && time.Now().Before(expiry)
	if ok && !allowed {
		r.refusals++
	}
	r.mu.Unlock()
	if !allowed {
		w.Header().Set("WWW-Authenticate", `Basic realm="cloud registry"`)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = io.WriteString(w, `{"errors":[{"code":"UNAUTHORIZED","message":"the registry refused the token"}]}`)
		return
	}
	req.Header.Del("Authorization")
	r.next.ServeHTTP(w, req)
}

// newCloudRepository creates an ImageRepository of image with provider,
// reaching the cloud stand-ins through their proxy and CA.
func newCloudRepository(t *testing.T, ns string, cloud *cloudNet, image, provider string, mutate ...func(*imagev1.ImageRepository)) *imagev1.ImageRepository {
	t.Helper()
	ctx := context.Background()
	for _, s := range []*corev1.Secret{
		{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cloud-proxy"}, Data: map[string][]byte{"address": []byte(cloud.proxy.URL)}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cloud-ca"}, Data: map[string][]byte{"ca.crt": cloud.caPEM}},
	} {
		if err := k8s.Create(ctx, s); err != nil {
			t.Fatalf("creating secret: %v", err)
		}
	}
	return newRepository(t, ns, image, append([]func(*imagev1.ImageRepository){func(r *imagev1.ImageRepository) {
		r.Spec.Provider = provider
		r.Spec.ProxySecretRef = &meta.LocalObjectReference{Name: "cloud-proxy"}
		r.Spec.CertSecretRef = &meta.LocalObjectReference{Name: "cloud-ca"}
	}}, mutate...)...)
}

// waitForCloudScan waits until repo is Ready with a scan that found tags
// tags, through its cloud provider's credentials.
func waitForCloudScan(t *testing.T, repo *imagev1.ImageRepository, tags int) {
	t.Helper()
	NewWithT(t).Eventually(func(g Gomega) {
		c := readyCondition(g, repo)
		g.Expect(c.Status).To(Equal(metav1.ConditionTrue), c.Message)
		g.Expect(repo.Status.LastScanResult).NotTo(BeNil())
		g.Expect(repo.Status.LastScanResult.TagCount).To(Equal(tags))
	}).Should(Succeed())
}
