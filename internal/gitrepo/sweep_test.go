package gitrepo_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/uprev-dev/uprev/internal/gitrepo"
)

// grace is how long a clone no owner claims stays after its last use.
const grace = 30 * time.Second

// newClockedCache returns a cache under root whose time is a fake clock.
func newClockedCache(t *testing.T, root string) (*gitrepo.Cache, *testingclock.FakeClock) {
	t.Helper()
	clock := testingclock.NewFakeClock(time.Date(2026, 11, 23, 9, 0, 0, 0, time.UTC))
	c, err := gitrepo.NewCacheWithOptions(root, gitrepo.CacheOptions{Clock: clock})
	if err != nil {
		t.Fatalf("creating cache: %v", err)
	}
	return c, clock
}

// expectEmpty expects the cache root to hold nothing but its empty trash.
func expectEmpty(g *WithT, root string) {
	g.Expect(entryNames(g, root)).To(ConsistOf(".trash"))
	g.Expect(entryNames(g, filepath.Join(root, ".trash"))).To(BeEmpty())
}

func TestSweepRemovesClonesNoOwnerClaims(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	repo := newRevisionRepo(t)
	repo.git(t, "tag", "v1", repo.first)
	root := filepath.Join(t.TempDir(), "clones")
	cache, clock := newClockedCache(t, root)

	automation, err := cache.Open(ctx, repo.remote, gitrepo.OpenOptions{Branch: "main", Owner: "UpdateAutomation/apps/fleet"})
	g.Expect(err).NotTo(HaveOccurred())
	automation.Close()
	sync, _, err := cache.OpenRevision(ctx, repo.remote, gitrepo.Ref{Tag: "v1"}, "Sync/apps/prod")
	g.Expect(err).NotTo(HaveOccurred())
	sync.Close()
	unowned, _, err := cache.OpenRevision(ctx, repo.remote, gitrepo.Ref{Branch: "main", Commit: repo.first}, "")
	g.Expect(err).NotTo(HaveOccurred())
	unowned.Close()
	inSession, _, err := cache.OpenRevision(ctx, repo.remote, gitrepo.Ref{Commit: repo.first}, "")
	g.Expect(err).NotTo(HaveOccurred())
	defer inSession.Close()

	clock.Step(grace - time.Second)
	g.Expect(cache.Sweep(clock.Now())).To(Succeed())
	g.Expect(unowned.Dir()).To(BeADirectory(), "used less than 30 seconds ago")

	clock.Step(time.Second)
	g.Expect(cache.Sweep(clock.Now())).To(Succeed())
	g.Expect(unowned.Dir()).NotTo(BeAnExistingFile())
	g.Expect(automation.Dir()).To(BeADirectory(), "claimed")
	g.Expect(sync.Dir()).To(BeADirectory(), "claimed")
	g.Expect(inSession.Dir()).To(BeADirectory(), "in use")
	g.Expect(readFile(g, inSession.Dir(), agentPath)).To(Equal(seedFiles[agentPath]))

	cache.Release("Sync/apps/prod")
	g.Expect(cache.Sweep(clock.Now())).To(Succeed())
	g.Expect(sync.Dir()).NotTo(BeAnExistingFile(), "released, and unused for 30 seconds")

	inSession.Close()
	g.Expect(cache.Sweep(clock.Now())).To(Succeed())
	g.Expect(inSession.Dir()).To(BeADirectory(), "used a moment ago")
	clock.Step(grace)
	g.Expect(cache.Sweep(clock.Now())).To(Succeed())
	g.Expect(inSession.Dir()).NotTo(BeAnExistingFile())

	cache.Release("UpdateAutomation/apps/fleet")
	g.Expect(cache.Sweep(clock.Now())).To(Succeed())
	expectEmpty(g, root)

	// The repository is cloned again for its next user.
	s := open(t, cache, repo.remote, "main", "")
	g.Expect(readFile(g, s.Dir(), agentPath)).To(Equal(agentBumped))
	g.Expect(cache.Stats().Clones).To(Equal(int64(5)))
}

func TestOwnerMovingToAnotherCloneReleasesTheFirst(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	repo := newRevisionRepo(t)
	repo.git(t, "tag", "v1", repo.first)
	cache, clock := newClockedCache(t, filepath.Join(t.TempDir(), "clones"))
	const owner = "Sync/apps/prod"

	tag, _, err := cache.OpenRevision(ctx, repo.remote, gitrepo.Ref{Tag: "v1"}, owner)
	g.Expect(err).NotTo(HaveOccurred())
	tag.Close()
	branch, _, err := cache.OpenRevision(ctx, repo.remote, gitrepo.Ref{Branch: "main"}, owner)
	g.Expect(err).NotTo(HaveOccurred())
	branch.Close()

	clock.Step(grace)
	g.Expect(cache.Sweep(clock.Now())).To(Succeed())
	g.Expect(tag.Dir()).NotTo(BeAnExistingFile())
	g.Expect(branch.Dir()).To(BeADirectory())
}

func TestReplacedObjectStoreIsSwept(t *testing.T) {
	g := NewWithT(t)
	repo := newRevisionRepo(t)
	repo.git(t, "tag", "v1", repo.first)
	cache, clock := newClockedCache(t, filepath.Join(t.TempDir(), "clones"))
	s := open(t, cache, repo.remote, "main", "")
	s.Close()
	tag, _ := openRevision(t, cache, repo.remote, gitrepo.Ref{Tag: "v1"})
	tag.Close()
	old := storeDir(g, s.Dir())
	g.Expect(os.RemoveAll(filepath.Join(old, "objects"))).To(Succeed())
	g.Expect(os.Mkdir(filepath.Join(old, "objects"), 0o755)).To(Succeed())

	// The branch's clone is made afresh in a new store; the tag's moves
	// there on its next use, and the damaged store goes.
	s = open(t, cache, repo.remote, "main", "")
	s.Close()
	g.Expect(storeDir(g, s.Dir())).NotTo(Equal(old))
	g.Expect(cache.Sweep(clock.Now())).To(Succeed())
	g.Expect(old).To(BeADirectory(), "the tag's clone still uses it")
	tag, _ = openRevision(t, cache, repo.remote, gitrepo.Ref{Tag: "v1"})
	g.Expect(readFile(g, tag.Dir(), agentPath)).To(Equal(seedFiles[agentPath]))
	g.Expect(storeDir(g, tag.Dir())).To(Equal(storeDir(g, s.Dir())))
	tag.Close()
	g.Expect(cache.Sweep(clock.Now())).To(Succeed())
	g.Expect(old).NotTo(BeAnExistingFile())
	g.Expect(cache.Stats()).To(Equal(gitrepo.CacheStats{Clones: 4}))
}

func TestWhatAStoppedProcessLeftIsSwept(t *testing.T) {
	g := NewWithT(t)
	repo := newRevisionRepo(t)
	root := filepath.Join(t.TempDir(), "clones")
	before, err := gitrepo.NewCache(root)
	g.Expect(err).NotTo(HaveOccurred())
	s := open(t, before, repo.remote, "main", "")
	dir := s.Dir()
	s.Close()
	repoDir := filepath.Dir(dir)

	// The process stopped while it made a clone and a store, removed a
	// clone, and rewrote the index of the kept clone; an older version
	// left a clone of its own layout.
	for _, leftover := range []string{
		filepath.Join(dir+".new-1234", ".git", "objects", "pack"),
		filepath.Join(repoDir, "store-2.new-5678", "objects"),
		filepath.Join(root, ".trash", "91011", "clusters"),
		filepath.Join(root, "0123456789abcdef01234567", ".git", "objects"),
	} {
		g.Expect(os.MkdirAll(leftover, 0o755)).To(Succeed())
	}
	g.Expect(os.WriteFile(filepath.Join(dir, ".git", "index"), []byte("DIRC"), 0o644)).To(Succeed())

	restarted, clock := newClockedCache(t, root)
	g.Expect(entryNames(g, root)).To(ConsistOf(".trash", filepath.Base(repoDir)))
	g.Expect(entryNames(g, filepath.Join(root, ".trash"))).To(BeEmpty())
	g.Expect(entryNames(g, repoDir)).To(ConsistOf("store-1", filepath.Base(dir)))

	// Nobody came back for the clone.
	clock.Step(grace)
	g.Expect(restarted.Sweep(clock.Now())).To(Succeed())
	expectEmpty(g, root)

	s = open(t, restarted, repo.remote, "main", "")
	g.Expect(readFile(g, s.Dir(), agentPath)).To(Equal(agentBumped))
	g.Expect(restarted.Stats()).To(Equal(gitrepo.CacheStats{Clones: 1}))
}

func TestStartSweeps(t *testing.T) {
	g := NewWithT(t)
	repo := newRevisionRepo(t)
	root := filepath.Join(t.TempDir(), "clones")
	cache, clock := newClockedCache(t, root)
	s, err := cache.Open(context.Background(), repo.remote, gitrepo.OpenOptions{Branch: "main", Owner: "Sync/apps/prod"})
	g.Expect(err).NotTo(HaveOccurred())
	s.Close()

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- cache.Start(ctx) }()
	g.Eventually(clock.HasWaiters).Should(BeTrue(), "Start waits for its ticker")
	g.Expect(cache.NeedLeaderElection()).To(BeFalse())

	cache.Release("Sync/apps/prod")
	// Within a minute of the release: the clone is idle for 30 seconds at
	// the third sweep, 45 seconds on.
	clock.Step(45 * time.Second)
	g.Eventually(func() []string { return entryNames(g, root) }).Should(ConsistOf(".trash"))
	g.Expect(s.Dir()).NotTo(BeAnExistingFile())

	cancel()
	g.Eventually(done).Should(Receive(BeNil()))
}
