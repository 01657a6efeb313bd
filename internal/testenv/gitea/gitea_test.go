package gitea_test

import (
	"net/http"
	"strings"
	"testing"

	giteasdk "code.gitea.io/sdk/gitea"
	. "github.com/onsi/gomega"

	"github.com/uprev-dev/uprev/internal/testenv/gitea"
)

// TestStart: the server answers its API with the administrator's token,
// refuses requests without it, and makes repositories and collaborators.
func TestStart(t *testing.T) {
	g := NewWithT(t)
	s := gitea.Start(t)
	url := s.CreateRepo(t, "fleet", "main", map[string]string{"apps/agent.yaml": "image: acme/agent:1.0.0\n"})
	g.Expect(url).To(Equal(s.URL + "uprev-admin/fleet.git"))
	s.CreateUser(t, "alice", "fleet")

	c := s.Client(t)
	repo, _, err := c.GetRepo(s.Admin, "fleet")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(repo.DefaultBranch).To(Equal("main"))
	content, _, err := c.GetFile(s.Admin, "fleet", "main", "apps/agent.yaml")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(content)).To(Equal("image: acme/agent:1.0.0\n"))
	ok, _, err := c.IsCollaborator(s.Admin, "fleet", "alice")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ok).To(BeTrue())

	anonymous, err := giteasdk.NewClient(s.URL, giteasdk.SetToken("not-a-token"))
	g.Expect(err).To(HaveOccurred())
	g.Expect(anonymous).To(BeNil())

	resp, err := http.Get(s.URL + "api/v1/user")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(resp.Body.Close()).To(Succeed())
	g.Expect(resp.StatusCode).To(Equal(http.StatusUnauthorized))
	g.Expect(strings.ToLower(s.Log())).NotTo(ContainSubstring("[f]"), "no fatal log lines")
}

// TestBinaryMissingSaysHowToBuildIt: without the binary, the error names
// the make target and the build script.
func TestBinaryMissingSaysHowToBuildIt(t *testing.T) {
	t.Setenv("GITEA_BIN", t.TempDir()+"/gitea")
	_, _, err := gitea.Binary()
	NewWithT(t).Expect(err).To(MatchError(And(ContainSubstring("make gitea"), ContainSubstring("test/gitea/build.sh"))))
}
