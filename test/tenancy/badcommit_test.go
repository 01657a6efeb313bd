package tenancy

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	uprevv1 "github.com/uprev-dev/uprev/api/v1alpha1"
	"github.com/uprev-dev/uprev/internal/testenv/gitserver"
	"github.com/uprev-dev/uprev/internal/testenv/manager"
)

// TestCraftedCommitWritesNothingOutsideItsClone pushes, as a tenant can to
// their own Git server, a commit whose tree holds `..` and `.git` entries
// aimed at the files next to the kept clone and at the clone's .git.
func TestCraftedCommitWritesNothingOutsideItsClone(t *testing.T) {
	g := NewWithT(t)
	storage := t.TempDir()
	manager.Start(t, manager.Build(t), kubeconfigPath, storage, "--controllers=sync")
	team := newNamespace(t, "team")
	git := gitserver.Start(t)
	url := git.InitRepo(t, "apps", "main", map[string]string{"mine.yaml": configMap(team, "mine")})
	s := newSync(t, team, url, localTarget())
	conds := func() []metav1.Condition { return s.Status.Conditions }
	g.Eventually(readyCondition(s, conds)).Should(HaveField("Status", metav1.ConditionTrue))

	// What the commit aims at: a file next to the kept clone (where the
	// other clones and object stores of the repository live) and the
	// clone's own .git, which names the object store it uses.
	clones, err := filepath.Glob(filepath.Join(storage, "git", "*", "branch-*"))
	g.Expect(err).NotTo(HaveOccurred())
	// A clone being made (a later run's, on a loaded machine) is written
	// under a temporary name first; it is not a kept clone.
	clones = slices.DeleteFunc(clones, func(c string) bool { return strings.Contains(filepath.Base(c), ".new-") })
	g.Expect(clones).To(HaveLen(1), "the Sync's kept clone")
	clone := clones[0]
	outside := filepath.Join(filepath.Dir(clone), "sentinel")
	g.Expect(os.WriteFile(outside, []byte("untouched\n"), 0o644)).To(Succeed())
	watched := []string{outside, filepath.Join(clone, ".git", "commondir"), filepath.Join(clone, ".git", "config")}
	before := readAll(watched)

	bad := git.CommitTree(t, "apps", "main", false,
		gitserver.TreeEntry{Name: "..", Entries: []gitserver.TreeEntry{{Name: "sentinel", Content: "pwned\n"}}},
		gitserver.TreeEntry{Name: ".git", Entries: []gitserver.TreeEntry{
			{Name: "commondir", Content: "../../elsewhere\n"}, {Name: "config", Content: "[core]\n\tworktree = /\n"},
		}},
		gitserver.TreeEntry{Name: "theirs.yaml", Content: configMap(team, "theirs")},
	)
	for range 2 { // a retry writes nothing either
		requestReconcile(t, s)
		g.Eventually(readyCondition(s, conds)).Should(HaveField("Message", ContainSubstring(bad)), "a run on the crafted commit")
		g.Expect(readAll(watched)).To(Equal(before), "nothing outside the clone changes")
		g.Expect(readyCondition(s, conds)(g)).To(And(
			HaveField("Status", metav1.ConditionFalse),
			HaveField("Reason", uprevv1.BadCommitReason),
			HaveField("Message", ContainSubstring(`".." is ..`))))
	}
	g.Expect(exists(g, &corev1.ConfigMap{}, team, "theirs")).To(BeFalse(), "nothing of the bad commit is applied")
}

// readAll returns the content of each file, or the error reading it.
func readAll(paths []string) map[string]string {
	files := map[string]string{}
	for _, p := range paths {
		content, err := os.ReadFile(p)
		if err != nil {
			files[p] = err.Error()
			continue
		}
		files[p] = string(content)
	}
	return files
}
