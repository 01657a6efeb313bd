package webhook_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	imagev1 "github.com/fluxcd/image-reflector-controller/api/v1"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	uprevv1 "github.com/uprev-dev/uprev/api/v1alpha1"
	"github.com/uprev-dev/uprev/internal/webhook"
)

const token = "s3cret-token"

// pushNotification is a distribution notification of a push of image.
func pushNotification(host, repository, tag string) []byte {
	return []byte(`{"events":[{"id":"e1","timestamp":"2026-11-21T10:00:00Z","action":"push",` +
		`"target":{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"sha256:ab","repository":"` + repository + `","tag":"` + tag + `"},` +
		`"request":{"host":"` + host + `","method":"PUT"},"source":{"addr":"registry-0:5000"}}]}`)
}

// post sends body to the receiver at url with headers and returns the
// status code and the response body.
func post(t testing.TB, c *http.Client, url string, body []byte, headers map[string]string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(string(body)))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/vnd.docker.distribution.events.v1+json")
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(out)
}

func TestRegistryNotificationTriggersMatchingRepository(t *testing.T) {
	g := NewWithT(t)
	cp := startControlPlane(t)
	ns := cp.newNamespace(t, token)
	other := cp.newNamespace(t, token)
	cp.newImageRepository(t, ns, "agent", "registry.example.com/acme/agent")
	cp.newImageRepository(t, ns, "app", "registry.example.com/acme/app")
	cp.newImageRepository(t, ns, "agent-mirror", "mirror.example.com/acme/agent")
	cp.newImageRepository(t, other, "agent", "registry.example.com/acme/agent")
	g.Eventually(func(g Gomega) {
		var list imagev1.ImageRepositoryList
		g.Expect(cp.cached.List(context.Background(), &list, client.InNamespace(ns))).To(Succeed())
		g.Expect(list.Items).To(HaveLen(3))
		g.Expect(cp.cached.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: webhook.DefaultSecretName}, &corev1.Secret{})).To(Succeed())
	}).Should(Succeed())

	srv := httptest.NewServer(cp.newReceiver().Handler())
	defer srv.Close()
	url := srv.URL + "/hooks/registry/" + ns
	body := pushNotification("registry.example.com", "acme/agent", "1.4.2")
	untouched := func() {
		t.Helper()
		for _, key := range []client.ObjectKey{{Namespace: ns, Name: "agent"}, {Namespace: ns, Name: "app"}, {Namespace: ns, Name: "agent-mirror"}, {Namespace: other, Name: "agent"}} {
			g.Expect(cp.requestedAt(t, &imagev1.ImageRepository{}, key.Namespace, key.Name)).To(BeEmpty(), "%s", key)
		}
	}

	// The receiver patches before it answers, so reading right after the
	// answer sees whatever it did.
	code, _ := post(t, srv.Client(), url, body, map[string]string{"X-Hub-Signature-256": webhook.Sign([]byte("wrong"), body)})
	g.Expect(code).To(Equal(http.StatusUnauthorized))
	untouched()
	code, _ = post(t, srv.Client(), url, body, map[string]string{"X-Hub-Signature-256": webhook.Sign([]byte(token), []byte(`{"events":[]}`))})
	g.Expect(code).To(Equal(http.StatusUnauthorized))
	untouched()

	code, resp := post(t, srv.Client(), url, body, map[string]string{"X-Hub-Signature-256": webhook.Sign([]byte(token), body)})
	g.Expect(code).To(Equal(http.StatusAccepted), resp)
	var triggered webhook.Triggered
	g.Expect(json.Unmarshal([]byte(resp), &triggered)).To(Succeed())
	g.Expect(triggered.Objects).To(Equal([]string{"ImageRepository/" + ns + "/agent"}))
	first := cp.requestedAt(t, &imagev1.ImageRepository{}, ns, "agent")
	g.Expect(time.Parse(time.RFC3339Nano, first)).NotTo(BeZero())
	g.Expect(cp.requestedAt(t, &imagev1.ImageRepository{}, ns, "app")).To(BeEmpty())
	g.Expect(cp.requestedAt(t, &imagev1.ImageRepository{}, ns, "agent-mirror")).To(BeEmpty())
	g.Expect(cp.requestedAt(t, &imagev1.ImageRepository{}, other, "agent")).To(BeEmpty())

	// Docker Hub cannot sign: the path key authenticates it.
	hub := []byte(`{"push_data":{"tag":"2.0.0"},"repository":{"repo_name":"acme/app"}}`)
	cp.newImageRepository(t, ns, "hub", "docker.io/acme/app")
	g.Eventually(func() error {
		return cp.cached.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "hub"}, &imagev1.ImageRepository{})
	}).Should(Succeed())
	code, resp = post(t, srv.Client(), url+"/"+webhook.PathKey([]byte(token), "registry", ns), hub, nil)
	g.Expect(code).To(Equal(http.StatusAccepted), resp)
	g.Expect(resp).To(ContainSubstring(`"ImageRepository/` + ns + `/hub"`))
	g.Expect(cp.requestedAt(t, &imagev1.ImageRepository{}, ns, "app")).To(BeEmpty())
}

// TestHarborPushTriggersMatchingRepository posts Harbor's documented push
// payloads, in both its formats, with the bearer token Harbor's "Auth
// Header" field sends.
func TestHarborPushTriggersMatchingRepository(t *testing.T) {
	g := NewWithT(t)
	cp := startControlPlane(t)
	ns := cp.newNamespace(t, token)
	cp.newImageRepository(t, ns, "debian", "hub.harbor.com/test-webhook/debian")
	cp.newImageRepository(t, ns, "alpine", "localhost/harbor/alpine")
	cp.newImageRepository(t, ns, "other", "hub.harbor.com/test-webhook/other")
	g.Eventually(func(g Gomega) {
		var list imagev1.ImageRepositoryList
		g.Expect(cp.cached.List(context.Background(), &list, client.InNamespace(ns))).To(Succeed())
		g.Expect(list.Items).To(HaveLen(3))
		g.Expect(cp.cached.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: webhook.DefaultSecretName}, &corev1.Secret{})).To(Succeed())
	}).Should(Succeed())
	srv := httptest.NewServer(cp.newReceiver().Handler())
	defer srv.Close()
	url := srv.URL + "/hooks/registry/" + ns
	bearer := map[string]string{"Authorization": "Bearer " + token, "Content-Type": "application/json"}

	code, resp := post(t, srv.Client(), url, []byte(harborPushArtifact), bearer)
	g.Expect(code).To(Equal(http.StatusAccepted), resp)
	g.Expect(resp).To(MatchJSON(`{"triggered":["ImageRepository/` + ns + `/debian"]}`))
	g.Expect(cp.requestedAt(t, &imagev1.ImageRepository{}, ns, "debian")).NotTo(BeEmpty())
	g.Expect(cp.requestedAt(t, &imagev1.ImageRepository{}, ns, "alpine")).To(BeEmpty())

	code, resp = post(t, srv.Client(), url, []byte(harborArtifactPushed), bearer)
	g.Expect(code).To(Equal(http.StatusAccepted), resp)
	g.Expect(resp).To(MatchJSON(`{"triggered":["ImageRepository/` + ns + `/alpine"]}`))
	g.Expect(cp.requestedAt(t, &imagev1.ImageRepository{}, ns, "other")).To(BeEmpty())

	// A pull is no push: accepted, nothing triggered.
	pull := []byte(strings.Replace(harborPushArtifact, "PUSH_ARTIFACT", "PULL_ARTIFACT", 1))
	code, resp = post(t, srv.Client(), url, pull, bearer)
	g.Expect(code).To(Equal(http.StatusAccepted), resp)
	g.Expect(resp).To(MatchJSON(`{"triggered":null}`))
}

func TestReceiverRejects(t *testing.T) {
	cp := startControlPlane(t)
	ns := cp.newNamespace(t, token)
	noSecret := cp.newNamespace(t, "")
	g := NewWithT(t)
	g.Eventually(func() error {
		return cp.cached.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: webhook.DefaultSecretName}, &corev1.Secret{})
	}).Should(Succeed())
	srv := httptest.NewServer(cp.newReceiver().Handler())
	defer srv.Close()
	good := pushNotification("registry.example.com", "acme/agent", "1")
	sign := func(b []byte) map[string]string {
		return map[string]string{"X-Hub-Signature-256": webhook.Sign([]byte(token), b)}
	}
	big := []byte(`{"events":[],"pad":"` + strings.Repeat("x", webhook.MaxBodyBytes) + `"}`)
	cases := []struct {
		name    string
		method  string
		path    string
		body    []byte
		headers map[string]string
		want    int
	}{
		{name: "unknown kind", path: "/hooks/chart/" + ns, body: good, headers: sign(good), want: http.StatusNotFound},
		{name: "invalid namespace", path: "/hooks/registry/Not_A_Namespace", body: good, headers: sign(good), want: http.StatusNotFound},
		{name: "other path", path: "/metrics", want: http.StatusNotFound},
		{name: "GET", method: http.MethodGet, path: "/hooks/registry/" + ns, want: http.StatusMethodNotAllowed},
		{name: "no credentials", path: "/hooks/registry/" + ns, body: good, want: http.StatusUnauthorized},
		{name: "no receiver secret", path: "/hooks/registry/" + noSecret, body: good, headers: sign(good), want: http.StatusUnauthorized},
		{name: "wrong bearer", path: "/hooks/registry/" + ns, body: good, headers: map[string]string{"Authorization": "Bearer nope"}, want: http.StatusUnauthorized},
		{name: "malformed but signed", path: "/hooks/registry/" + ns, body: []byte("{"), headers: sign([]byte("{")), want: http.StatusBadRequest},
		{name: "git push without repository", path: "/hooks/git/" + ns, body: []byte(`{"ref":"x"}`), headers: sign([]byte(`{"ref":"x"}`)), want: http.StatusBadRequest},
		{name: "too large", path: "/hooks/registry/" + ns, body: big, headers: sign(big), want: http.StatusRequestEntityTooLarge},
		{name: "GitHub ping", path: "/hooks/git/" + ns, body: []byte(`{"zen":"z"}`), headers: map[string]string{"X-GitHub-Event": "ping", "X-Hub-Signature-256": webhook.Sign([]byte(token), []byte(`{"zen":"z"}`))}, want: http.StatusAccepted},
		{name: "GitLab token", path: "/hooks/registry/" + ns, body: good, headers: map[string]string{"X-Gitlab-Token": token}, want: http.StatusAccepted},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			method := tc.method
			if method == "" {
				method = http.MethodPost
			}
			req, err := http.NewRequest(method, srv.URL+tc.path, strings.NewReader(string(tc.body)))
			g.Expect(err).NotTo(HaveOccurred())
			for k, v := range tc.headers {
				req.Header.Set(k, v)
			}
			resp, err := srv.Client().Do(req)
			g.Expect(err).NotTo(HaveOccurred())
			out, _ := io.ReadAll(resp.Body)
			g.Expect(resp.Body.Close()).To(Succeed())
			g.Expect(resp.StatusCode).To(Equal(tc.want), string(out))
			g.Expect(string(out)).NotTo(ContainSubstring(token))
		})
	}
}

func TestGitPushTriggersSyncsAndAutomations(t *testing.T) {
	g := NewWithT(t)
	cp := startControlPlane(t)
	ctx := context.Background()
	ns := cp.newNamespace(t, token)
	sync := func(name, url string, ref uprevv1.GitRef) {
		s := &uprevv1.Sync{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: uprevv1.SyncSpec{
				Interval: metav1.Duration{Duration: time.Hour},
				Git:      uprevv1.GitSource{URL: url, Ref: ref},
				Path:     "./clusters/prod",
				Targets:  []uprevv1.Target{{Name: "local"}},
			},
		}
		g.Expect(cp.direct.Create(ctx, s)).To(Succeed())
	}
	sync("prod", "https://git.example.com/platform/fleet.git", uprevv1.GitRef{Branch: "main"})
	sync("staging", "ssh://git@git.example.com:2222/platform/fleet", uprevv1.GitRef{Branch: "staging"})
	sync("pinned", "https://git.example.com/platform/fleet", uprevv1.GitRef{Commit: "0123456789abcdef0123456789abcdef01234567"})
	sync("apps", "https://git.example.com/platform/apps.git", uprevv1.GitRef{Branch: "main"})
	auto := &uprevv1.UpdateAutomation{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "fleet"},
		Spec: uprevv1.UpdateAutomationSpec{
			Interval: metav1.Duration{Duration: time.Hour},
			Git: uprevv1.GitSpec{
				GitSource: uprevv1.GitSource{URL: "ssh://git@git.example.com/platform/fleet", Ref: uprevv1.GitRef{Branch: "main"}},
				Commit:    uprevv1.CommitSpec{Author: uprevv1.CommitUser{Name: "uprev", Email: "uprev@example.com"}},
			},
		},
	}
	g.Expect(cp.direct.Create(ctx, auto)).To(Succeed())
	g.Eventually(func(g Gomega) {
		var syncs uprevv1.SyncList
		g.Expect(cp.cached.List(ctx, &syncs, client.InNamespace(ns))).To(Succeed())
		g.Expect(syncs.Items).To(HaveLen(4))
		g.Expect(cp.cached.Get(ctx, client.ObjectKeyFromObject(auto), &uprevv1.UpdateAutomation{})).To(Succeed())
		g.Expect(cp.cached.Get(ctx, client.ObjectKey{Namespace: ns, Name: webhook.DefaultSecretName}, &corev1.Secret{})).To(Succeed())
	}).Should(Succeed())

	srv := httptest.NewServer(cp.newReceiver().Handler())
	defer srv.Close()
	body := []byte(`{"ref":"refs/heads/main","repository":{"full_name":"platform/fleet","clone_url":"https://git.example.com/platform/fleet.git","ssh_url":"git@git.example.com:platform/fleet.git"}}`)
	code, resp := post(t, srv.Client(), srv.URL+"/hooks/git/"+ns, body, map[string]string{"X-GitHub-Event": "push", "X-Hub-Signature-256": webhook.Sign([]byte(token), body)})
	g.Expect(code).To(Equal(http.StatusAccepted), resp)
	var triggered webhook.Triggered
	g.Expect(json.Unmarshal([]byte(resp), &triggered)).To(Succeed())
	g.Expect(triggered.Objects).To(ConsistOf("Sync/"+ns+"/prod", "UpdateAutomation/"+ns+"/fleet"))
	g.Expect(cp.requestedAt(t, &uprevv1.Sync{}, ns, "prod")).NotTo(BeEmpty())
	g.Expect(cp.requestedAt(t, &uprevv1.UpdateAutomation{}, ns, "fleet")).NotTo(BeEmpty())
	for _, name := range []string{"staging", "pinned", "apps"} {
		g.Expect(cp.requestedAt(t, &uprevv1.Sync{}, ns, name)).To(BeEmpty(), name)
	}
}

// A tag push triggers the ReleaseSources reading that repository's tags; a
// branch push does not. A GitHub release event triggers those reading
// that repository's releases.
func TestTagPushAndReleaseTriggerReleaseSources(t *testing.T) {
	g := NewWithT(t)
	cp := startControlPlane(t)
	ctx := context.Background()
	ns := cp.newNamespace(t, token)
	source := func(name string, spec uprevv1.ReleaseSourceSpec) {
		spec.Interval = metav1.Duration{Duration: time.Hour}
		spec.Policy = imagev1.ImagePolicyChoice{SemVer: &imagev1.SemVerPolicy{Range: "*"}}
		g.Expect(cp.direct.Create(ctx, &uprevv1.ReleaseSource{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: spec})).To(Succeed())
	}
	source("tool-tags", uprevv1.ReleaseSourceSpec{GitTags: &uprevv1.GitTagsSource{URL: "https://git.example.com/acme/tool.git"}})
	source("other-tags", uprevv1.ReleaseSourceSpec{GitTags: &uprevv1.GitTagsSource{URL: "https://git.example.com/acme/other.git"}})
	source("tool-releases", uprevv1.ReleaseSourceSpec{GitHubReleases: &uprevv1.GitHubReleasesSource{Repository: "acme/tool"}})
	g.Eventually(func(g Gomega) {
		var list uprevv1.ReleaseSourceList
		g.Expect(cp.cached.List(ctx, &list, client.InNamespace(ns))).To(Succeed())
		g.Expect(list.Items).To(HaveLen(3))
		g.Expect(cp.cached.Get(ctx, client.ObjectKey{Namespace: ns, Name: webhook.DefaultSecretName}, &corev1.Secret{})).To(Succeed())
	}).Should(Succeed())
	srv := httptest.NewServer(cp.newReceiver().Handler())
	defer srv.Close()
	send := func(event string, body []byte) []string {
		code, resp := post(t, srv.Client(), srv.URL+"/hooks/git/"+ns, body, map[string]string{"X-GitHub-Event": event, "X-Hub-Signature-256": webhook.Sign([]byte(token), body)})
		g.Expect(code).To(Equal(http.StatusAccepted), resp)
		var triggered webhook.Triggered
		g.Expect(json.Unmarshal([]byte(resp), &triggered)).To(Succeed())
		return triggered.Objects
	}
	repo := `"repository":{"full_name":"acme/tool","clone_url":"https://git.example.com/acme/tool.git"}`

	g.Expect(send("push", []byte(`{"ref":"refs/heads/main",`+repo+`}`))).To(BeEmpty())
	g.Expect(cp.requestedAt(t, &uprevv1.ReleaseSource{}, ns, "tool-tags")).To(BeEmpty())

	g.Expect(send("push", []byte(`{"ref":"refs/tags/v1.2.0",`+repo+`}`))).To(ConsistOf("ReleaseSource/" + ns + "/tool-tags"))
	g.Expect(cp.requestedAt(t, &uprevv1.ReleaseSource{}, ns, "tool-tags")).NotTo(BeEmpty())
	g.Expect(cp.requestedAt(t, &uprevv1.ReleaseSource{}, ns, "other-tags")).To(BeEmpty())

	g.Expect(send("release", []byte(`{"action":"published","release":{"tag_name":"v1.2.0","draft":false},`+repo+`}`))).To(
		ConsistOf("ReleaseSource/" + ns + "/tool-releases"))
	g.Expect(cp.requestedAt(t, &uprevv1.ReleaseSource{}, ns, "tool-releases")).NotTo(BeEmpty())
}
