package registry

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/random"
	. "github.com/onsi/gomega"

	"github.com/uprev-dev/uprev/internal/outbound"
	testproxy "github.com/uprev-dev/uprev/internal/testenv/proxy"
	testregistry "github.com/uprev-dev/uprev/internal/testenv/registry"
)

// recorder is a server that an attacker controls: it records every
// request and the Authorization headers it is sent, and answers as
// handler says (by default 401 with a Basic challenge, which makes a client
// send whatever credentials it has for the host).
type recorder struct {
	srv      *httptest.Server
	mu       sync.Mutex
	requests int
	auth     []string
}

func startRecorder(t *testing.T, handler http.HandlerFunc) *recorder {
	t.Helper()
	r := &recorder{}
	if handler == nil {
		handler = func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("WWW-Authenticate", `Basic realm="tenant"`)
			w.WriteHeader(http.StatusUnauthorized)
		}
	}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.mu.Lock()
		r.requests++
		if a := req.Header.Get("Authorization"); a != "" {
			r.auth = append(r.auth, a)
		}
		r.mu.Unlock()
		handler(w, req)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *recorder) host() string { return strings.TrimPrefix(r.srv.URL, "http://") }

func (r *recorder) seen() (int, []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.requests, append([]string(nil), r.auth...)
}

// managerToken stands for the credentials a cloud issued for its registry.
var managerToken = &authn.Basic{Username: "oauth2accesstoken", Password: "ya29.manager-token"}

// TestCloudCredentialsGoOnlyToTheirRegistry: credentials issued for
// europe-docker.pkg.dev are not offered to any other host, here a tenant's
// server that asks for them.
func TestCloudCredentialsGoOnlyToTheirRegistry(t *testing.T) {
	g := NewWithT(t)
	tenant := startRecorder(t, nil)
	c := newClient(t, ScannerOptions{}, Access{Provider: "gcp", CloudCredentials: managerToken, CloudRegistry: "europe-docker.pkg.dev"})

	_, err := c.ListTags(t.Context(), tenant.host()+"/acme/agent")
	g.Expect(err).To(MatchError(ErrUnauthorized))
	_, err = c.Digest(t.Context(), tenant.host()+"/acme/agent", "1.0.0")
	g.Expect(err).To(HaveOccurred())
	requests, auth := tenant.seen()
	g.Expect(requests).To(BeNumerically(">", 0))
	g.Expect(auth).To(BeEmpty(), "the cloud token went to another host")
}

// TestCloudProviderRefusesInsecureCAAndProxy: a cloud token never goes
// over plain HTTP, to a server trusted through a tenant's CA, or through a
// tenant's proxy (Flux's rule); such settings are a configuration error.
func TestCloudProviderRefusesInsecureCAAndProxy(t *testing.T) {
	proxy := testproxy.Start(t, "u", "p")
	r := testregistry.Start(t, testregistry.WithTLS())
	for name, access := range map[string]Access{
		"insecure":       {Insecure: true},
		"certSecretRef":  {CertSecret: map[string][]byte{"ca.crt": r.CACertPEM}},
		"proxySecretRef": {ProxySecret: map[string][]byte{"address": []byte(proxy.URL), "username": []byte("u"), "password": []byte("p")}},
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			access.Provider = "gcp"
			access.CloudCredentials = managerToken
			access.CloudRegistry = "europe-docker.pkg.dev"
			_, err := NewScanner(ScannerOptions{}).Client(t.Context(), access)
			g.Expect(err).To(MatchError(ErrUnsafeCloudSettings))
			g.Expect(err).To(MatchError(ErrInvalidConfig))
			g.Expect(err.Error()).To(ContainSubstring(name))
		})
	}
	NewWithT(t).Expect(proxy.Forwarded()).To(BeZero())
}

// TestTagListLinkToAnotherHostIsRefused: a registry's Link header cannot
// send the next page request to another host.
func TestTagListLinkToAnotherHostIsRefused(t *testing.T) {
	g := NewWithT(t)
	other := startRecorder(t, func(w http.ResponseWriter, _ *http.Request) {
		_, _ = fmt.Fprint(w, `{"name":"acme/agent","tags":["2.0.0"]}`)
	})
	reg := startRecorder(t, func(w http.ResponseWriter, req *http.Request) {
		if req.URL.Path == "/v2/acme/agent/tags/list" {
			w.Header().Set("Link", fmt.Sprintf(`<http://%s/v2/acme/agent/tags/list?last=1.0.0>; rel="next"`, other.host()))
			_, _ = fmt.Fprint(w, `{"name":"acme/agent","tags":["1.0.0"]}`)
		}
	})
	c := newClient(t, ScannerOptions{}, Access{})
	_, err := c.ListTags(t.Context(), reg.host()+"/acme/agent")
	g.Expect(err).To(MatchError(ErrInvalidConfig))
	g.Expect(err.Error()).To(ContainSubstring("another host"))
	requests, _ := other.seen()
	g.Expect(requests).To(BeZero(), "the Link header sent a request to another host")
}

// TestErrorBodyIsTrimmed: the 64 KiB body of an error answer is not
// copied whole into the error, which ends up in status.
func TestErrorBodyIsTrimmed(t *testing.T) {
	g := NewWithT(t)
	body := strings.Repeat("internal address 10.0.0.7 says:\nsecret-ish line\n", 64<<10/48)
	reg := startRecorder(t, func(w http.ResponseWriter, req *http.Request) {
		if req.URL.Path == "/v2/" {
			return
		}
		w.WriteHeader(http.StatusForbidden)
		_, _ = fmt.Fprint(w, body)
	})
	c := newClient(t, ScannerOptions{}, Access{})
	_, err := c.ListTags(t.Context(), reg.host()+"/acme/agent")
	g.Expect(err).To(MatchError(ErrUnauthorized))
	g.Expect(len(err.Error())).To(BeNumerically("<=", 512), err.Error())
	g.Expect(err.Error()).NotTo(ContainSubstring("\n"))
}

// TestDenyCIDRsRefuseALoopbackRegistry: with 127.0.0.0/8 denied, a
// registry on 127.0.0.1 gets no request, whatever the image says.
func TestDenyCIDRsRefuseALoopbackRegistry(t *testing.T) {
	g := NewWithT(t)
	r := testregistry.Start(t)
	r.PushTags(t, "acme/agent", "1.0.0")
	deny := outbound.Denylist{netip.MustParsePrefix("127.0.0.0/8")}
	c := newClient(t, ScannerOptions{DenyCIDRs: deny}, Access{})
	_, err := c.ListTags(t.Context(), r.Image("acme/agent"))
	g.Expect(err).To(MatchError(outbound.ErrDenied))
	g.Expect(err).To(MatchError(ErrInvalidConfig))
	_, err = c.ListTags(t.Context(), "localhost:"+strings.Split(r.Host(), ":")[1]+"/acme/agent")
	g.Expect(err).To(MatchError(outbound.ErrDenied))
	g.Expect(r.Counts().Total).To(BeZero())

	// Another range leaves it reachable.
	c = newClient(t, ScannerOptions{DenyCIDRs: outbound.Denylist{netip.MustParsePrefix("169.254.0.0/16")}}, Access{})
	_, err = c.ListTags(t.Context(), r.Image("acme/agent"))
	g.Expect(err).NotTo(HaveOccurred())
}

// TestTagListBounds: a registry answer past the tag, byte or page bound is
// an error that names the bound, not an unbounded read.
func TestTagListBounds(t *testing.T) {
	r := testregistry.Start(t, testregistry.WithTagPageSize(100))
	r.PushTags(t, "acme/agent", semverTags(350)...)
	for name, opts := range map[string]ScannerOptions{
		"tags":  {MaxTags: 300},
		"bytes": {MaxTagListBytes: 2 << 10},
		"pages": {MaxTagListPages: 3},
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			c := newClient(t, opts, Access{})
			_, err := c.ListTags(t.Context(), r.Image("acme/agent"))
			g.Expect(err).To(MatchError(ErrTagListTooLarge))
		})
	}
	g := NewWithT(t)
	tags, err := newClient(t, ScannerOptions{MaxTags: 350, MaxTagListPages: 4}, Access{}).ListTags(t.Context(), r.Image("acme/agent"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(tags).To(HaveLen(350))
}

// TestOneHugeTagPageIsCutShort: a single page larger than the byte bound
// is not read whole.
func TestOneHugeTagPageIsCutShort(t *testing.T) {
	g := NewWithT(t)
	var sent atomic.Int64
	reg := startRecorder(t, func(w http.ResponseWriter, req *http.Request) {
		if req.URL.Path != "/v2/acme/agent/tags/list" {
			return
		}
		_, _ = fmt.Fprint(w, `{"name":"acme/agent","tags":[`)
		for i := range 1_000_000 {
			n, err := fmt.Fprintf(w, "%q,", fmt.Sprintf("1.0.%d", i))
			sent.Add(int64(n))
			if err != nil {
				return
			}
		}
		_, _ = fmt.Fprint(w, `"1.0.0"]}`)
	})
	c := newClient(t, ScannerOptions{MaxTagListBytes: 1 << 20}, Access{})
	_, err := c.ListTags(t.Context(), reg.host()+"/acme/agent")
	g.Expect(err).To(MatchError(ErrTagListTooLarge))
}

// TestArtifactHonoursTheTimeout: an artifact pull from a registry that
// stops answering ends with the Access timeout.
func TestArtifactHonoursTheTimeout(t *testing.T) {
	g := NewWithT(t)
	r := testregistry.Start(t)
	img, err := random.Image(64, 1)
	g.Expect(err).NotTo(HaveOccurred())
	digest := r.Push(t, "acme/agent", "1.0.0", img)
	c := newClient(t, ScannerOptions{}, Access{Timeout: time.Second})
	_, err = c.Digest(t.Context(), r.Image("acme/agent"), "1.0.0")
	g.Expect(err).NotTo(HaveOccurred())

	release := r.Hold()
	defer release()
	done := make(chan error, 1)
	go func() {
		done <- c.ReadArtifact(t.Context(), r.Image("acme/agent"), digest, func(img v1.Image) error {
			_, err := img.RawManifest()
			return err
		})
	}()
	g.Eventually(done, 10*time.Second).Should(Receive(MatchError(ErrTransient)))
}

// TestSlotsAreKeyedByProxy: a client whose proxy never answers does not
// take the request slots of clients reaching the same registry directly.
func TestSlotsAreKeyedByProxy(t *testing.T) {
	g := NewWithT(t)
	r := testregistry.Start(t)
	r.PushTags(t, "acme/agent", "1.0.0")
	tarpit := make(chan struct{})
	proxy := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { <-tarpit }))
	t.Cleanup(proxy.Close)
	t.Cleanup(func() { close(tarpit) })

	s := NewScanner(ScannerOptions{MaxConcurrentPerHost: 1})
	slow, err := s.Client(t.Context(), Access{ProxySecret: map[string][]byte{"address": []byte(proxy.URL)}, Timeout: 30 * time.Second})
	g.Expect(err).NotTo(HaveOccurred())
	go func() { _, _ = slow.ListTags(t.Context(), r.Image("acme/agent")) }()
	g.Eventually(func() int {
		return s.slots.InUse(outbound.HostKey(r.Host(), strings.TrimPrefix(proxy.URL, "http://")))
	}).Should(Equal(1))

	fast, err := s.Client(t.Context(), Access{Timeout: 5 * time.Second})
	g.Expect(err).NotTo(HaveOccurred())
	tags, err := fast.ListTags(t.Context(), r.Image("acme/agent"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(tags).To(ConsistOf("1.0.0"))
}

// TestListTagsDeadlineNamesTheHost: a registry that stops answering ends a
// tag list at the Access timeout, with an error naming its host.
func TestListTagsDeadlineNamesTheHost(t *testing.T) {
	g := NewWithT(t)
	r := testregistry.Start(t)
	r.PushTags(t, "acme/agent", "1.0.0")
	release := r.Hold()
	defer release()
	c := newClient(t, ScannerOptions{}, Access{Timeout: time.Second})
	start := time.Now()
	_, err := c.ListTags(t.Context(), r.Image("acme/agent"))
	g.Expect(err).To(MatchError(ErrTransient))
	g.Expect(err.Error()).To(ContainSubstring(r.Host()))
	g.Expect(time.Since(start)).To(BeNumerically("<", 10*time.Second))
}
