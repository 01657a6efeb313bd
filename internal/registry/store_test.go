package registry

import (
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
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

func TestStoreLeavesTheFileOfTheSameTagsAsItIs(t *testing.T) {
	g := NewWithT(t)
	store := Store{Dir: t.TempDir()}
	g.Expect(store.SetTags("apps/agent", []string{"1.0.0", "1.1.0"})).To(Succeed())
	before, err := os.Stat(store.path("apps/agent"))
	g.Expect(err).NotTo(HaveOccurred())

	g.Expect(store.SetTags("apps/agent", []string{"1.0.0", "1.1.0"})).To(Succeed())
	after, err := os.Stat(store.path("apps/agent"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(os.SameFile(before, after)).To(BeTrue(), "a scan that found the same tags replaced the file")

	g.Expect(store.SetTags("apps/agent", []string{"1.1.0", "1.0.0"})).To(Succeed())
	g.Expect(store.Tags("apps/agent")).To(Equal([]string{"1.1.0", "1.0.0"}), "another order is written")
	g.Expect(store.SetTags("apps/agent", []string{"1.1.0"})).To(Succeed())
	g.Expect(store.Tags("apps/agent")).To(Equal([]string{"1.1.0"}))
}

// TestStoreRewritesSameTagsWithAnUnreadableTime: a scan that finds the
// stored tags leaves the file alone only when SeenTags can read it; one
// whose time is damaged is written again, its tags seen now.
func TestStoreRewritesSameTagsWithAnUnreadableTime(t *testing.T) {
	g := NewWithT(t)
	now := time.Date(2026, 11, 2, 0, 0, 0, 0, time.UTC)
	store := Store{Dir: t.TempDir(), Clock: clocktesting.NewFakePassiveClock(now)}
	g.Expect(os.WriteFile(store.path("apps/agent"), []byte("1.0.0\t17x\n1.1.0\t1764000000\n#count 2\n"), 0o600)).To(Succeed())
	_, err := store.SeenTags("apps/agent")
	g.Expect(err).To(HaveOccurred())

	g.Expect(store.SetTags("apps/agent", []string{"1.0.0", "1.1.0"})).To(Succeed())
	tags, err := store.SeenTags("apps/agent")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(tags).To(HaveLen(2))
	g.Expect(tags[0].FirstSeen.UTC()).To(Equal(now))
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

func TestStoreSeesAMovedTagAnew(t *testing.T) {
	g := NewWithT(t)
	dir := t.TempDir()
	t0 := time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)
	clk := clocktesting.NewFakePassiveClock(t0)
	store := Store{Dir: dir, Clock: clk}
	g.Expect(store.SetTags("apps/agent", []string{"1.0.0", "1.1.0"})).To(Succeed())
	seen := func(s Store) map[string]SeenTag {
		tags, err := s.SeenTags("apps/agent")
		g.Expect(err).NotTo(HaveOccurred())
		m := map[string]SeenTag{}
		for _, tag := range tags {
			tag.FirstSeen = tag.FirstSeen.UTC()
			m[tag.Name] = tag
		}
		return m
	}

	// The first digest recorded for a tag keeps its time.
	clk.SetTime(t0.Add(80 * time.Hour))
	got, err := store.SeeDigest("apps/agent", "1.1.0", "sha256:aaaa")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got.FirstSeen.UTC()).To(Equal(t0))
	g.Expect(got.Digest).To(Equal("sha256:aaaa"))
	// The same digest again changes nothing.
	clk.SetTime(t0.Add(81 * time.Hour))
	got, err = store.SeeDigest("apps/agent", "1.1.0", "sha256:aaaa")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got.FirstSeen.UTC()).To(Equal(t0))

	// Another digest: the tag moved and is seen anew.
	clk.SetTime(t0.Add(90 * time.Hour))
	got, err = store.SeeDigest("apps/agent", "1.1.0", "sha256:bbbb")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got).To(Equal(SeenTag{Name: "1.1.0", FirstSeen: got.FirstSeen, Digest: "sha256:bbbb"}))
	g.Expect(got.FirstSeen.UTC()).To(Equal(t0.Add(90 * time.Hour)))

	// A scan keeps times and digests; a new Store on the same directory,
	// as after a restart, reads both back.
	clk.SetTime(t0.Add(91 * time.Hour))
	g.Expect(store.SetTags("apps/agent", []string{"1.0.0", "1.1.0", "1.2.0"})).To(Succeed())
	restarted := Store{Dir: dir, Clock: clocktesting.NewFakePassiveClock(t0.Add(100 * time.Hour))}
	g.Expect(seen(restarted)).To(Equal(map[string]SeenTag{
		"1.0.0": {Name: "1.0.0", FirstSeen: t0},
		"1.1.0": {Name: "1.1.0", FirstSeen: t0.Add(90 * time.Hour), Digest: "sha256:bbbb"},
		"1.2.0": {Name: "1.2.0", FirstSeen: t0.Add(91 * time.Hour)},
	}))
	g.Expect(restarted.Tags("apps/agent")).To(Equal([]string{"1.0.0", "1.1.0", "1.2.0"}))

	// A tag that disappears and comes back is seen anew, with no digest.
	g.Expect(restarted.SetTags("apps/agent", []string{"1.0.0"})).To(Succeed())
	g.Expect(restarted.SetTags("apps/agent", []string{"1.0.0", "1.1.0"})).To(Succeed())
	g.Expect(seen(restarted)["1.1.0"]).To(Equal(SeenTag{Name: "1.1.0", FirstSeen: t0.Add(100 * time.Hour)}))

	// What cannot be recorded.
	_, err = restarted.SeeDigest("apps/agent", "9.9.9", "sha256:cccc")
	g.Expect(err).To(MatchError(fs.ErrNotExist))
	_, err = restarted.SeeDigest("apps/other", "1.0.0", "sha256:cccc")
	g.Expect(err).To(MatchError(fs.ErrNotExist))
	_, err = restarted.SeeDigest("apps/agent", "1.0.0", "sha256:cc\n9.9.9\t0")
	g.Expect(err).To(MatchError(ContainSubstring("invalid digest")))
}

func TestStoreReadsTagsWrittenWithoutDigests(t *testing.T) {
	g := NewWithT(t)
	store := Store{Dir: t.TempDir(), Clock: clocktesting.NewFakePassiveClock(time.Date(2026, 11, 3, 0, 0, 0, 0, time.UTC))}
	// The format of uprev before digests: a tag and its first-seen time a line.
	path := store.path("apps/agent")
	g.Expect(os.WriteFile(path, []byte("1.0.0\t1761998400\n1.1.0\t1762002000\n#count 2\n"), 0o600)).To(Succeed())

	g.Expect(store.Tags("apps/agent")).To(Equal([]string{"1.0.0", "1.1.0"}))
	tags, err := store.SeenTags("apps/agent")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(tags).To(Equal([]SeenTag{
		{Name: "1.0.0", FirstSeen: time.Unix(1761998400, 0)},
		{Name: "1.1.0", FirstSeen: time.Unix(1762002000, 0)},
	}))
	// Its first digest keeps the time; the file now has it.
	got, err := store.SeeDigest("apps/agent", "1.1.0", "sha256:aaaa")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got).To(Equal(SeenTag{Name: "1.1.0", FirstSeen: time.Unix(1762002000, 0), Digest: "sha256:aaaa"}))
	data, err := os.ReadFile(path)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(data)).To(Equal("1.0.0\t1761998400\n1.1.0\t1762002000\tsha256:aaaa\n#count 2\n"))
}

// TestStoreSerializesWritesOfAKey records digests while scans replace the
// tags: no write is lost to another's read of the file before it.
func TestStoreSerializesWritesOfAKey(t *testing.T) {
	g := NewWithT(t)
	dir := t.TempDir()
	tags := semverTags(200)
	g.Expect(Store{Dir: dir}.SetTags("apps/agent", tags)).To(Succeed())
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			// Each its own Store value, as the controllers have.
			s := Store{Dir: dir}
			for j := i; j < len(tags); j += 8 {
				if _, err := s.SeeDigest("apps/agent", tags[j], "sha256:"+strconv.Itoa(j)); err != nil {
					t.Error(err)
				}
				if err := s.SetTags("apps/agent", tags); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	seen, err := Store{Dir: dir}.SeenTags("apps/agent")
	g.Expect(err).NotTo(HaveOccurred())
	for j, tag := range seen {
		g.Expect(tag.Digest).To(Equal("sha256:"+strconv.Itoa(j)), tag.Name)
	}
}
