package source

import (
	"context"
	"errors"
	"testing"

	imagev1 "github.com/fluxcd/image-reflector-controller/api/v1"
	. "github.com/onsi/gomega"

	"github.com/uprev-dev/uprev/internal/gitrepo"
	"github.com/uprev-dev/uprev/internal/testenv/gitserver"
)

// Tags are read with one ref listing of the real Git server: one
// git-upload-pack advertisement, no clone.
func TestListGitTagsWithOneListing(t *testing.T) {
	g := NewWithT(t)
	srv := gitserver.Start(t, gitserver.WithBasicAuth("git", "pw"))
	srv.InitRepo(t, "app", "main", map[string]string{"README": "hello\n"})
	for _, tag := range []string{"v1.0.0", "v1.1.0", "v1.2.0-rc.1", "not-a-version"} {
		srv.Git(t, "app", "tag", tag, "main")
	}
	before := srv.Counts().UploadPack
	remote, err := gitrepo.NewRemote(srv.HTTPURL("app"), map[string][]byte{"username": []byte("git"), "password": []byte("pw")})
	g.Expect(err).NotTo(HaveOccurred())
	listing, err := ListGitTags(context.Background(), remote)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(listing.Names()).To(ConsistOf("v1.0.0", "v1.1.0", "v1.2.0-rc.1", "not-a-version"))
	g.Expect(srv.Counts().UploadPack - before).To(Equal(int64(1)))

	v, err := Select(imagev1.ImagePolicyChoice{SemVer: &imagev1.SemVerPolicy{Range: "1.x"}}, nil, listing.Versions)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(v.Version).To(Equal("v1.1.0"))

	bad, err := gitrepo.NewRemote(srv.HTTPURL("app"), map[string][]byte{"username": []byte("git"), "password": []byte("nope")})
	g.Expect(err).NotTo(HaveOccurred())
	_, err = ListGitTags(context.Background(), bad)
	g.Expect(errors.Is(err, gitrepo.ErrAuthentication)).To(BeTrue(), "%v", err)
}
