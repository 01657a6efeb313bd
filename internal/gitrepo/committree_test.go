package gitrepo_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/uprev-dev/uprev/internal/gitrepo"
	"github.com/uprev-dev/uprev/internal/testenv/gitserver"
)

// TestWriteBackRefusesNamedFilesOutsideTheWorkingTree is an edit that
// names, among the files it wrote, a file of the clone's .git directory or
// one outside the working tree: nothing is committed or pushed, and the
// file is not read into a blob.
func TestWriteBackRefusesNamedFilesOutsideTheWorkingTree(t *testing.T) {
	srv := gitserver.Start(t)
	remote := newRemote(t, srv.InitRepo(t, "fleet", "main", seedFiles), nil)
	cache := newCache(t)
	for _, name := range []string{".git/config", "clusters/../.git/config", ".GIT/config", "../outside.yaml", "/etc/passwd"} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			s := open(t, cache, remote, "main", "")
			_, err := s.WriteBack(context.Background(), author, func(dir string, h *gitrepo.History) (gitrepo.Edit, error) {
				edit, err := writeFiles(map[string]string{agentPath: "image: ghcr.io/acme/agent:1.4.2\n"})(dir, h)
				edit.Files = append(edit.Files, name)
				return edit, err
			})
			g.Expect(err).To(MatchError(ContainSubstring(fmt.Sprintf("committing %q", name))))
			g.Expect(srv.Log(t, "fleet", "main")).To(HaveLen(1))
		})
	}
	NewWithT(t).Expect(srv.Counts().ReceivePack).To(BeZero())
}

// TestWriteBackOfNamedFilesInANewDirectoryOrThroughALink names files the
// parent's tree cannot take by replacing blobs: one in a new directory, one
// behind a symbolic link. Both are committed as git add --all would,
// having compared the whole working tree.
func TestWriteBackOfNamedFilesInANewDirectoryOrThroughALink(t *testing.T) {
	g := NewWithT(t)
	srv := gitserver.Start(t)
	remote := newRemote(t, srv.InitRepo(t, "fleet", "main", seedFiles), nil)
	s := open(t, newCache(t), remote, "main", "")
	sha, err := s.WriteBack(context.Background(), author, func(dir string, h *gitrepo.History) (gitrepo.Edit, error) {
		if err := os.Symlink("clusters/prod", filepath.Join(dir, "prod")); err != nil {
			return gitrepo.Edit{}, err
		}
		edit, err := writeFiles(map[string]string{"crds/agents.yaml": "kind: CustomResourceDefinition\n", "prod/extra.yaml": "extra\n"})(dir, h)
		edit.Files = append(edit.Files, "prod")
		return edit, err
	})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(strings.Fields(srv.Git(t, "fleet", "diff", "--name-only", "main~1", "main"))).To(ConsistOf("clusters/prod/extra.yaml", "crds/agents.yaml", "prod"))
	expectCheckedOut(t, g, s, sha)
}
