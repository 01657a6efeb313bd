package cli

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"regexp"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	clocktesting "k8s.io/utils/clock/testing"

	uprevv1 "github.com/uprev-dev/uprev/api/v1alpha1"
	"github.com/uprev-dev/uprev/internal/testenv/syncbuf"
)

// dashboardServing is the line `uprev dashboard` prints once it listens:
// its address, and what follows the path (?token=...).
var dashboardServing = regexp.MustCompile(`on http://([^/ ]+)/(\S*) \(Ctrl-C stops it\)`)

// startDashboard runs `uprev dashboard args...` until the test ends and
// returns its port and what its address carries after the path.
func startDashboard(t *testing.T, args ...string) (port, query string) {
	t.Helper()
	g := NewWithT(t)
	ctx, cancel := context.WithCancel(context.Background())
	var stdout, stderr syncbuf.Buffer
	done := make(chan int)
	go func() {
		done <- Execute(ctx, append([]string{"dashboard", kubeconfigFlag}, args...), Options{
			IOStreams: genericiooptions.IOStreams{In: &bytes.Buffer{}, Out: &stdout, ErrOut: &stderr},
			Clock:     clocktesting.NewFakeClock(now),
		})
	}()
	t.Cleanup(func() {
		cancel()
		g.Eventually(done).WithTimeout(10 * time.Second).Should(Receive(Equal(0)))
	})
	g.Eventually(stdout.String).WithTimeout(10*time.Second).Should(MatchRegexp(dashboardServing.String()), "stderr: %s", stderr.String())
	m := dashboardServing.FindStringSubmatch(stdout.String())
	_, port, err := net.SplitHostPort(m[1])
	g.Expect(err).NotTo(HaveOccurred())
	return port, m[2]
}

// dashboardGet sends GET path to the dashboard on 127.0.0.1:port with the
// Host header host and the headers of header, following no redirect.
func dashboardGet(t *testing.T, port, path, host string, header http.Header) (reply, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, "http://127.0.0.1:"+port+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Host = host
	for k, v := range header {
		req.Header[k] = v
	}
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return reply{StatusCode: resp.StatusCode, Header: resp.Header}, string(body)
}

// reply is what dashboardGet keeps of a response, whose body it read and closed.
type reply struct {
	StatusCode int
	Header     http.Header
}

// Cookies returns the cookies the response set.
func (r reply) Cookies() []*http.Cookie { return (&http.Response{Header: r.Header}).Cookies() }

// createPrivateSync creates in namespace ns the Sync "private", whose Git
// URL names the namespace.
func createPrivateSync(t *testing.T, ns string) {
	t.Helper()
	sync := &uprevv1.Sync{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "private"},
		Spec: uprevv1.SyncSpec{
			Interval: metav1.Duration{Duration: time.Hour},
			Git:      uprevv1.GitSource{URL: "https://git.example.com/" + ns + ".git", Ref: uprevv1.GitRef{Branch: "main"}},
			Targets:  []uprevv1.Target{{Name: "eu-1"}},
		},
	}
	if err := k8s.Create(t.Context(), sync); err != nil {
		t.Fatalf("creating Sync %s/private: %v", ns, err)
	}
}

// TestDashboardServesItsNamespaceOnly: `uprev dashboard -n A` refuses
// GET /object/Sync/B/private, and serves A's own.
func TestDashboardServesItsNamespaceOnly(t *testing.T) {
	g := NewWithT(t)
	a := newNamespace(t)
	b := createNamespace(t, a+"-b")
	createPrivateSync(t, a)
	createPrivateSync(t, b)
	port, _ := startDashboard(t, "-n", a, "--address", "127.0.0.1:0")
	resp, body := dashboardGet(t, port, "/object/Sync/"+b+"/private", "127.0.0.1:"+port, nil)
	g.Expect(resp.StatusCode).To(Equal(http.StatusForbidden), body)
	g.Expect(body).NotTo(ContainSubstring(b + ".git"))
	resp, body = dashboardGet(t, port, "/object/Sync/"+a+"/private", "127.0.0.1:"+port, nil)
	g.Expect(resp.StatusCode).To(Equal(http.StatusOK), body)
	g.Expect(body).To(ContainSubstring(a + ".git"))
}

// TestDashboardOnANonLoopbackAddress is someone on another machine
// reaching `uprev dashboard --address 0.0.0.0:0` with `Host: localhost`:
// refused without the token it printed at start; the printed address sets
// the cookie that later requests carry, and a bearer token works too.
func TestDashboardOnANonLoopbackAddress(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	createPrivateSync(t, ns)
	port, query := startDashboard(t, "-n", ns, "--address", "0.0.0.0:0")
	for _, path := range []string{"/", "/events", "/object/Sync/" + ns + "/private", "/web/dashboard.js"} {
		resp, body := dashboardGet(t, port, path, "localhost:"+port, nil)
		g.Expect(resp.StatusCode).To(Equal(http.StatusUnauthorized), "%s: %s", path, body)
		g.Expect(body).NotTo(ContainSubstring(ns + ".git"))
	}
	resp, body := dashboardGet(t, port, "/?token=wrong", "localhost:"+port, nil)
	g.Expect(resp.StatusCode).To(Equal(http.StatusUnauthorized), body)

	g.Expect(query).To(MatchRegexp(`^\?token=[A-Za-z0-9_-]{43}$`), "the printed address carries the token")
	token := query[len("?token="):]
	resp, _ = dashboardGet(t, port, "/"+query, "localhost:"+port, nil)
	g.Expect(resp.StatusCode).To(Equal(http.StatusSeeOther))
	g.Expect(resp.Header.Get("Location")).To(Equal("/"), "the token leaves the address bar")
	cookies := resp.Cookies()
	g.Expect(cookies).To(HaveLen(1))
	g.Expect(cookies[0].HttpOnly).To(BeTrue())
	resp, body = dashboardGet(t, port, "/object/Sync/"+ns+"/private", "localhost:"+port, http.Header{"Cookie": {cookies[0].Name + "=" + cookies[0].Value}})
	g.Expect(resp.StatusCode).To(Equal(http.StatusOK), body)
	g.Expect(body).To(ContainSubstring(ns + ".git"))
	resp, body = dashboardGet(t, port, "/object/Sync/"+ns+"/private", "127.0.0.1:"+port, http.Header{"Authorization": {"Bearer " + token}})
	g.Expect(resp.StatusCode).To(Equal(http.StatusOK), body)
	resp, body = dashboardGet(t, port, "/", "attacker.example:"+port, http.Header{"Authorization": {"Bearer " + token}})
	g.Expect(resp.StatusCode).To(Equal(http.StatusForbidden), "a DNS name is refused, token or not: %s", body)
}
