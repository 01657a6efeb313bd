package webhook_test

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/uprev-dev/uprev/internal/webhook"
)

// startSlowRequest opens a connection to srv and sends the head of a POST
// to path announcing a body of length bytes, with the header lines
// headers, and no body: the body of a tenant's (or anyone's) slow client.
// It returns the connection, closed when the test ends.
func startSlowRequest(t *testing.T, srv *httptest.Server, path string, length int, headers ...string) net.Conn {
	t.Helper()
	u, err := url.Parse(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := net.Dial("tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	head := fmt.Sprintf("POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n", path, u.Host, length)
	for _, h := range headers {
		head += h + "\r\n"
	}
	if _, err := conn.Write([]byte(head + "\r\n")); err != nil {
		t.Fatal(err)
	}
	return conn
}

// statusLine reads the status line of the answer on conn, waiting at most
// wait.
func statusLine(conn net.Conn, wait time.Duration) (string, error) {
	if err := conn.SetReadDeadline(time.Now().Add(wait)); err != nil {
		return "", err
	}
	line, err := bufio.NewReader(conn).ReadString('\n')
	return strings.TrimSpace(line), err
}

// TestUnauthenticatedRequestIsRefusedBeforeItsBody: a request without
// credentials, or with a wrong token in a header or the path, is answered
// 401 before any of its body is read: a client announcing 1 MiB and
// sending nothing gets its answer at once.
func TestUnauthenticatedRequestIsRefusedBeforeItsBody(t *testing.T) {
	cp := startControlPlane(t)
	ns := cp.newNamespace(t, token)
	srv := httptest.NewServer(cp.newReceiver().Handler())
	t.Cleanup(srv.Close)
	for name, tc := range map[string]struct {
		path    string
		headers []string
	}{
		"no credentials":     {path: "/hooks/registry/" + ns},
		"wrong bearer":       {path: "/hooks/registry/" + ns, headers: []string{"Authorization: Bearer wrong"}},
		"wrong GitLab token": {path: "/hooks/git/" + ns, headers: []string{"X-Gitlab-Token: wrong"}},
		"wrong path key":     {path: "/hooks/git/" + ns + "/" + strings.Repeat("0", 64)},
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			conn := startSlowRequest(t, srv, tc.path, webhook.MaxBodyBytes, tc.headers...)
			line, err := statusLine(conn, 3*time.Second)
			g.Expect(err).NotTo(HaveOccurred(), "answered before the body was sent")
			g.Expect(line).To(HavePrefix("HTTP/1.1 401"))
		})
	}
}

// TestReceiverCapsConcurrentRequests: past MaxConcurrentRequests requests
// in progress (here signed ones whose body never comes), the next is
// answered 503 with Retry-After at once; once they end, notifications are
// served again.
func TestReceiverCapsConcurrentRequests(t *testing.T) {
	g := NewWithT(t)
	cp := startControlPlane(t)
	ns := cp.newNamespace(t, token)
	cp.newImageRepository(t, ns, "agent", "registry.example.com/acme/agent")
	srv := httptest.NewServer(cp.newReceiver().Handler())
	t.Cleanup(srv.Close)
	// Slow requests fill the slots; once they are all taken, the next slow
	// request is answered 503 at once (until then each one takes a slot).
	// The probes announce 1 MiB: for a smaller body, Go's server reads what
	// the handler left unread before it answers.
	var slow []net.Conn
	for range webhook.MaxConcurrentRequests {
		slow = append(slow, startSlowRequest(t, srv, "/hooks/registry/"+ns, 100, webhook.SignatureHeader+": sha256=00"))
	}
	g.Eventually(func() string {
		conn := startSlowRequest(t, srv, "/hooks/registry/"+ns, webhook.MaxBodyBytes, webhook.SignatureHeader+": sha256=00")
		slow = append(slow, conn)
		line, _ := statusLine(conn, 500*time.Millisecond)
		return line
	}).WithTimeout(30*time.Second).Should(HavePrefix("HTTP/1.1 503"), "the cap refuses the next request")
	bearer := map[string]string{"Authorization": "Bearer " + token}
	body := pushNotification("registry.example.com", "acme/agent", "1.0.0")
	req, err := http.NewRequest(http.MethodPost, srv.URL+"/hooks/registry/"+ns, strings.NewReader(string(body)))
	g.Expect(err).NotTo(HaveOccurred())
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := srv.Client().Do(req)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(resp.Body.Close()).To(Succeed())
	g.Expect(resp.StatusCode).To(Equal(http.StatusServiceUnavailable), "a good notification too, while the slots are taken")
	g.Expect(resp.Header.Get("Retry-After")).NotTo(BeEmpty())

	for _, c := range slow {
		g.Expect(c.Close()).To(Succeed())
	}
	g.Eventually(func() int {
		code, _ := post(t, srv.Client(), srv.URL+"/hooks/registry/"+ns, body, bearer)
		return code
	}).WithTimeout(30 * time.Second).Should(Equal(http.StatusAccepted))
}
