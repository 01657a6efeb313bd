package gitrepo_test

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/uprev-dev/uprev/internal/gitrepo"
	"github.com/uprev-dev/uprev/internal/testenv/githubapi"
)

func TestGitHubAppCredentials(t *testing.T) {
	g := NewWithT(t)
	app := githubapi.Start(t)
	ctx := context.Background()
	g.Expect(gitrepo.IsGitHubApp(app.SecretData())).To(BeTrue())
	g.Expect(gitrepo.IsGitHubApp(map[string][]byte{"username": []byte("alice")})).To(BeFalse())

	creds, err := gitrepo.GitHubApp{}.Credentials(ctx, "https://github.com/acme/fleet", app.SecretData())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(creds).To(Equal(map[string][]byte{"username": []byte("x-access-token"), "password": []byte(app.Token)}))

	bad := []struct {
		name string
		url  string
		edit func(map[string][]byte)
		want error
	}{
		{"ssh URL", "ssh://git@github.com/acme/fleet", func(map[string][]byte) {}, gitrepo.ErrInvalidSecret},
		{"password too", "https://github.com/acme/fleet", func(d map[string][]byte) { d["password"] = []byte("x") }, gitrepo.ErrInvalidSecret},
		{"no installation", "https://github.com/acme/fleet", func(d map[string][]byte) { delete(d, "githubAppInstallationID") }, gitrepo.ErrInvalidSecret},
		{"not a key", "https://github.com/acme/fleet", func(d map[string][]byte) { d["githubAppPrivateKey"] = []byte("not a key") }, gitrepo.ErrInvalidSecret},
		{"another installation", "https://github.com/acme/fleet", func(d map[string][]byte) { d["githubAppInstallationID"] = []byte("1") }, gitrepo.ErrAuthentication},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			data := app.SecretData()
			tc.edit(data)
			_, err := gitrepo.GitHubApp{}.Credentials(ctx, tc.url, data)
			g.Expect(err).To(MatchError(tc.want))
			g.Expect(err.Error()).NotTo(ContainSubstring("PRIVATE KEY"))
			g.Expect(err.Error()).NotTo(ContainSubstring(app.Token))
		})
	}
}
