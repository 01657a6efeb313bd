package gitrepo_test

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/uprev-dev/uprev/internal/gitrepo"
	"github.com/uprev-dev/uprev/internal/testenv/gitserver"
)

func TestCorruptedCloneIsReplaced(t *testing.T) {
	// gitDir is the .git of the kept clone, with HEAD and the index; store
	// is its object store, with objects and refs.
	for name, damage := range map[string]func(g *WithT, gitDir, store string){
		"objects damaged": func(g *WithT, _, store string) {
			packs, err := filepath.Glob(filepath.Join(store, "objects", "pack", "*.pack"))
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(packs).NotTo(BeEmpty())
			for _, p := range packs {
				g.Expect(os.WriteFile(p, []byte("garbage"), 0o644)).To(Succeed())
			}
		},
		"objects removed": func(g *WithT, _, store string) {
			g.Expect(os.RemoveAll(filepath.Join(store, "objects"))).To(Succeed())
			g.Expect(os.Mkdir(filepath.Join(store, "objects"), 0o755)).To(Succeed())
		},
		"HEAD missing": func(g *WithT, gitDir, _ string) {
			g.Expect(os.Remove(filepath.Join(gitDir, "HEAD"))).To(Succeed())
		},
		"fetched branch missing": func(g *WithT, _, store string) {
			g.Expect(os.RemoveAll(filepath.Join(store, "refs", "remotes"))).To(Succeed())
			g.Expect(os.RemoveAll(filepath.Join(store, "packed-refs"))).To(Succeed())
		},
		"index damaged": func(g *WithT, gitDir, _ string) {
			g.Expect(os.WriteFile(filepath.Join(gitDir, "index"), []byte("DIRC garbage"), 0o644)).To(Succeed())
		},
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			fleet := newKeptFleet(t)
			srv, remote, cache, dir := fleet.srv, fleet.remote, fleet.cache, fleet.dir
			next := srv.CommitFile(t, "fleet", "main", "clusters/prod/app.yaml", "image: ghcr.io/acme/app:2.1.0\n", "Bump app by hand")

			damage(g, filepath.Join(dir, ".git"), storeDir(g, dir))

			sha := writeBack(t, cache, remote, "main", "", map[string]string{agentPath: "image: ghcr.io/acme/agent:1.4.2\n"})
			g.Expect(cache.Stats().Clones).To(Equal(int64(2)))
			log := srv.Log(t, "fleet", "main")
			g.Expect(log[0].SHA).To(Equal(sha))
			g.Expect(log[0].Parents).To(Equal([]string{next}))
			g.Expect(srv.ReadFile(t, "fleet", "main", "clusters/prod/app.yaml")).To(Equal("image: ghcr.io/acme/app:2.1.0\n"))
		})
	}
}

func TestRewrittenRemoteHistoryIsRecloned(t *testing.T) {
	g := NewWithT(t)
	srv := gitserver.Start(t)
	remote := newRemote(t, srv.InitRepo(t, "fleet", "main", seedFiles), nil)
	cache := newCache(t)
	writeBack(t, cache, remote, "main", "", map[string]string{agentPath: "image: ghcr.io/acme/agent:1.4.2\n"})

	// Someone force-pushes a history that does not contain the old tip.
	tree := srv.Git(t, "fleet", "rev-parse", "main~1^{tree}")
	rewritten := srv.Git(t, "fleet", "commit-tree", tree, "-m", "Rewritten root")
	srv.Git(t, "fleet", "update-ref", "refs/heads/main", rewritten)

	s := open(t, cache, remote, "main", "")
	g.Expect(s.Head()).To(Equal(rewritten))
	g.Expect(cache.Stats()).To(Equal(gitrepo.CacheStats{Clones: 2}))
	g.Expect(readFile(g, s.Dir(), agentPath)).To(Equal(seedFiles[agentPath]))
	sha, err := s.WriteBack(context.Background(), author, writeFiles(map[string]string{agentPath: "image: ghcr.io/acme/agent:1.4.3\n"}))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(srv.Log(t, "fleet", "main")[0].Parents).To(Equal([]string{rewritten}))
	g.Expect(srv.Log(t, "fleet", "main")[0].SHA).To(Equal(sha))
}

func TestConcurrentUsersShareOneClone(t *testing.T) {
	g := NewWithT(t)
	srv := gitserver.Start(t)
	remote := newRemote(t, srv.InitRepo(t, "fleet", "main", seedFiles), nil)
	cache := newCache(t)

	const users = 20
	var wg sync.WaitGroup
	errs := make(chan error, users)
	for range users {
		wg.Go(func() {
			s, err := cache.Open(context.Background(), remote, gitrepo.OpenOptions{Branch: "main"})
			if err != nil {
				errs <- err
				return
			}
			defer s.Close()
			_, err = s.WriteBack(context.Background(), author, func(string, *gitrepo.History) (gitrepo.Edit, error) { return gitrepo.Edit{}, nil })
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		g.Expect(err).NotTo(HaveOccurred())
	}
	g.Expect(cache.Stats()).To(Equal(gitrepo.CacheStats{Clones: 1, Fetches: users - 1}))
	g.Expect(srv.Counts()).To(Equal(gitserver.Counts{UploadPack: users}), "one clone or fetch per use")
}

func TestClonesAreKeptPerBranch(t *testing.T) {
	g := NewWithT(t)
	srv := gitserver.Start(t)
	remote := newRemote(t, srv.InitRepo(t, "fleet", "main", seedFiles), nil)
	srv.CommitFile(t, "fleet", "staging", "a.yaml", "a: 1\n", "Start staging")
	cache := newCache(t)

	main := open(t, cache, remote, "main", "")
	staging := open(t, cache, remote, "staging", "")
	g.Expect(main.Dir()).NotTo(Equal(staging.Dir()))
	g.Expect(filepath.Join(staging.Dir(), "a.yaml")).To(BeAnExistingFile())
	g.Expect(filepath.Join(main.Dir(), "a.yaml")).NotTo(BeAnExistingFile())
	g.Expect(cache.Stats()).To(Equal(gitrepo.CacheStats{Clones: 2}))
}

func TestOpenWaitsForContext(t *testing.T) {
	g := NewWithT(t)
	srv := gitserver.Start(t)
	remote := newRemote(t, srv.InitRepo(t, "fleet", "main", seedFiles), nil)
	cache := newCache(t)
	open(t, cache, remote, "main", "") // held until the end of the test

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := cache.Open(ctx, remote, gitrepo.OpenOptions{Branch: "main"})
	g.Expect(err).To(MatchError(context.Canceled))
}
