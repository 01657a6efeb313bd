package webhook_test

import (
	"errors"
	"net/http"
	"strings"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/uprev-dev/uprev/internal/webhook"
)

// harborPushArtifact is the payload Harbor documents for a push, in its
// "Default" format.
const harborPushArtifact = `{
	"type": "PUSH_ARTIFACT",
	"occur_at": 1586922308,
	"operator": "admin",
	"event_data": {
		"resources": [{
			"digest": "sha256:8a9e9863dbb6e10edb5adfe917c00da84e1700fa76e7ed02476aa6e6fb8ee0d8",
			"tag": "latest",
			"resource_url": "hub.harbor.com/test-webhook/debian:latest"
		}],
		"repository": {
			"date_created": 1586922308,
			"name": "debian",
			"namespace": "test-webhook",
			"repo_full_name": "test-webhook/debian",
			"repo_type": "private"
		}
	}
}`

// harborArtifactPushed is the payload Harbor documents for a push (here by
// digest), in its "CloudEvents" format.
const harborArtifactPushed = `{
  "specversion": "1.0",
  "id": "66e18103-09c1-41f6-982f-37df223f3eeb",
  "requestid": "51c0b694-0168-4f3c-b0db-282565455d7b",
  "source": "/projects/2/webhook/policies/15",
  "type": "harbor.artifact.pushed",
  "datacontenttype": "application/json",
  "time": "2023-04-03T06:04:46Z",
  "data": {
    "resources": [
      {
        "digest": "sha256:954b378c375d852eb3c63ab88978f640b4348b01c1b3456a024a81536dafbbf4",
        "tag": "sha256:954b378c375d852eb3c63ab88978f640b4348b01c1b3456a024a81536dafbbf4",
        "resource_url": "localhost/harbor/alpine@sha256:954b378c375d852eb3c63ab88978f640b4348b01c1b3456a024a81536dafbbf4"
      }
    ],
    "repository": {
      "date_created": 1680501893,
      "name": "alpine",
      "namespace": "harbor",
      "repo_full_name": "harbor/alpine",
      "repo_type": "private"
    }
  },
  "operator": "harbor-jobservice"
}`

func TestParseRegistryPush(t *testing.T) {
	cases := []struct {
		name   string
		header map[string]string
		body   string
		want   []webhook.ImagePush
		err    bool
	}{
		{
			name: "distribution envelope: pushes only, deduplicated",
			body: `{"events":[
				{"id":"1","action":"push","target":{"mediaType":"application/vnd.oci.image.manifest.v1+json","repository":"acme/agent","tag":"1.4.2","url":"https://registry.example.com/v2/acme/agent/manifests/sha256:ab"},"request":{"host":"registry.example.com"}},
				{"id":"2","action":"pull","target":{"repository":"acme/other"},"request":{"host":"registry.example.com"}},
				{"id":"3","action":"push","target":{"repository":"acme/agent","tag":"1.4.2"},"request":{"host":"registry.example.com"}},
				{"id":"4","action":"push","target":{"repository":"acme/app","url":"http://localhost:5000/v2/acme/app/manifests/sha256:cd"}}]}`,
			want: []webhook.ImagePush{
				{Registry: "registry.example.com", Repository: "acme/agent", Tag: "1.4.2"},
				{Registry: "localhost:5000", Repository: "acme/app"},
			},
		},
		{
			name: "distribution envelope without host",
			body: `{"events":[{"action":"push","target":{"repository":"acme/agent","tag":"1.0.0"}}]}`,
			want: []webhook.ImagePush{{Repository: "acme/agent", Tag: "1.0.0"}},
		},
		{name: "distribution envelope without events", body: `{"events":[]}`},
		{name: "distribution envelope with a bad repository", body: `{"events":[{"action":"push","target":{"repository":"Acme/AGENT"}}]}`, err: true},
		{
			// Harbor's documented "Default" payload of a push
			// (goharbor.io, Configure Webhook Notifications).
			name: "Harbor PUSH_ARTIFACT",
			body: harborPushArtifact,
			want: []webhook.ImagePush{{Registry: "hub.harbor.com", Repository: "test-webhook/debian", Tag: "latest"}},
		},
		{
			// Harbor's documented "CloudEvents" payload of a push by
			// digest: its `tag` is the digest.
			name: "Harbor CloudEvents harbor.artifact.pushed by digest",
			body: harborArtifactPushed,
			want: []webhook.ImagePush{{Registry: "localhost", Repository: "harbor/alpine"}},
		},
		{
			name: "Harbor PUSH_ARTIFACT without resource_url",
			body: `{"type":"PUSH_ARTIFACT","occur_at":1586922308,"operator":"admin","event_data":{"resources":[{"digest":"sha256:8a9e9863dbb6e10edb5adfe917c00da84e1700fa76e7ed02476aa6e6fb8ee0d8","tag":"1.4.2"}],` +
				`"repository":{"date_created":1586922308,"name":"agent","namespace":"acme","repo_full_name":"acme/agent","repo_type":"private"}}}`,
			want: []webhook.ImagePush{{Repository: "acme/agent", Tag: "1.4.2"}},
		},
		{
			name: "Harbor PULL_ARTIFACT",
			body: strings.Replace(harborPushArtifact, "PUSH_ARTIFACT", "PULL_ARTIFACT", 1),
		},
		{
			name: "Harbor CloudEvents harbor.artifact.deleted",
			body: strings.Replace(harborArtifactPushed, "harbor.artifact.pushed", "harbor.artifact.deleted", 1),
		},
		{name: "Harbor PUSH_ARTIFACT without resources", body: `{"type":"PUSH_ARTIFACT","event_data":{"resources":[],"repository":{"repo_full_name":"acme/agent"}}}`, err: true},
		{name: "Harbor harbor.artifact.pushed without data", body: `{"specversion":"1.0","type":"harbor.artifact.pushed","event_data":{"resources":[]}}`, err: true},
		{name: "Harbor PUSH_ARTIFACT with a bad resource_url", body: `{"type":"PUSH_ARTIFACT","event_data":{"resources":[{"tag":"1","resource_url":"Hub/ACME:x:y"}]}}`, err: true},
		{
			name: "Docker Hub",
			body: `{"callback_url":"https://registry.hub.docker.com/u/acme/agent/hook/x/","push_data":{"pushed_at":1,"pusher":"acme","tag":"1.4.2"},"repository":{"name":"agent","namespace":"acme","repo_name":"acme/agent"}}`,
			want: []webhook.ImagePush{{Registry: "index.docker.io", Repository: "acme/agent", Tag: "1.4.2"}},
		},
		{
			name:   "GitHub package event",
			header: map[string]string{"X-GitHub-Event": "package"},
			body: `{"action":"published","package":{"name":"agent","namespace":"acme","package_type":"CONTAINER","owner":{"login":"acme"},
				"package_version":{"package_url":"ghcr.io/acme/agent:1.4.2","container_metadata":{"tag":{"name":"1.4.2","digest":"sha256:ab"}}},
				"registry":{"url":"https://ghcr.io"}}}`,
			want: []webhook.ImagePush{{Registry: "ghcr.io", Repository: "acme/agent", Tag: "1.4.2"}},
		},
		{
			name:   "GitHub registry_package event without package URL",
			header: map[string]string{"X-GitHub-Event": "registry_package"},
			body:   `{"action":"published","registry_package":{"name":"Agent","package_type":"container","owner":{"login":"Acme"},"registry":{"url":"https://ghcr.io"}}}`,
			want:   []webhook.ImagePush{{Registry: "ghcr.io", Repository: "acme/agent"}},
		},
		{
			name:   "GitHub npm package",
			header: map[string]string{"X-GitHub-Event": "package"},
			body:   `{"action":"published","package":{"name":"agent","package_type":"npm"}}`,
		},
		{name: "GitHub ping", header: map[string]string{"X-GitHub-Event": "ping"}, body: `{"zen":"x"}`},
		{name: "GitHub package event without package", header: map[string]string{"X-GitHub-Event": "package"}, body: `{"action":"published"}`, err: true},
		{name: "not JSON", body: `events: []`, err: true},
		{name: "unknown JSON", body: `{"hello":"world"}`, err: true},
		{name: "truncated", body: `{"events":[{"action":"push"`, err: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			h := http.Header{}
			for k, v := range tc.header {
				h.Set(k, v)
			}
			got, err := webhook.ParseRegistryPush(h, []byte(tc.body))
			if tc.err {
				g.Expect(err).To(MatchError(webhook.ErrMalformed))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(got).To(Equal(tc.want))
		})
	}
}

func TestImagePushMatches(t *testing.T) {
	agent := webhook.ImagePush{Registry: "registry.example.com", Repository: "acme/agent"}
	hub := webhook.ImagePush{Registry: "index.docker.io", Repository: "library/nginx"}
	noHost := webhook.ImagePush{Repository: "acme/agent"}
	for _, tc := range []struct {
		push  webhook.ImagePush
		image string
		want  bool
	}{
		{agent, "registry.example.com/acme/agent", true},
		{agent, "registry.example.com/acme/agent2", false},
		{agent, "registry.example.com:5000/acme/agent", false},
		{agent, "ghcr.io/acme/agent", false},
		{agent, "not a name", false},
		{hub, "nginx", true},
		{hub, "docker.io/library/nginx", true},
		{hub, "index.docker.io/library/nginx", true},
		{noHost, "ghcr.io/acme/agent", true},
		{noHost, "ghcr.io/acme/app", false},
	} {
		NewWithT(t).Expect(tc.push.Matches(tc.image)).To(Equal(tc.want), "%s matches %s", tc.push, tc.image)
	}
}

func TestParseGitPush(t *testing.T) {
	cases := []struct {
		name   string
		header map[string]string
		body   string
		want   *webhook.GitPush
		err    bool
	}{
		{
			name:   "GitHub",
			header: map[string]string{"X-GitHub-Event": "push"},
			body: `{"ref":"refs/heads/main","repository":{"full_name":"acme/fleet","clone_url":"https://github.com/acme/fleet.git",
				"ssh_url":"git@github.com:acme/fleet.git","git_url":"git://github.com/acme/fleet.git","html_url":"https://github.com/acme/fleet"}}`,
			want: &webhook.GitPush{Ref: "refs/heads/main", Repositories: []string{"https://github.com/acme/fleet", "ssh://github.com/acme/fleet", "git://github.com/acme/fleet"}},
		},
		{
			name:   "GitLab",
			header: map[string]string{"X-Gitlab-Event": "Push Hook"},
			body: `{"object_kind":"push","ref":"refs/heads/main","project":{"git_http_url":"https://gitlab.example.com/platform/fleet.git",
				"git_ssh_url":"ssh://git@gitlab.example.com:2222/platform/fleet.git","web_url":"https://gitlab.example.com/platform/fleet"}}`,
			want: &webhook.GitPush{Ref: "refs/heads/main", Repositories: []string{"https://gitlab.example.com/platform/fleet", "ssh://gitlab.example.com:2222/platform/fleet"}},
		},
		{
			name: "Gitea without event header",
			body: `{"ref":"refs/tags/v1","repository":{"clone_url":"http://git.local:3000/Platform/Fleet.git","ssh_url":"git@git.internal:platform/fleet.git"}}`,
			want: &webhook.GitPush{Ref: "refs/tags/v1", Repositories: []string{"http://git.local:3000/Platform/Fleet", "ssh://git.internal/platform/fleet"}},
		},
		{name: "GitHub ping", header: map[string]string{"X-GitHub-Event": "ping"}, body: `{"zen":"x"}`},
		{name: "GitLab merge request", header: map[string]string{"X-Gitlab-Event": "Merge Request Hook"}, body: `{}`},
		{name: "no repository", header: map[string]string{"X-GitHub-Event": "push"}, body: `{"ref":"refs/heads/main"}`, err: true},
		{name: "not JSON", body: `ref=main`, err: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			h := http.Header{}
			for k, v := range tc.header {
				h.Set(k, v)
			}
			got, err := webhook.ParseGitPush(h, []byte(tc.body))
			if tc.err {
				g.Expect(err).To(MatchError(webhook.ErrMalformed))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(got).To(Equal(tc.want))
		})
	}
}

func TestGitPushMatches(t *testing.T) {
	push := webhook.GitPush{Repositories: []string{"https://git.example.com/platform/fleet", "ssh://git.example.com/platform/fleet"}}
	for url, want := range map[string]bool{
		"https://git.example.com/platform/fleet.git":      true,
		"https://user:pw@Git.Example.com/platform/fleet/": true,
		"https://git.example.com:443/platform/fleet":      true,
		"ssh://git@git.example.com/platform/fleet":        true,
		"git@git.example.com:platform/fleet.git":          true,
		"ssh://git@git.example.com:2222/platform/fleet":   false,
		"http://git.example.com/platform/fleet":           false,
		"https://git.example.com/platform/apps":           false,
		"https://git.example.com/Platform/fleet":          false,
		"":                                                false,
	} {
		NewWithT(t).Expect(push.Matches(url)).To(Equal(want), url)
	}
}

// FuzzParseRegistryPush feeds arbitrary bodies to the registry payload
// parser: it must never panic, and every push it accepts names a
// repository. It needs no control plane, so fuzz workers start none.
func FuzzParseRegistryPush(f *testing.F) {
	f.Add([]byte(`{"events":[{"action":"push","target":{"repository":"acme/agent","tag":"1"},"request":{"host":"r.example.com"}}]}`))
	f.Add([]byte(`{"push_data":{"tag":"1"},"repository":{"repo_name":"acme/agent"}}`))
	f.Add([]byte(harborPushArtifact))
	f.Add([]byte(harborArtifactPushed))
	f.Fuzz(func(t *testing.T, body []byte) {
		pushes, err := webhook.ParseRegistryPush(http.Header{}, body)
		if err == nil {
			for _, p := range pushes {
				if p.Repository == "" {
					t.Fatalf("push without repository from %q", body)
				}
			}
		}
	})
}

func TestParseRelease(t *testing.T) {
	g := NewWithT(t)
	h := http.Header{}
	h.Set("X-GitHub-Event", "release")
	r, err := webhook.ParseRelease(h, []byte(`{"action":"published","repository":{"full_name":"acme/tool"}}`))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(*r).To(Equal(webhook.Release{Repository: "acme/tool", Action: "published"}))

	_, err = webhook.ParseRelease(h, []byte(`{"action":"published"}`))
	g.Expect(errors.Is(err, webhook.ErrMalformed)).To(BeTrue(), "%v", err)
	_, err = webhook.ParseRelease(h, []byte(`<html>`))
	g.Expect(errors.Is(err, webhook.ErrMalformed)).To(BeTrue(), "%v", err)

	h.Set("X-GitHub-Event", "push")
	r, err = webhook.ParseRelease(h, []byte(`{"repository":{"full_name":"acme/tool"}}`))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(r).To(BeNil())
}
