package registry

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
)

// get sends GET url and returns the response's status, its header and,
// of a tag list, the tags.
func get(t *testing.T, client *http.Client, url string) (status int, header http.Header, tags []string) {
	t.Helper()
	resp, err := client.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer func() { _ = resp.Body.Close() }()
	var list struct {
		Tags []string `json:"tags"`
	}
	if resp.StatusCode == http.StatusOK && strings.HasSuffix(resp.Request.URL.Path, "/tags/list") {
		if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
			t.Fatalf("decoding %s: %v", url, err)
		}
	}
	return resp.StatusCode, resp.Header, list.Tags
}

func TestTagListPagesWithLinkHeader(t *testing.T) {
	g := NewWithT(t)
	r := Start(t, WithTagPageSize(2))
	r.PushTags(t, "acme/app", "a", "b", "c", "d", "e")

	_, header, tags := get(t, http.DefaultClient, r.URL+"/v2/acme/app/tags/list")
	g.Expect(tags).To(Equal([]string{"a", "b"}))
	g.Expect(header.Get("Link")).To(Equal(`</v2/acme/app/tags/list?last=b&n=2>; rel="next"`))

	_, header, tags = get(t, http.DefaultClient, r.URL+"/v2/acme/app/tags/list?last=d&n=2")
	g.Expect(tags).To(Equal([]string{"e"}))
	g.Expect(header.Get("Link")).To(BeEmpty())

	_, _, tags = get(t, http.DefaultClient, r.URL+"/v2/acme/app/tags/list?last=e")
	g.Expect(tags).To(BeEmpty())
	g.Expect(r.Counts().TagListPages).To(Equal(3))
}

func TestPushedTagsInvalidateThePageCache(t *testing.T) {
	g := NewWithT(t)
	r := Start(t)
	r.PushImage(t, "acme/app", "1.0.0")
	_, _, tags := get(t, http.DefaultClient, r.URL+"/v2/acme/app/tags/list")
	g.Expect(tags).To(Equal([]string{"1.0.0"}))

	d1 := r.PushImage(t, "acme/app", "1.1.0")
	d2 := r.PushImage(t, "acme/app", "1.2.0")
	g.Expect(d1).NotTo(Equal(d2))
	_, _, tags = get(t, http.DefaultClient, r.URL+"/v2/acme/app/tags/list")
	g.Expect(tags).To(Equal([]string{"1.0.0", "1.1.0", "1.2.0"}))
}

func TestBasicAuthChallenge(t *testing.T) {
	g := NewWithT(t)
	r := Start(t, WithBasicAuth("bot", "s3cret"))
	status, header, _ := get(t, http.DefaultClient, r.URL+"/v2/")
	g.Expect(status).To(Equal(http.StatusUnauthorized))
	g.Expect(header.Get("WWW-Authenticate")).To(HavePrefix("Basic "))

	req, err := http.NewRequest(http.MethodGet, r.URL+"/v2/", nil)
	g.Expect(err).NotTo(HaveOccurred())
	req.SetBasicAuth("bot", "s3cret")
	ok, err := http.DefaultClient.Do(req)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ok.Body.Close()).To(Succeed())
	g.Expect(ok.StatusCode).To(Equal(http.StatusOK))
	g.Expect(r.Counts()).To(Equal(Counts{Total: 2, Ping: 2, Unauthorized: 1}))
}

func TestThrottleNext(t *testing.T) {
	g := NewWithT(t)
	r := Start(t)
	r.ThrottleNext(2, "3")
	for range 2 {
		status, header, _ := get(t, http.DefaultClient, r.URL+"/v2/")
		g.Expect(status).To(Equal(http.StatusTooManyRequests))
		g.Expect(header.Get("Retry-After")).To(Equal("3"))
	}
	status, _, _ := get(t, http.DefaultClient, r.URL+"/v2/")
	g.Expect(status).To(Equal(http.StatusOK))
	g.Expect(r.Counts().Throttled).To(Equal(2))
}

func TestTLSWithClientCertificate(t *testing.T) {
	g := NewWithT(t)
	r := Start(t, WithClientCertificates())
	pool := x509.NewCertPool()
	g.Expect(pool.AppendCertsFromPEM(r.CACertPEM)).To(BeTrue())

	noCert := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	resp, err := noCert.Get(r.URL + "/v2/")
	g.Expect(err).To(HaveOccurred())
	if err == nil {
		g.Expect(resp.Body.Close()).To(Succeed())
	}

	cert, err := tls.X509KeyPair(r.ClientCertPEM, r.ClientKeyPEM)
	g.Expect(err).NotTo(HaveOccurred())
	withCert := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{cert}}}}
	resp, err = withCert.Get(r.URL + "/v2/")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(resp.Body.Close()).To(Succeed())
	g.Expect(resp.StatusCode).To(Equal(http.StatusOK))
}

func TestHoldCountsRequestsInFlight(t *testing.T) {
	g := NewWithT(t)
	r := Start(t)
	release := r.Hold()
	done := make(chan struct{})
	for range 3 {
		go func() {
			defer func() { done <- struct{}{} }()
			resp, err := http.Get(r.URL + "/v2/")
			if err == nil {
				_ = resp.Body.Close()
			}
		}()
	}
	g.Eventually(r.InFlight).Should(Equal(3))
	release()
	for range 3 {
		<-done
	}
	g.Expect(r.InFlight()).To(Equal(0))
	g.Expect(r.MaxInFlight()).To(Equal(3))
}

func BenchmarkPushTags10000(b *testing.B) {
	tags := make([]string, 10000)
	for i := range tags {
		tags[i] = fmt.Sprintf("1.0.%d", i)
	}
	for b.Loop() {
		r := Start(b)
		r.PushTags(b, "acme/app", tags...)
	}
}
