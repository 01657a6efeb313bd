package controllers

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/gomega"

	uprevv1 "github.com/uprev-dev/uprev/api/v1alpha1"
	"github.com/uprev-dev/uprev/internal/testenv/gitserver"
)

// raceHook is a pre-receive hook that, the first time anyone pushes, moves
// main to the commit prepared on the branch "someone" before the push
// completes: the push is then rejected because main moved, exactly as when
// another person's push wins the race. Later pushes go through.
const raceHook = `#!/bin/sh
[ -e race.done ] && exit 0
: > race.done
unset GIT_QUARANTINE_PATH GIT_OBJECT_DIRECTORY GIT_ALTERNATE_OBJECT_DIRECTORIES
git update-ref refs/heads/main "$(git rev-parse refs/heads/someone)" "$(git rev-parse refs/heads/main)"
`

func TestAutomationKeepsACommitThatWonThePushRace(t *testing.T) {
	g := NewWithT(t)
	f := newAutomationFixture(t, []string{"1.0.0"}, map[string]string{
		"apps/agent.yaml": "image: IMAGE:1.0.0 # {\"$imagepolicy\": \"NS:agent\"}\n",
	})
	pol := newPolicy(t, f.ns, "agent", semverChoice(">=1.0.0"))
	waitForLatestTag(t, pol, "1.0.0")
	auto := newAutomation(t, f.ns, f.url)
	waitForReady(t, auto)
	base := f.tip("main")

	// Someone's commit, ready to land on main while uprev pushes.
	f.git.Git(t, fleetRepo, "branch", "someone", "main")
	theirs := f.git.CommitFile(t, fleetRepo, "someone", "apps/notes.md", "pinned by hand\n", "Add notes")
	hook := filepath.Join(f.git.RepoDir(fleetRepo), "hooks", "pre-receive")
	g.Expect(os.WriteFile(hook, []byte(raceHook), 0o755)).To(Succeed())

	f.pushTag("1.1.0")
	sha := waitForPush(t, auto, "")
	g.Expect(filepath.Join(f.git.RepoDir(fleetRepo), "race.done")).To(BeAnExistingFile(), "the hook made the first push lose the race")

	commits := f.log("main")
	g.Expect(commits).To(HaveLen(3))
	g.Expect(commits[0].SHA).To(Equal(sha))
	g.Expect(commits[0].Parents).To(Equal([]string{theirs}), "the update was made again on top of their commit, not merged or forced")
	g.Expect(commits[0].Subject).To(Equal("Update agent to 1.1.0"))
	g.Expect(commits[1].SHA).To(Equal(theirs))
	g.Expect(commits[2].SHA).To(Equal(base))
	g.Expect(f.readFile("main", "apps/notes.md")).To(Equal("pinned by hand\n"))
	g.Expect(f.readFile("main", "apps/agent.yaml")).To(ContainSubstring(":1.1.0 #"))
	g.Eventually(func(g Gomega) {
		g.Expect(readyReason(g, auto)).To(Equal("Succeeded: pushed " + sha[:10] + " to main"))
	}).Should(Succeed())
}

func TestAutomationLosesNoCommitUnderQuickChanges(t *testing.T) {
	g := NewWithT(t)
	f := newAutomationFixture(t, []string{"1.0.0"}, map[string]string{
		"apps/agent.yaml": "image: IMAGE:1.0.0 # {\"$imagepolicy\": \"NS:agent\"}\n",
		"apps/notes.md":   "",
	})
	pol := newPolicy(t, f.ns, "agent", semverChoice(">=1.0.0"))
	waitForLatestTag(t, pol, "1.0.0")
	auto := newAutomation(t, f.ns, f.url)
	waitForReady(t, auto)

	// New tags and other people's pushes arrive together, as fast as they
	// can: each of their pushes, and each run of the automation, may find
	// the branch moved.
	person := newPusher(t, f.url)
	tags := []string{"1.1.0", "1.2.0", "1.3.0", "1.4.0"}
	var notes []string
	for i, tag := range tags {
		f.pushTag(tag)
		for j := range 2 {
			note := fmt.Sprintf("note %d.%d", i, j)
			person.push("apps/"+strings.ReplaceAll(note, " ", "-")+".md", note)
			notes = append(notes, note)
		}
	}
	waitForLatestTag(t, pol, "1.4.0")
	g.Eventually(func(g Gomega) {
		g.Expect(f.readFile("main", "apps/agent.yaml")).To(ContainSubstring(":1.4.0 #"))
	}).Should(Succeed())

	commits := f.log("main")
	var subjects []string
	for _, c := range commits {
		g.Expect(len(c.Parents)).To(BeNumerically("<=", 1), "history stays linear: %s has parents %v", c.Subject, c.Parents)
		subjects = append(subjects, c.Subject)
	}
	for _, note := range notes {
		g.Expect(subjects).To(ContainElement(note), "nobody's commit is lost")
		g.Expect(f.readFile("main", "apps/"+strings.ReplaceAll(note, " ", "-")+".md")).To(Equal(note + "\n"))
	}
	var updates []string
	for _, s := range subjects {
		if strings.HasPrefix(s, "Update ") {
			updates = append(updates, s)
		}
	}
	g.Expect(updates).NotTo(BeEmpty())
	g.Expect(updates[0]).To(Equal("Update agent to 1.4.0"), "the newest update is on top of what it updated")
	g.Expect(len(commits)).To(Equal(1+len(notes)+len(updates)), "initial commit, the notes, the updates: %v", subjects)
	g.Eventually(func(g Gomega) {
		g.Expect(getAutomation(g, auto).Status.LastPushCommit).To(Equal(commitOf(commits, "Update agent to 1.4.0")))
		g.Expect(readyReason(g, auto)).To(HavePrefix("Succeeded: "))
	}).Should(Succeed())
}

// commitOf returns the SHA of the newest commit with subject.
func commitOf(commits []gitserver.Commit, subject string) string {
	for _, c := range commits {
		if c.Subject == subject {
			return c.SHA
		}
	}
	return ""
}

// readyReason returns "reason: message" of auto's Ready condition.
func readyReason(g Gomega, auto *uprevv1.UpdateAutomation) string {
	c := readyCondition(g, auto)
	return c.Reason + ": " + c.Message
}

// pusher is another person working on the repository with the git CLI:
// they commit and push, and when their push is rejected they rebase and
// push again.
type pusher struct {
	t   testing.TB
	dir string
}

// newPusher clones url for a person.
func newPusher(t testing.TB, url string) *pusher {
	t.Helper()
	p := &pusher{t: t, dir: t.TempDir()}
	p.git("clone", "--quiet", "--branch", "main", url, p.dir)
	return p
}

// push commits path with content as "content" and pushes it to main.
func (p *pusher) push(path, content string) {
	p.t.Helper()
	p.pushFiles(map[string]string{path: content + "\n"}, content)
}

// pushFiles commits files (path → content) as msg and pushes the commit to
// main, rebasing it on what others pushed meanwhile.
func (p *pusher) pushFiles(files map[string]string, msg string) {
	p.t.Helper()
	for path, content := range files {
		full := filepath.Join(p.dir, filepath.FromSlash(path))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			p.t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
			p.t.Fatal(err)
		}
	}
	p.git("add", "--all")
	p.git("commit", "--quiet", "-m", msg)
	for attempt := 1; ; attempt++ {
		_, err := p.tryGit("push", "--quiet", "origin", "main")
		if err == nil {
			return
		}
		if attempt == 10 {
			p.t.Fatalf("pushing %q: %v", msg, err)
		}
		p.git("pull", "--quiet", "--rebase", "origin", "main")
	}
}

// sync brings the clone up to date with main.
func (p *pusher) sync() {
	p.t.Helper()
	p.git("pull", "--quiet", "--rebase", "origin", "main")
}

func (p *pusher) git(args ...string) string {
	p.t.Helper()
	out, err := p.tryGit(args...)
	if err != nil {
		p.t.Fatalf("git %s: %v", strings.Join(args, " "), err)
	}
	return out
}

func (p *pusher) tryGit(args ...string) (string, error) {
	cmd := exec.Command("git", args...)
	cmd.Dir = p.dir
	cmd.Env = []string{
		"PATH=" + os.Getenv("PATH"), "HOME=" + p.dir,
		"GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null",
		"GIT_AUTHOR_NAME=" + gitserver.AuthorName, "GIT_AUTHOR_EMAIL=" + gitserver.AuthorEmail,
		"GIT_COMMITTER_NAME=" + gitserver.AuthorName, "GIT_COMMITTER_EMAIL=" + gitserver.AuthorEmail,
	}
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("%w: %s", err, stderr.String())
	}
	return strings.TrimSpace(out.String()), nil
}
