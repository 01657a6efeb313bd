package cli

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	uprevv1 "github.com/uprev-dev/uprev/api/v1alpha1"
	"github.com/uprev-dev/uprev/internal/guard"
	"github.com/uprev-dev/uprev/internal/plan"
)

// newCheckout makes a Git repository with one commit on main, committed
// as and configured for Alice, and a change staged but not committed.
func newCheckout(t *testing.T) (string, *git.Repository) {
	t.Helper()
	g := NewWithT(t)
	dir := t.TempDir()
	repo, err := git.PlainInitWithOptions(dir, &git.PlainInitOptions{InitOptions: git.InitOptions{DefaultBranch: "refs/heads/main"}})
	g.Expect(err).NotTo(HaveOccurred())
	cfg, err := repo.Config()
	g.Expect(err).NotTo(HaveOccurred())
	cfg.User.Name, cfg.User.Email = "Alice", "alice@example.com"
	g.Expect(repo.SetConfig(cfg)).To(Succeed())
	w, err := repo.Worktree()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(os.WriteFile(filepath.Join(dir, "agent.yaml"), []byte("image: agent:1.4.1\n"), 0o644)).To(Succeed())
	_, err = w.Add("agent.yaml")
	g.Expect(err).NotTo(HaveOccurred())
	who := &object.Signature{Name: "Alice", Email: "alice@example.com", When: now.Add(-time.Hour)}
	_, err = w.Commit("Add agent", &git.CommitOptions{Author: who, Committer: who})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(os.WriteFile(filepath.Join(dir, "agent.yaml"), []byte("image: agent:9.9.9\n"), 0o644)).To(Succeed())
	_, err = w.Add("agent.yaml")
	g.Expect(err).NotTo(HaveOccurred())
	return dir, repo
}

// TestReject: `uprev reject` records in the checkout a commit that
// changes no file (what is staged stays staged), as the user Git names,
// whose trailers the controller's rules read as a hold with the reason;
// it takes the entry that released that version out of the automation's
// annotation, so that the rejection holds; it names a ReleaseSource when
// there is no ImagePolicy of the name; and it refuses what it cannot do.
func TestReject(t *testing.T) {
	g := NewWithT(t)
	// Only the checkout's own configuration counts, not this machine's.
	t.Setenv("GIT_CONFIG_GLOBAL", os.DevNull)
	t.Setenv("GIT_CONFIG_NOSYSTEM", "1")
	ns := newNamespace(t)
	g.Expect(k8s.Create(t.Context(), newPolicy(ns, "agent", meta.NamespacedObjectReference{Name: "agent"}))).To(Succeed())
	g.Expect(k8s.Create(t.Context(), &uprevv1.ReleaseSource{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "kubernetes"},
		Spec: uprevv1.ReleaseSourceSpec{Interval: metav1.Duration{Duration: time.Hour},
			GitHubReleases: &uprevv1.GitHubReleasesSource{Repository: "kubernetes/kubernetes"}},
	})).To(Succeed())
	auto := newAutomation(ns, "fleet")
	auto.Annotations = map[string]string{uprevv1.HoldReleaseAnnotation: "other/web 1.0.0, " + ns + "/agent 1.5.0"}
	createWithStatus(t, auto)
	dir, repo := newCheckout(t)
	head, err := repo.Head()
	g.Expect(err).NotTo(HaveOccurred())

	r := uprev(t, "reject", "fleet", "agent", "1.5.0", "--reason", "crashes on arm64,\nsee #412", "--checkout", dir, "-n", ns, kubeconfigFlag)
	g.Expect(r.code).To(Equal(0), r.stderr)
	tip, err := repo.Head()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(r.stdout).To(Equal("updateautomation.uprev.dev/fleet: rejected " + ns + "/agent 1.5.0 in commit " + tip.Hash().String()[:10] + " on branch main.\n" +
		"Push it to the branch the automation reads (or open a pull request with it); `uprev release-hold fleet agent 1.5.0 -n " + ns + "` lifts it.\n"))
	commit, err := repo.CommitObject(tip.Hash())
	g.Expect(err).NotTo(HaveOccurred())
	parent, err := repo.CommitObject(head.Hash())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(commit.ParentHashes).To(Equal([]plumbing.Hash{head.Hash()}))
	g.Expect(commit.TreeHash).To(Equal(parent.TreeHash), "no file changes: the staged change is not committed")
	g.Expect(commit.Author.Name).To(Equal("Alice"))
	g.Expect(commit.Author.When.Unix()).To(Equal(now.Unix()))
	w, err := repo.Worktree()
	g.Expect(err).NotTo(HaveOccurred())
	st, err := w.Status()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(st.File("agent.yaml").Staging).To(Equal(git.Modified), "still staged")

	holds, _, err := plan.ReadHolds(dir, "", "")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(holds).To(Equal([]guard.Hold{{Policy: ns + "/agent", Version: "1.5.0", RevertedIn: tip.Hash().String(), Reason: "crashes on arm64, see #412"}}))
	get(t, auto)
	g.Expect(auto.Annotations).To(HaveKeyWithValue(uprevv1.HoldReleaseAnnotation, "other/web 1.0.0"), "the version released before is held again")

	r = uprev(t, "reject", "fleet", "kubernetes", "v1.31.0", "--reason", "waiting for the CNI", "--checkout", dir, "-n", ns, kubeconfigFlag)
	g.Expect(r.code).To(Equal(0), r.stderr)
	holds, _, err = plan.ReadHolds(dir, "", "")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(holds).To(ContainElement(HaveField("Policy", "ReleaseSource/"+ns+"/kubernetes")))

	for _, tc := range []struct {
		args []string
		err  string
	}{
		{[]string{"fleet", "agent", "1.6.0", "--reason", " "}, "uprev reject: a reason is required\n"},
		{[]string{"fleet", "nope", "1.6.0", "--reason", "r"}, `uprev reject: no ImagePolicy nor ReleaseSource "nope" in namespace "` + ns + "\"\n"},
		{[]string{"nope", "agent", "1.6.0", "--reason", "r"}, `uprev reject: UpdateAutomation "nope" not found in namespace "` + ns + "\" (nor an ImageUpdateAutomation)\n"},
		{[]string{"fleet", "agent", "1.6.0", "--reason", "r", "--checkout", t.TempDir()}, "uprev reject: recording the rejection in "},
	} {
		args := append([]string{"reject"}, tc.args...)
		if !slices.Contains(args, "--checkout") {
			args = append(args, "--checkout", dir)
		}
		r := uprev(t, append(args, "-n", ns, kubeconfigFlag)...)
		g.Expect(r.code).To(Equal(1), "%v", tc.args)
		g.Expect(r.stderr).To(HavePrefix(tc.err), "%v", tc.args)
	}

	all := newAutomation(ns, "all")
	all.Annotations = map[string]string{uprevv1.HoldReleaseAnnotation: "*"}
	createWithStatus(t, all)
	r = uprev(t, "reject", "all", "agent", "1.5.0", "--reason", "r", "--checkout", dir, "-n", ns, kubeconfigFlag)
	g.Expect(r.code).To(Equal(1))
	g.Expect(r.stderr).To(ContainSubstring("releases every hold"))
}
