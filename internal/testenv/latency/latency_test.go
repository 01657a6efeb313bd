package latency

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

// TestProxyDelaysEachWay: a request through the proxy gets its answer
// intact, no sooner than twice the delay (request and answer) after it
// was sent.
func TestProxyDelaysEachWay(t *testing.T) {
	g := NewWithT(t)
	body := strings.Repeat("fleet ", 100_000)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, body) }))
	defer srv.Close()
	const delay = 40 * time.Millisecond
	p := Start(t, strings.TrimPrefix(srv.URL, "http://"), delay)

	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	start := time.Now()
	resp, err := client.Get("http://" + p.Addr())
	g.Expect(err).NotTo(HaveOccurred())
	got, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(got)).To(Equal(body))
	g.Expect(time.Since(start)).To(BeNumerically(">=", 2*delay), "the connection's setup and the request each way")
}
