package gitrepo_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/uprev-dev/uprev/internal/gitrepo"
	"github.com/uprev-dev/uprev/internal/testenv/gitserver"
)

// storedObjects returns how many objects the object store at dir holds,
// counting an object stored twice twice.
func storedObjects(t *testing.T, g *WithT, dir string) int {
	t.Helper()
	total := 0
	for _, line := range strings.Split(gitserver.RunGit(t, dir, "count-objects", "-v"), "\n") {
		name, value, _ := strings.Cut(line, ": ")
		if name == "count" || name == "in-pack" {
			n, err := strconv.Atoi(value)
			g.Expect(err).NotTo(HaveOccurred())
			total += n
		}
	}
	return total
}

// entryNames returns the names of the entries of dir.
func entryNames(g *WithT, dir string) []string {
	entries, err := os.ReadDir(dir)
	g.Expect(err).NotTo(HaveOccurred())
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

func TestBranchesAndTagsShareOneObjectStore(t *testing.T) {
	g := NewWithT(t)
	repo := newRevisionRepo(t)
	repo.git(t, "tag", "-a", "v1", "-m", "Release 1", repo.first)
	repo.git(t, "branch", "staging", repo.first)
	repo.srv.CommitFile(t, "fleet", "staging", "clusters/staging/app.yaml", "image: ghcr.io/acme/app:3.0.0\n", "Stage app")
	cache := newCache(t)

	// The sessions are held together: each reads its own working tree.
	main := open(t, cache, repo.remote, "main", "")
	staging := open(t, cache, repo.remote, "staging", "")
	tag, _ := openRevision(t, cache, repo.remote, gitrepo.Ref{Tag: "v1"})
	g.Expect(readFile(g, main.Dir(), agentPath)).To(Equal(agentBumped))
	g.Expect(readFile(g, staging.Dir(), "clusters/staging/app.yaml")).To(Equal("image: ghcr.io/acme/app:3.0.0\n"))
	g.Expect(readFile(g, tag.Dir(), agentPath)).To(Equal(seedFiles[agentPath]))

	store := storeDir(g, main.Dir())
	g.Expect(storeDir(g, staging.Dir())).To(Equal(store))
	g.Expect(storeDir(g, tag.Dir())).To(Equal(store))
	repoDir := filepath.Dir(main.Dir())
	g.Expect(entryNames(g, repoDir)).To(ConsistOf(
		filepath.Base(store), filepath.Base(main.Dir()), filepath.Base(staging.Dir()), filepath.Base(tag.Dir())))
	// Every object of the remote, once: each clone fetched only what the
	// store lacked.
	remoteObjects := strings.Split(repo.git(t, "rev-list", "--objects", "--all"), "\n")
	g.Expect(storedObjects(t, g, store)).To(Equal(len(remoteObjects)))
	g.Expect(cache.Stats()).To(Equal(gitrepo.CacheStats{Clones: 3}))
}

func TestSyncThroughTagsReusesOneCheckout(t *testing.T) {
	g := NewWithT(t)
	srv := gitserver.Start(t)
	files := map[string]string{}
	for i := range 300 {
		files[fmt.Sprintf("apps/app%03d.yaml", i)] = fmt.Sprintf("image: ghcr.io/acme/app%d:1.0.0\n", i)
	}
	remote := newRemote(t, srv.InitRepo(t, "fleet", "main", files), nil)
	for i := 1; i <= 20; i++ {
		srv.CommitFile(t, "fleet", "main", "apps/app000.yaml", fmt.Sprintf("image: ghcr.io/acme/app0:1.%d.0\n", i), "Release")
		srv.Git(t, "fleet", "tag", releaseTag(i))
	}
	root := filepath.Join(t.TempDir(), "clones")
	cache, err := gitrepo.NewCache(root)
	g.Expect(err).NotTo(HaveOccurred())

	var dir string
	var oneClone int64
	for i := 1; i <= 20; i++ {
		s, revision, err := cache.OpenRevision(context.Background(), remote, gitrepo.Ref{Tag: releaseTag(i)}, "Sync/apps/prod")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(revision).To(HavePrefix(releaseTag(i) + "@sha1:"))
		g.Expect(readFile(g, s.Dir(), "apps/app000.yaml")).To(Equal(fmt.Sprintf("image: ghcr.io/acme/app0:1.%d.0\n", i)))
		s.Close()
		if i == 1 {
			dir = s.Dir()
			oneClone, _ = diskUsage(t, root)
		}
		g.Expect(s.Dir()).To(Equal(dir), "tag %s", releaseTag(i))
	}

	disk, _ := diskUsage(t, root)
	g.Expect(disk).To(BeNumerically("<=", 3*oneClone), "one clone takes %d bytes", oneClone)
	g.Expect(cache.Stats()).To(Equal(gitrepo.CacheStats{Clones: 1, Fetches: 19}))
	g.Expect(entryNames(g, filepath.Join(storeDir(g, dir), "refs", "remotes", "tag"))).To(ConsistOf(releaseTag(20)),
		"the refs of earlier tags are dropped")
}

func TestFailedReplacementKeepsTheObjectStore(t *testing.T) {
	g := NewWithT(t)
	repo := newRevisionRepo(t, gitserver.WithBasicAuth("alice", "s3cret"))
	repo.git(t, "tag", "v1", repo.first)
	authed := repo.withRemote(t, map[string][]byte{"username": []byte("alice"), "password": []byte("s3cret")})
	cache := newCache(t)
	s := open(t, cache, authed.remote, "main", "")
	s.Close()
	tag, _ := openRevision(t, cache, authed.remote, gitrepo.Ref{Tag: "v1"})
	tag.Close()
	store := storeDir(g, s.Dir())
	g.Expect(os.WriteFile(filepath.Join(s.Dir(), ".git", "index"), []byte("DIRC garbage"), 0o644)).To(Succeed())

	// The damaged clone is to be made afresh, in a new store, with
	// credentials the remote refuses.
	_, err := cache.Open(context.Background(), repo.remote, gitrepo.OpenOptions{Branch: "main"})
	g.Expect(err).To(MatchError(gitrepo.ErrAuthentication))
	g.Expect(entryNames(g, filepath.Dir(store))).To(ConsistOf(filepath.Base(store), filepath.Base(s.Dir()), filepath.Base(tag.Dir())))

	// The tag's clone still uses the only store there is.
	tag, _ = openRevision(t, cache, authed.remote, gitrepo.Ref{Tag: "v1"})
	g.Expect(storeDir(g, tag.Dir())).To(Equal(store))
	g.Expect(cache.Stats()).To(Equal(gitrepo.CacheStats{Clones: 2, Fetches: 1}))
}
