package gitrepo

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/go-git/go-git/v5/plumbing"
	. "github.com/onsi/gomega"

	"github.com/uprev-dev/uprev/internal/testenv/gitserver"
)

// TestWriteBackOfNamedFilesCostsWhatChanged writes back one file at a time
// in a repository of 2,000 files in 200 directories: the push sends the
// commit, the trees along the file's path and its blob, to a server that
// checks it lacks none, and HEAD and the working tree hold the commit
// afterwards while the index is left at the first commit, unread.
func TestWriteBackOfNamedFilesCostsWhatChanged(t *testing.T) {
	g := NewWithT(t)
	files := map[string]string{}
	for i := range 2000 {
		files[fmt.Sprintf("clusters/c%03d/app-%04d.yaml", i%200, i)] = fmt.Sprintf("image: ghcr.io/acme/app-%d:1.0.0\n", i)
	}
	srv := gitserver.Start(t)
	url := srv.InitRepo(t, "fleet", "main", files)
	srv.Git(t, "fleet", "config", "receive.fsckObjects", "true")
	remote, err := NewRemote(url, nil)
	g.Expect(err).NotTo(HaveOccurred())
	cache, err := NewCache(filepath.Join(t.TempDir(), "clones"))
	g.Expect(err).NotTo(HaveOccurred())
	ctx := context.Background()
	author := WriteBackOptions{AuthorName: "uprev", AuthorEmail: "uprev@example.com"}

	first := ""
	for _, c := range []struct {
		file, status string
		objects      int
	}{
		{"clusters/c007/app-0007.yaml", "M", 5}, // commit, 3 trees, blob
		{"clusters/c007/app-0207.yaml", "M", 5},
		{"top.yaml", "A", 3}, // commit, root tree, blob
	} {
		s, err := cache.Open(ctx, remote, OpenOptions{Branch: "main"})
		g.Expect(err).NotTo(HaveOccurred())
		if first == "" {
			first = s.Head()
		}
		sha, err := s.WriteBack(ctx, author, func(dir string, _ *History) (Edit, error) {
			if err := os.WriteFile(filepath.Join(dir, c.file), []byte("image: ghcr.io/acme/app:2.0.0\n"), 0o644); err != nil {
				return Edit{}, err
			}
			return Edit{Message: "Update " + c.file, Files: []string{c.file}}, nil
		})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(srv.Git(t, "fleet", "rev-parse", "main")).To(Equal(sha))
		g.Expect(srv.Git(t, "fleet", "diff", "--name-status", "main~1", "main")).To(Equal(c.status + "\t" + c.file))
		objects, err := s.newObjects(plumbing.NewHash(sha))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(objects).To(HaveLen(c.objects), "the objects pushed for %s", c.file)
		g.Expect(gitserver.RunGit(t, s.dir, "rev-parse", "HEAD")).To(Equal(sha))
		g.Expect(statusAtHead(t, s.dir)).To(BeEmpty())
		g.Expect(s.tree.cleanAt(s.dir, plumbing.NewHash(sha))).To(BeTrue())
		g.Expect(s.tree.indexCommit(s.dir).String()).To(Equal(first), "the index is not written")
		s.Close()
	}
}
