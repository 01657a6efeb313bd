package dashboard

import (
	"context"
	"html"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	iacv1 "github.com/fluxcd/image-automation-controller/api/v1"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	uprevv1 "github.com/uprev-dev/uprev/api/v1alpha1"
)

// releaseCommands matches the release commands the page shows.
var releaseCommands = regexp.MustCompile(`<code>(uprev release-hold [^<]*)</code>`)

// runInShell runs command with sh -c in a new directory, with an `uprev`
// on PATH that does nothing, and returns the directory.
func runInShell(t *testing.T, command string) string {
	t.Helper()
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	if err := os.Mkdir(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bin, "uprev"), []byte("#!/bin/sh\nexit 0\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	work := filepath.Join(dir, "work")
	if err := os.Mkdir(work, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("sh", "-c", command)
	cmd.Dir = work
	cmd.Env = []string{"PATH=" + bin + ":/usr/bin:/bin"}
	out, err := cmd.CombinedOutput()
	t.Logf("sh -c %q: %v %s", command, err, out)
	return work
}

// TestReleaseCommandOfATenantsHold is a tenant who writes the holds
// annotation of its ImageUpdateAutomation with a policy named
// `app; touch x; #`: the page shows no command that, pasted into a shell,
// runs anything but `uprev release-hold`; a command for a policy whose
// name is no valid object name is refused, and says why.
func TestReleaseCommandOfATenantsHold(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace("tenant-hold")
	createFleet(t, ns)
	flux := &iacv1.ImageUpdateAutomation{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "auto", Annotations: map[string]string{
			uprevv1.HoldsAnnotation: uprevv1.EncodeHolds([]uprevv1.Hold{
				{Policy: ns + "/app; touch x; #", Version: "1.0.0", RevertedIn: revert},
				{Policy: ns + "/$(touch x)", Version: "1.0.0", RevertedIn: revert},
				{Policy: "`touch x`/app", Version: "1.0.0", RevertedIn: revert},
			}),
		}},
		Spec: iacv1.ImageUpdateAutomationSpec{
			SourceRef: iacv1.CrossNamespaceSourceReference{Kind: "GitRepository", Name: "flux-system"},
			Interval:  metav1.Duration{Duration: time.Hour},
		},
	}
	g.Expect(k8s.Create(t.Context(), flux)).To(Succeed())
	ts := startServer(t, ns)
	code, page := get(t, ts, "/", "")
	g.Expect(code).To(Equal(http.StatusOK))
	g.Expect(page).To(ContainSubstring(`data-automation="` + ns + `/auto"`))
	commands := releaseCommands.FindAllStringSubmatch(page, -1)
	g.Expect(commands).NotTo(BeEmpty(), "the fixture's own hold has a command")
	var ranTheTenants []string
	for _, c := range commands {
		command := html.UnescapeString(c[1])
		if _, err := os.Stat(filepath.Join(runInShell(t, command), "x")); err == nil {
			ranTheTenants = append(ranTheTenants, command)
		}
	}
	g.Expect(ranTheTenants).To(BeEmpty(), "commands of the page that ran the tenant's")
	g.Expect(page).To(ContainSubstring(`<code>uprev release-hold fleet web -n `+ns+`</code>`), "a valid hold keeps its command")
	g.Expect(page).To(ContainSubstring(`<span class="refused">No release command is shown: policy name &#34;app; touch x; #&#34; is not a valid object name: `), "the page says why")
}

// TestShellQuote gives every argument shellQuote quotes to a real sh -c:
// the shell gets each back as one word, exactly, and runs nothing of it.
func TestShellQuote(t *testing.T) {
	g := NewWithT(t)
	for _, arg := range []string{
		"app", "team-a/app", "app; touch x; #", "$(touch x)", "`touch x`", "a'b; touch x; 'c", `"; touch x; "`,
		"x\ny; touch x", "line\ntouch x", "*", "~", "", "-n", "a b", "|| touch x", "&& touch x &", "> x", "!x", "{a,b}",
	} {
		dir := t.TempDir()
		cmd := exec.Command("sh", "-c", `printf '[%s]\n' `+shellQuote(arg))
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		g.Expect(err).NotTo(HaveOccurred(), "%q: %s", arg, out)
		g.Expect(string(out)).To(Equal("["+arg+"]\n"), "%q comes back as one word", arg)
		g.Expect(filepath.Join(dir, "x")).NotTo(BeAnExistingFile(), "%q ran", arg)
	}
	command, err := ReleaseCommand("team-a", "auto", "team-a/app")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(command).To(Equal("uprev release-hold auto app -n team-a"))
	command, err = ReleaseCommand("team-a", "auto", "team-b/app")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(command).To(Equal("uprev release-hold auto team-b/app -n team-a"))
	for _, policy := range []string{"team-a/app; touch x; #", "team-a/$(touch x)", "`touch x`/app", "team-a/-n", "team-a/", "a/b/c"} {
		_, err := ReleaseCommand("team-a", "auto", policy)
		g.Expect(err).To(MatchError(ContainSubstring("is not a valid object name")), policy)
	}
}

// TestOtherNamespacesAreNotServed: a dashboard started for namespace A
// serves nothing of namespace B, whatever the path asks for.
func TestOtherNamespacesAreNotServed(t *testing.T) {
	g := NewWithT(t)
	a, b := newNamespace("scope-a"), newNamespace("scope-b")
	createFleet(t, a)
	createFleet(t, b)
	g.Expect(k8s.Create(t.Context(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: b, Name: "private"}})).To(Succeed())
	sync := &uprevv1.Sync{
		ObjectMeta: metav1.ObjectMeta{Namespace: b, Name: "private"},
		Spec: uprevv1.SyncSpec{
			Interval: metav1.Duration{Duration: time.Hour},
			Git:      uprevv1.GitSource{URL: "https://git.example.com/private-of-b.git", Ref: uprevv1.GitRef{Branch: "main"}},
			Targets:  []uprevv1.Target{{Name: "eu-1"}},
		},
	}
	g.Expect(k8s.Create(t.Context(), sync)).To(Succeed())
	ts := startServer(t, a)
	for _, path := range []string{
		"/object/Sync/" + b + "/private",
		"/object/Sync/" + b + "/agent",
		"/object/Event/" + b + "/agent.1",
		"/object/ImagePolicy/" + b + "/agent",
		"/object/UpdateAutomation/" + b + "/fleet",
		"/object/Secret/" + b + "/private",
		"/object/ConfigMap/" + b + "/private",
	} {
		code, body := get(t, ts, path, "")
		g.Expect(code).To(Equal(http.StatusForbidden), path)
		g.Expect(body).NotTo(ContainSubstring("private-of-b"), path)
		g.Expect(body).NotTo(ContainSubstring("apiVersion"), path)
	}
	code, page := get(t, ts, "/", "")
	g.Expect(code).To(Equal(http.StatusOK))
	g.Expect(page).NotTo(ContainSubstring(b + "/"))
	code, _ = get(t, ts, "/object/Sync/"+a+"/agent", "")
	g.Expect(code).To(Equal(http.StatusOK), "its own namespace is served")

	all := startServer(t, "")
	code, body := get(t, all, "/object/Sync/"+b+"/private", "")
	g.Expect(code).To(Equal(http.StatusOK), "-A serves every namespace")
	g.Expect(body).To(ContainSubstring("private-of-b"))
}

// startServerOn serves the dashboard of namespace ns on address (host:0)
// with o's token, until the test ends, and returns the port.
func startServerOn(t *testing.T, ns, address string, o Options) string {
	t.Helper()
	ln, err := net.Listen("tcp", address)
	if err != nil {
		t.Fatal(err)
	}
	o.Client, o.Namespace, o.Address = k8s, ns, ln.Addr().String()
	srv, err := New(o)
	if err != nil {
		_ = ln.Close()
		t.Fatal(err)
	}
	ts := &httptest.Server{Listener: ln, Config: &http.Server{Handler: srv, ReadHeaderTimeout: 10 * time.Second}}
	ctx, cancel := context.WithCancel(context.Background())
	go srv.Run(ctx)
	ts.Start()
	t.Cleanup(func() {
		cancel()
		ts.CloseClientConnections()
		ts.Close()
	})
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	return port
}

// request sends a GET of path to 127.0.0.1:port with the Host header
// host, and header's values; it returns the reply and its body.
func request(t *testing.T, port, path, host string, header http.Header) (reply, string) {
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

// reply is what request keeps of a response, whose body it read and closed.
type reply struct {
	StatusCode int
	Header     http.Header
}

// Cookies returns the cookies the response set.
func (r reply) Cookies() []*http.Cookie { return (&http.Response{Header: r.Header}).Cookies() }

// TestNonLoopbackAddressNeedsTheToken is a request from another machine
// to a dashboard bound on 0.0.0.0 that sends `Host: localhost`: without
// the token it is refused, whatever its Host; with it (once in the query,
// then the cookie that sets, or as a bearer token) it is answered; a DNS
// name is refused, token or not.
func TestNonLoopbackAddressNeedsTheToken(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace("token")
	createFleet(t, ns)
	token, err := NewToken()
	g.Expect(err).NotTo(HaveOccurred())
	port := startServerOn(t, ns, "0.0.0.0:0", Options{Token: token})
	for _, host := range []string{"localhost:" + port, "127.0.0.1:" + port, "0.0.0.0:" + port} {
		for _, path := range []string{"/", "/events", "/object/Sync/" + ns + "/agent", "/web/dashboard.js"} {
			resp, body := request(t, port, path, host, nil)
			g.Expect(resp.StatusCode).To(Equal(http.StatusUnauthorized), "%s %s", host, path)
			g.Expect(body).NotTo(ContainSubstring("agent"), "%s %s", host, path)
		}
	}
	resp, _ := request(t, port, "/?token=not-"+token, "localhost:"+port, nil)
	g.Expect(resp.StatusCode).To(Equal(http.StatusUnauthorized), "a wrong token")

	resp, _ = request(t, port, "//attacker.example/?token="+token, "localhost:"+port, nil)
	g.Expect(resp.StatusCode).To(Equal(http.StatusSeeOther))
	g.Expect(resp.Header.Get("Location")).To(Equal("/attacker.example/"), "the token's redirect stays on the dashboard")
	resp, _ = request(t, port, "/%5Cattacker.example/?token="+token, "localhost:"+port, nil)
	g.Expect(resp.StatusCode).To(Equal(http.StatusSeeOther))
	g.Expect(resp.Header.Get("Location")).To(Equal("/%5Cattacker.example/"), "a browser reads /\\host as //host: the backslash stays escaped")
	resp, _ = request(t, port, "/?token="+token, "localhost:"+port, nil)
	g.Expect(resp.StatusCode).To(Equal(http.StatusSeeOther))
	g.Expect(resp.Header.Get("Location")).To(Equal("/"))
	cookies := resp.Cookies()
	g.Expect(cookies).To(HaveLen(1))
	g.Expect(cookies[0].HttpOnly).To(BeTrue())
	withCookie := http.Header{"Cookie": {cookies[0].Name + "=" + cookies[0].Value}}
	for _, path := range []string{"/", "/object/Sync/" + ns + "/agent", "/web/dashboard.js"} {
		resp, body := request(t, port, path, "localhost:"+port, withCookie)
		g.Expect(resp.StatusCode).To(Equal(http.StatusOK), "%s: %s", path, body)
	}
	resp, body := request(t, port, "/object/Sync/"+ns+"/agent", "127.0.0.1:"+port, http.Header{"Authorization": {"Bearer " + token}})
	g.Expect(resp.StatusCode).To(Equal(http.StatusOK), body)
	resp, _ = request(t, port, "/", "attacker.example:"+port, http.Header{"Authorization": {"Bearer " + token}})
	g.Expect(resp.StatusCode).To(Equal(http.StatusForbidden), "a DNS name")

	_, err = New(Options{Client: k8s, Namespace: ns, Address: "0.0.0.0:7070"})
	g.Expect(err).To(MatchError(ContainSubstring("not a loopback address, needs a token")), "no page off loopback without a token")
}

// TestARejectionsReasonIsShownInert: the reason of a rejection is text
// whoever pushed the commit wrote: the page shows it quoted, on one line,
// with its HTML escaped and its control characters shown escaped, beside
// the release command, which stays quoted.
func TestARejectionsReasonIsShownInert(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace("rejected")
	createFleet(t, ns)
	auto := &uprevv1.UpdateAutomation{}
	g.Expect(k8s.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "fleet"}, auto)).To(Succeed())
	auto.Status.Holds = append(auto.Status.Holds, uprevv1.Hold{Policy: ns + "/agent", Version: "1.1.0", RevertedIn: revert,
		Reason: "crashes <script>alert(1)</script>\n<a href=\"https://evil.example\">see</a>\x1b[2J\x07 on arm64"})
	g.Expect(k8s.Status().Update(t.Context(), auto)).To(Succeed())
	ts := startServer(t, ns)
	g.Eventually(func(g Gomega) {
		code, page := get(t, ts, "/", "")
		g.Expect(code).To(Equal(http.StatusOK))
		g.Expect(page).To(ContainSubstring(`<li class="hold" data-policy="` + ns + `/agent">`))
		g.Expect(page).To(ContainSubstring(`is held: rejected in <span title="` + revert + `">` + revert[:12] + `</span>: <q class="reason">` +
			`crashes &lt;script&gt;alert(1)&lt;/script&gt; &lt;a href=&#34;https://evil.example&#34;&gt;see&lt;/a&gt;\x1b[2J\x07 on arm64</q>. ` +
			`Release it with <code>uprev release-hold fleet agent -n ` + ns + `</code>`))
		g.Expect(page).To(ContainSubstring(`<div class="badge held">held: rejected in <span title="`+revert+`">`+revert[:12]+`</span>: <q class="reason">crashes &lt;script&gt;`),
			"the fleet matrix shows the rejection of the latest version too")
		g.Expect(page).NotTo(ContainSubstring("<script>alert"))
		g.Expect(page).NotTo(ContainSubstring(`href="https://evil.example"`))
		g.Expect(page).NotTo(ContainSubstring("\x1b"))
		g.Expect(page).NotTo(ContainSubstring("\x07"))
		g.Expect(page).To(ContainSubstring(`is held: reverted in <span title="`+revert+`">`), "a revert's hold says so")
	}).Should(Succeed())
}
