package controllers

import (
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
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// cloudNet stands in for the cloud's fixed hostnames (the registry, and
// token services the library reaches over HTTPS): an HTTP proxy that
// tunnels every CONNECT to one TLS server, which serves each hostname with
// the handler a test registered under a certificate of cloudCA. It is the
// proxy of the whole test process (HTTPS_PROXY, set by runSuite before any
// HTTP), as an operator's proxy would be; loopback addresses never go
// through it. ImageRepositories with a cloud provider may not name a proxy
// or a CA of their own.
type cloudNet struct {
	proxy *httptest.Server
	mu    sync.Mutex
	hosts map[string]http.Handler
	certs map[string]*tls.Certificate
}

// theCloud is the suite's cloudNet.
var theCloud = &cloudNet{hosts: map[string]http.Handler{}, certs: map[string]*tls.Certificate{}}

// startCloudNet starts theCloud and makes it the process's HTTPS proxy.
func startCloudNet() (stop func(), err error) {
	backend := httptest.NewUnstartedServer(http.HandlerFunc(theCloud.serve))
	backend.TLS = &tls.Config{GetCertificate: theCloud.certificate, MinVersion: tls.VersionTLS12}
	backend.StartTLS()
	backendAddr := backend.Listener.Addr().String()
	theCloud.proxy = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
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
	stop = func() {
		theCloud.proxy.Close()
		backend.Close()
	}
	for _, env := range []string{"HTTPS_PROXY", "https_proxy"} {
		if err := os.Setenv(env, theCloud.proxy.URL); err != nil {
			return stop, err
		}
	}
	return stop, nil
}

// serve hands a request to the handler of its host.
func (c *cloudNet) serve(w http.ResponseWriter, r *http.Request) {
	host, _, err := net.SplitHostPort(r.Host)
	if err != nil {
		host = r.Host
	}
	c.mu.Lock()
	h, ok := c.hosts[host]
	c.mu.Unlock()
	if !ok {
		http.Error(w, "unknown host "+host, http.StatusBadGateway)
		return
	}
	h.ServeHTTP(w, r)
}

// certificate returns a certificate of cloudCA for the name the client
// asked for.
func (c *cloudNet) certificate(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if cert, ok := c.certs[hello.ServerName]; ok {
		return cert, nil
	}
	cert, err := serverCertificate(hello.ServerName)
	if err != nil {
		return nil, err
	}
	c.certs[hello.ServerName] = cert
	return cert, nil
}

// newCloudNet serves hosts on theCloud until the test ends.
func newCloudNet(t *testing.T, hosts map[string]http.Handler) *cloudNet {
	t.Helper()
	theCloud.mu.Lock()
	defer theCloud.mu.Unlock()
	for h, handler := range hosts {
		theCloud.hosts[h] = handler
	}
	t.Cleanup(func() {
		theCloud.mu.Lock()
		defer theCloud.mu.Unlock()
		for h := range hosts {
			delete(theCloud.hosts, h)
		}
	})
	return theCloud
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

// serverCertificate returns a server certificate cloudCA signed for name.
func serverCertificate(name string) (*tls.Certificate, error) {
	if cloudCA.err != nil {
		return nil, cloudCA.err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	template := &x509.Certificate{
		SerialNumber: big.NewInt(now.UnixNano()), Subject: pkix.Name{CommonName: name}, DNSNames: []string{name},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, template, cloudCA.cert, &key.PublicKey, cloudCA.key)
	if err != nil {
		return nil, err
	}
	return &tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, nil
}

// tokenRegistry fronts an in-process registry and lets through only
// requests with the basic credentials a stand-in token service issued and
// that have not expired, as a cloud registry does.
type tokenRegistry struct {
	next http.Handler
	// refuseAll refuses every token, as a registry does whose reader role
	// the identity lacks.
	refuseAll bool
	mu        sync.Mutex
	refusals  int
}

// issuedCredentials are the credentials every stand-in token service has
// issued, "user:password" → expiry: valid at every tokenRegistry, because
// one manager, whose token cache outlives a test, serves the whole suite,
// as one cloud's tokens are valid at all its registries.
var issuedCredentials = struct {
	sync.Mutex
	valid map[string]time.Time
}{valid: map[string]time.Time{}}

// newTokenRegistry fronts the plain-HTTP registry at host.
func newTokenRegistry(host string) *tokenRegistry {
	return &tokenRegistry{
		next: httputil.NewSingleHostReverseProxy(&url.URL{Scheme: "http", Host: host}),
	}
}

// issue makes user and password valid until expiry.
func (r *tokenRegistry) issue(user, password string, expiry time.Time) {
	issuedCredentials.Lock()
	defer issuedCredentials.Unlock()
	issuedCredentials.valid[user+":"+password] = expiry
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
	issuedCredentials.Lock()
	expiry, known := issuedCredentials.valid[user+":"+password]
	issuedCredentials.Unlock()
	r.mu.Lock()
	allowed := ok && known && time.Now().Before(expiry) && !r.refuseAll
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
// which reaches the cloud stand-ins through the process's proxy (cloud is
// the network the test registered its stand-ins on).
func newCloudRepository(t *testing.T, ns string, _ *cloudNet, image, provider string, mutate ...func(*imagev1.ImageRepository)) *imagev1.ImageRepository {
	t.Helper()
	return newRepository(t, ns, image, append([]func(*imagev1.ImageRepository){func(r *imagev1.ImageRepository) {
		r.Spec.Provider = provider
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
