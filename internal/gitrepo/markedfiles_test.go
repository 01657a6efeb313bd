package gitrepo_test

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/uprev-dev/uprev/internal/gitrepo"
	"github.com/uprev-dev/uprev/internal/testenv/gitserver"
)

// marker is the token the tests look for.
const marker = `{"$imagepolicy"`

// filesContaining runs one write-back on branch whose edit asks
// FilesContaining(dir, tokens...) (default: marker) before writing
// anything, and returns what it answered.
func filesContaining(t *testing.T, c *gitrepo.Cache, r *gitrepo.Remote, branch, pushBranch, dir string, tokens ...string) (files []string, known bool) {
	t.Helper()
	s := open(t, c, r, branch, pushBranch)
	defer s.Close()
	_, err := s.WriteBack(context.Background(), author, func(string, *gitrepo.History) (gitrepo.Edit, error) {
		if len(tokens) == 0 {
			tokens = []string{marker}
		}
		var err error
		files, known, err = s.FilesContaining(dir, tokens...)
		return gitrepo.Edit{}, err
	})
	if err != nil {
		t.Fatalf("writing back: %v", err)
	}
	return files, known
}

func TestFilesContainingListsMarkedFilesOfTheCommit(t *testing.T) {
	g := NewWithT(t)
	srv := gitserver.Start(t)
	remote := newRemote(t, srv.InitRepo(t, "fleet", "main", map[string]string{
		"clusters/prod/agent.yaml":   "image: a:1 # " + marker + `: "ns:agent"}` + "\n",
		"clusters/prod/plain.yaml":   "image: b:1\n",
		"clusters/staging/app.yaml":  "image: c:1 # " + marker + `: "ns:app"}` + "\n",
		"clusters/staging/notes.txt": marker + "\n",
		"README.md":                  "no marker\n",
		"sources/k8s.yaml":           `version: v1.30.1 # {"$uprev": "ns:k8s"}` + "\n",
	}), nil)
	cache := newCache(t)

	files, known := filesContaining(t, cache, remote, "main", "main", ".")
	g.Expect(known).To(BeTrue())
	g.Expect(files).To(ConsistOf("clusters/prod/agent.yaml", "clusters/staging/app.yaml", "clusters/staging/notes.txt"),
		"every file holding the token, whatever its name: the rewrite decides which it reads")

	files, known = filesContaining(t, cache, remote, "main", "main", ".", marker, `"$uprev"`)
	g.Expect(known).To(BeTrue())
	g.Expect(files).To(ConsistOf("clusters/prod/agent.yaml", "clusters/staging/app.yaml", "clusters/staging/notes.txt", "sources/k8s.yaml"),
		"a file holding any of the tokens")

	files, known = filesContaining(t, cache, remote, "main", "main", "./clusters/staging")
	g.Expect(known).To(BeTrue())
	g.Expect(files).To(ConsistOf("app.yaml", "notes.txt"), "relative to the directory asked")

	// A commit that adds a marker to one file and removes one from
	// another is seen in the next session: the index follows the tree.
	srv.CommitFile(t, "fleet", "main", "clusters/prod/plain.yaml", "image: b:1 # "+marker+`: "ns:b"}`+"\n", "Mark b")
	srv.CommitFile(t, "fleet", "main", "clusters/prod/agent.yaml", "image: a:1\n", "Unmark the agent")
	files, known = filesContaining(t, cache, remote, "main", "main", "clusters")
	g.Expect(known).To(BeTrue())
	g.Expect(files).To(ConsistOf("prod/plain.yaml", "staging/app.yaml", "staging/notes.txt"))
}

func TestFilesContainingIsUnknownWhereTheTreeCannotTell(t *testing.T) {
	g := NewWithT(t)
	srv := gitserver.Start(t)
	remote := newRemote(t, srv.InitRepo(t, "fleet", "main", map[string]string{
		"apps/agent.yaml": "image: a:1 # " + marker + `: "ns:agent"}` + "\n",
		"other/app.yaml":  "image: c:1\n",
	}), nil)
	srv.CommitSymlink(t, "fleet", "main", "other/link.yaml", "../apps/agent.yaml", "Link the agent")
	cache := newCache(t)

	for _, dir := range []string{"missing", "apps/agent.yaml", "../outside", "/abs"} {
		files, known := filesContaining(t, cache, remote, "main", "main", dir)
		g.Expect(known).To(BeFalse(), "%s is not a directory of the tree", dir)
		g.Expect(files).To(BeNil())
	}
	_, known := filesContaining(t, cache, remote, "main", "main", "other")
	g.Expect(known).To(BeFalse(), "a symbolic link under the directory: the caller walks the files")
	files, known := filesContaining(t, cache, remote, "main", "main", "apps")
	g.Expect(known).To(BeTrue(), "no link under apps")
	g.Expect(files).To(ConsistOf("agent.yaml"))

	// A push branch that diverged from main is edited on a merge, which
	// is no commit's tree.
	writeBack(t, cache, remote, "main", "uprev/updates", map[string]string{"apps/agent.yaml": "image: a:2 # " + marker + `: "ns:agent"}` + "\n"})
	srv.CommitFile(t, "fleet", "main", "apps/new.yaml", "image: d:1\n", "Add d")
	_, known = filesContaining(t, cache, remote, "main", "uprev/updates", "apps")
	g.Expect(known).To(BeFalse(), "the working tree holds a merge")
}
