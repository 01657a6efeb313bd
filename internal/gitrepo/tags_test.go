package gitrepo_test

import (
	"context"
	"strings"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/uprev-dev/uprev/internal/gitrepo"
	"github.com/uprev-dev/uprev/internal/testenv/gitserver"
)

// A server that advertises more references than MaxAdvertisedRefs (a
// million branches, say) is refused with ErrListingTooLarge naming the
// bound, not listed.
func TestListTagsRefusesTooManyRefs(t *testing.T) {
	for name, url := range map[string]func(*gitserver.Server) string{
		"http": func(s *gitserver.Server) string { return s.HTTPURL("app") },
		"ssh":  func(s *gitserver.Server) string { return s.SSHURL("app") },
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			srv := gitserver.Start(t)
			srv.InitRepo(t, "app", "main", map[string]string{"README": "hello\n"})
			srv.AdvertiseRefs(t, "app", "main", "heads/b", "", gitrepo.MaxAdvertisedRefs)
			remote := newRemote(t, url(srv), sshSecret(srv))

			_, err := remote.ListTags(context.Background())
			g.Expect(err).To(MatchError(gitrepo.ErrListingTooLarge))
			g.Expect(err.Error()).To(ContainSubstring("more than %d references", gitrepo.MaxAdvertisedRefs))
		})
	}
}

// A server whose advertisement passes MaxAdvertisementBytes (few
// references with long names) is refused with ErrListingTooLarge once
// that much is read, whatever the count of references.
func TestListTagsRefusesAHugeAdvertisement(t *testing.T) {
	for name, url := range map[string]func(*gitserver.Server) string{
		"http": func(s *gitserver.Server) string { return s.HTTPURL("app") },
		"ssh":  func(s *gitserver.Server) string { return s.SSHURL("app") },
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			srv := gitserver.Start(t)
			srv.InitRepo(t, "app", "main", map[string]string{"README": "hello\n"})
			padding := "-" + strings.Repeat("x", 2000)
			srv.AdvertiseRefs(t, "app", "main", "tags/v", padding, gitrepo.MaxAdvertisementBytes/len(padding)+1)
			remote := newRemote(t, url(srv), sshSecret(srv))

			_, err := remote.ListTags(context.Background())
			g.Expect(err).To(MatchError(gitrepo.ErrListingTooLarge))
			g.Expect(err.Error()).To(ContainSubstring("more than %d bytes", gitrepo.MaxAdvertisementBytes))
		})
	}
}

// sshSecret is the Secret data that reaches srv over SSH.
func sshSecret(srv *gitserver.Server) map[string][]byte {
	return map[string][]byte{gitrepo.SecretIdentity: srv.ClientKeyPEM(), gitrepo.SecretKnownHosts: srv.KnownHosts()}
}
