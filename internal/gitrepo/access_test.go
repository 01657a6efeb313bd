package gitrepo_test

import (
	"testing"

	. "github.com/onsi/gomega"

	"github.com/uprev-dev/uprev/internal/gitrepo"
	"github.com/uprev-dev/uprev/internal/outbound"
	"github.com/uprev-dev/uprev/internal/testenv/githubapi"
)

// TestAccessSortsWhatCannotWork: Access, the one way a controller reaches
// a repository from its Secret, refuses a URL Git cannot read naming the
// field, and a Secret that cannot work, before any call goes out.
func TestAccessSortsWhatCannotWork(t *testing.T) {
	for name, tc := range map[string]struct {
		access gitrepo.Access
		want   error
	}{
		"a scheme Git does not read": {gitrepo.Access{URL: "ftp://git.example.com/fleet.git", Field: "spec.git.url"}, gitrepo.ErrInvalidURL},
		"a URL that does not parse":  {gitrepo.Access{URL: "https://git.example.com/%zz", Field: "spec.git.url"}, gitrepo.ErrInvalidURL},
		"a password without a user": {gitrepo.Access{URL: "https://git.example.com/fleet.git", Field: "spec.git.url",
			Secret: map[string][]byte{gitrepo.SecretPassword: []byte("s3cret")}}, gitrepo.ErrInvalidSecret},
		"a GitHub App over SSH": {gitrepo.Access{URL: "ssh://git@github.com/acme/fleet", Field: "spec.git.url",
			Secret: map[string][]byte{"githubAppID": []byte("1")}}, gitrepo.ErrInvalidSecret},
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			_, err := tc.access.Remote(t.Context())
			g.Expect(err).To(MatchError(tc.want))
			if tc.want == gitrepo.ErrInvalidURL {
				g.Expect(err.Error()).To(HavePrefix("spec.git.url: "))
			}
			g.Expect(err.Error()).NotTo(ContainSubstring("s3cret"))
		})
	}
}

// TestAccessExchangesTheGitHubAppThroughTheOutboundLayer: a Secret naming
// a GitHub App is exchanged for an installation token, and the exchange
// dials through the deny list: with the API's address denied, it is
// refused naming the range.
func TestAccessExchangesTheGitHubAppThroughTheOutboundLayer(t *testing.T) {
	g := NewWithT(t)
	app := githubapi.Start(t)
	access := gitrepo.Access{URL: "https://github.com/acme/fleet", Field: "spec.git.url", Secret: app.SecretData()}

	remote, err := access.Remote(t.Context())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(remote.Redacted()).NotTo(ContainSubstring(app.Token))

	deny, err := outbound.Parse([]string{"127.0.0.0/8", "::1/128"})
	g.Expect(err).NotTo(HaveOccurred())
	outbound.Install(deny)
	t.Cleanup(func() { outbound.Install(nil) })
	_, err = access.Remote(t.Context())
	g.Expect(err).To(MatchError(outbound.ErrDenied))
	g.Expect(err.Error()).To(ContainSubstring("127.0.0.0/8"))
}
