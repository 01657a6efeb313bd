package registry

import (
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	clocktesting "k8s.io/utils/clock/testing"
)

func TestStoreRoundTripAndRestart(t *testing.T) {
	g := NewWithT(t)
	dir := filepath.Join(t.TempDir(), "tags")
	store := Store{Dir: dir}

	_, err := store.Tags("apps/agent")
	g.Expect(err).To(MatchError(fs.ErrNotExist))

	g.Expect(store.SetTags("apps/agent", []string{"1.0.0", "1.1.0"})).To(Succeed())
	g.Expect(store.SetTags("apps/web", []string{"v2"})).To(Succeed())
	g.Expect(store.SetTags("apps/empty", nil)).To(Succeed())
	g.Expect(store.SetTags("apps/agent", []string{"1.0.0", "1.1.0", "1.2.0"})).To(Succeed())

	// A new Store on the same directory, as after a restart.
	restarted := Store{Dir: dir}
	g.Expect(restarted.Tags("apps/agent")).To(Equal([]string{"1.0.0", "1.1.0", "1.2.0"}))
	g.Expect(restarted.Tags("apps/web")).To(Equal([]string{"v2"}))
	g.Expect(restarted.Tags("apps/empty")).To(BeEmpty())

	g.Expect(restarted.Delete("apps/web")).To(Succeed())
	g.Expect(restarted.Delete("apps/web")).To(Succeed())
	_, err = restarted.Tags("apps/web")
	g.Expect(err).To(MatchError(fs.ErrNotExist))

	// One file per key, no temporary files left behind.
	entries, err := os.ReadDir(dir)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(entries).To(HaveLen(2))
	for _, e := range entries {
		g.Expect(e.Name()).To(MatchRegexp(`^[0-9a-f]{64}\.tags$`))
	}
}

func TestStoreKeysAreSafeFileNames(t *testing.T) {
	g := NewWithT(t)
	dir := t.TempDir()
	store := Store{Dir: dir}
	for _, key := range []string{"../../etc/passwd", "ns/name", "/abs", ""} {
		g.Expect(store.SetTags(key, []string{key + "x"})).To(Succeed())
		g.Expect(store.Tags(key)).To(Equal([]string{key + "x"}))
	}
	entries, err := os.ReadDir(dir)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(entries).To(HaveLen(4))
}

func TestStoreDetectsACutShortFile(t *testing.T) {
	g := NewWithT(t)
	store := Store{Dir: t.TempDir()}
	g.Expect(store.SetTags("apps/agent", []string{"1.0.0", "1.1.0"})).To(Succeed())
	path := store.path("apps/agent")
	whole, err := os.ReadFile(path)
	g.Expect(err).NotTo(HaveOccurred())
	for _, cut := range []int{0, 6, 12, len(whole) - 1} {
		g.Expect(os.WriteFile(path, whole[:cut], 0o600)).To(Succeed())
		_, err := store.Tags("apps/agent")
		g.Expect(err).To(MatchError(fs.ErrNotExist), "cut at %d", cut)
	}
	g.Expect(os.WriteFile(path, make([]byte, len(whole)), 0o600)).To(Succeed())
	_, err = store.Tags("apps/agent")
	g.Expect(err).To(MatchError(fs.ErrNotExist))
}

func TestStoreRejectsTagsItCannotStore(t *testing.T) {
	g := NewWithT(t)
	store := Store{Dir: t.TempDir()}
	g.Expect(store.SetTags("k", []string{"ok", "bad\ntag"})).NotTo(Succeed())
	g.Expect(store.SetTags("k", []string{""})).NotTo(Succeed())
	g.Expect(store.SetTags("k", []string{"#count 0"})).NotTo(Succeed())
	g.Expect(store.SetTags("k", []string{"bad\ttag"})).NotTo(Succeed(), "a tab separates a tag from its first-seen time")
	_, err := store.Tags("k")
	g.Expect(err).To(MatchError(fs.ErrNotExist))
}

// TestStoreWritesAtomically reads while another goroutine rewrites the same
// key: every read sees one whole list, never a mix or a partial file.
func TestStoreWritesAtomically(t *testing.T) {
	g := NewWithT(t)
	store := Store{Dir: t.TempDir()}
	short := semverTags(10)
	long := semverTags(5000)
	g.Expect(store.SetTags("apps/agent", short)).To(Succeed())

	var wg sync.WaitGroup
	wg.Go(func() {
		for i := range 50 {
			tags := short
			if i%2 == 0 {
				tags = long
			}
			if err := store.SetTags("apps/agent", tags); err != nil {
				t.Errorf("writing: %v", err)
				return
			}
		}
	})
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	reads := 0
	for running := true; running || reads == 0; reads++ {
		select {
		case <-done:
			running = false
		default:
		}
		got, err := store.Tags("apps/agent")
		g.Expect(err).NotTo(HaveOccurred())
		if !slices.Equal(got, short) && !slices.Equal(got, long) {
			t.Fatalf("read a list of %d tags that was never written", len(got))
		}
	}
	entries, err := os.ReadDir(store.Dir)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(entries).To(HaveLen(1))
}

func TestStoreKeepsFirstSeenTimesAcrossRestarts(t *testing.T) {
	g := NewWithT(t)
	dir := t.TempDir()
	t0 := time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)
	clk := clocktesting.NewFakePassiveClock(t0)
	store := Store{Dir: dir, Clock: clk}
	g.Expect(store.SetTags("apps/agent", []string{"1.0.0", "1.1.0"})).To(Succeed())

	clk.SetTime(t0.Add(time.Hour))
	g.Expect(store.SetTags("apps/agent", []string{"1.0.0", "1.1.0", "1.2.0"})).To(Succeed())

	// A new Store on the same directory, as after a restart, a day later.
	restarted := Store{Dir: dir, Clock: clocktesting.NewFakePassiveClock(t0.Add(24 * time.Hour))}
	seen := func() map[string]time.Time {
		tags, err := restarted.SeenTags("apps/agent")
		g.Expect(err).NotTo(HaveOccurred())
		m := map[string]time.Time{}
		for _, tag := range tags {
			m[tag.Name] = tag.FirstSeen.UTC()
		}
		return m
	}
	g.Expect(seen()).To(Equal(map[string]time.Time{"1.0.0": t0, "1.1.0": t0, "1.2.0": t0.Add(time.Hour)}))
	g.Expect(restarted.Tags("apps/agent")).To(Equal([]string{"1.0.0", "1.1.0", "1.2.0"}))

	// A tag that disappears and comes back is seen anew.
	g.Expect(restarted.SetTags("apps/agent", []string{"1.0.0", "1.2.0"})).To(Succeed())
	g.Expect(restarted.SetTags("apps/agent", []string{"1.0.0", "1.1.0", "1.2.0"})).To(Succeed())
	g.Expect(seen()).To(Equal(map[string]time.Time{"1.0.0": t0, "1.1.0": t0.Add(24 * time.Hour), "1.2.0": t0.Add(time.Hour)}))
}

func TestStoreReadsTagsWrittenWithoutFirstSeenTimes(t *testing.T) {
	g := NewWithT(t)
	store := Store{Dir: t.TempDir(), Clock: clocktesting.NewFakePassiveClock(time.Date(2026, 11, 2, 0, 0, 0, 0, time.UTC))}
	// The format of uprev before first-seen times: one tag a line.
	written := time.Date(2026, 11, 1, 8, 30, 0, 0, time.UTC)
	path := store.path("apps/agent")
	g.Expect(os.WriteFile(path, []byte("1.0.0\n1.1.0\n#count 2\n"), 0o600)).To(Succeed())
	g.Expect(os.Chtimes(path, written, written)).To(Succeed())

	g.Expect(store.Tags("apps/agent")).To(Equal([]string{"1.0.0", "1.1.0"}))
	tags, err := store.SeenTags("apps/agent")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(tags).To(HaveLen(2))
	for _, tag := range tags {
		g.Expect(tag.FirstSeen.UTC()).To(Equal(written), "a tag without a time counts from its file's last write")
	}
	// The next scan writes those times down.
	g.Expect(store.SetTags("apps/agent", []string{"1.0.0", "1.1.0", "1.2.0"})).To(Succeed())
	tags, err = store.SeenTags("apps/agent")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(tags[0].FirstSeen.UTC()).To(Equal(written))
	g.Expect(tags[2].FirstSeen.UTC()).To(Equal(time.Date(2026, 11, 2, 0, 0, 0, 0, time.UTC)))
}
