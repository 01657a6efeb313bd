package webhook_test

import (
	"net/http"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/uprev-dev/uprev/internal/webhook"
)

func TestAuthenticate(t *testing.T) {
	token := []byte("s3cret")
	body := []byte(`{"events":[]}`)
	pathKey := webhook.PathKey(token, "registry", "fleet")
	cases := []struct {
		name    string
		header  map[string]string
		pathKey string
		token   []byte
		ok      bool
	}{
		{name: "HMAC signature", header: map[string]string{"X-Hub-Signature-256": webhook.Sign(token, body)}, ok: true},
		{name: "signature of another body", header: map[string]string{"X-Hub-Signature-256": webhook.Sign(token, []byte("{}"))}},
		{name: "signature with another key", header: map[string]string{"X-Hub-Signature-256": webhook.Sign([]byte("other"), body)}},
		{name: "signature without prefix", header: map[string]string{"X-Hub-Signature-256": webhook.Sign(token, body)[len("sha256="):]}},
		{name: "signature not hex", header: map[string]string{"X-Hub-Signature-256": "sha256=zz"}},
		{name: "a bad signature is not saved by a good token", header: map[string]string{"X-Hub-Signature-256": "sha256=00", "X-Gitlab-Token": "s3cret"}},
		{name: "GitLab token", header: map[string]string{"X-Gitlab-Token": "s3cret"}, ok: true},
		{name: "wrong GitLab token", header: map[string]string{"X-Gitlab-Token": "s3cre"}},
		{name: "bearer token", header: map[string]string{"Authorization": "Bearer s3cret"}, ok: true},
		{name: "basic auth", header: map[string]string{"Authorization": "Basic czNjcmV0"}},
		{name: "wrong bearer token", header: map[string]string{"Authorization": "Bearer s3cret2"}},
		{name: "path key", pathKey: pathKey, ok: true},
		{name: "path key of another receiver", pathKey: webhook.PathKey(token, "git", "fleet")},
		{name: "the token as path key", pathKey: "s3cret"},
		{name: "no credentials"},
		{name: "receiver without token", header: map[string]string{"X-Gitlab-Token": ""}, token: []byte{}},
		{name: "receiver without token, empty signature", header: map[string]string{"X-Hub-Signature-256": webhook.Sign(nil, body)}, token: []byte{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			h := http.Header{}
			for k, v := range tc.header {
				h.Set(k, v)
			}
			tok := token
			if tc.token != nil {
				tok = tc.token
			}
			err := webhook.Authenticate(h, body, tc.pathKey, tok, "registry", "fleet")
			if tc.ok {
				g.Expect(err).NotTo(HaveOccurred())
				return
			}
			g.Expect(err).To(MatchError(webhook.ErrUnauthenticated))
			g.Expect(err.Error()).NotTo(ContainSubstring("s3cret"))
		})
	}
}
