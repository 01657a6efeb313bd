package gitserver

import (
	"errors"
	"sort"
	"testing"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
)

// TreeEntry is an entry of a tree that CommitTree writes, under any name,
// including those no git client would write (`..`, `.git`, a name with a
// slash, a name twice): a file with Content, a symbolic link to Link, or a
// directory of Entries when Entries is not nil.
type TreeEntry struct {
	Name    string
	Content string
	Link    string
	Entries []TreeEntry
}

// CommitTree commits on branch of the repository name a tree holding the
// entries of the branch tip's tree and entries, or entries alone, in a
// commit without parent, when orphan is set. It writes the objects
// straight into the bare repository, as a push to a server that does not
// check what it receives (git's receive.fsckObjects off, the default)
// stores them, moves branch to the commit and returns its SHA.
func (s *Server) CommitTree(t testing.TB, name, branch string, orphan bool, entries ...TreeEntry) string {
	t.Helper()
	repo, err := git.PlainOpen(s.RepoDir(name))
	if err != nil {
		t.Fatalf("opening repository %s: %v", name, err)
	}
	ref := plumbing.NewBranchReferenceName(branch)
	var tree []object.TreeEntry
	var parents []plumbing.Hash
	if !orphan {
		tip, err := repo.Reference(ref, true)
		if err != nil {
			t.Fatalf("reading branch %s: %v", branch, err)
		}
		c, err := repo.CommitObject(tip.Hash())
		if err == nil {
			var base *object.Tree
			if base, err = c.Tree(); err == nil {
				tree = append(tree, base.Entries...)
			}
		}
		if err != nil {
			t.Fatalf("reading the tip of %s: %v", branch, err)
		}
		parents = []plumbing.Hash{tip.Hash()}
	}
	for _, e := range entries {
		tree = append(tree, storeTreeEntry(t, repo, e))
	}
	who := object.Signature{Name: AuthorName, Email: AuthorEmail, When: time.Now()}
	commit := storeObject(t, repo, &object.Commit{
		Author: who, Committer: who, Message: "Crafted tree\n", TreeHash: storeTree(t, repo, tree), ParentHashes: parents,
	})
	if err := repo.Storer.SetReference(plumbing.NewHashReference(ref, commit)); err != nil {
		t.Fatalf("moving branch %s: %v", branch, err)
	}
	return commit.String()
}

func storeTreeEntry(t testing.TB, repo *git.Repository, e TreeEntry) object.TreeEntry {
	switch {
	case e.Entries != nil:
		var entries []object.TreeEntry
		for _, child := range e.Entries {
			entries = append(entries, storeTreeEntry(t, repo, child))
		}
		return object.TreeEntry{Name: e.Name, Mode: filemode.Dir, Hash: storeTree(t, repo, entries)}
	case e.Link != "":
		return object.TreeEntry{Name: e.Name, Mode: filemode.Symlink, Hash: storeBlob(t, repo, e.Link)}
	default:
		return object.TreeEntry{Name: e.Name, Mode: filemode.Regular, Hash: storeBlob(t, repo, e.Content)}
	}
}

func storeTree(t testing.TB, repo *git.Repository, entries []object.TreeEntry) plumbing.Hash {
	sort.Sort(object.TreeEntrySorter(entries))
	return storeObject(t, repo, &object.Tree{Entries: entries})
}

func storeBlob(t testing.TB, repo *git.Repository, content string) plumbing.Hash {
	obj := repo.Storer.NewEncodedObject()
	obj.SetType(plumbing.BlobObject)
	w, err := obj.Writer()
	if err == nil {
		_, err = w.Write([]byte(content))
		err = errors.Join(err, w.Close())
	}
	if err != nil {
		t.Fatalf("writing a blob: %v", err)
	}
	hash, err := repo.Storer.SetEncodedObject(obj)
	if err != nil {
		t.Fatalf("storing a blob: %v", err)
	}
	return hash
}

func storeObject(t testing.TB, repo *git.Repository, o interface {
	Encode(plumbing.EncodedObject) error
}) plumbing.Hash {
	obj := repo.Storer.NewEncodedObject()
	if err := o.Encode(obj); err != nil {
		t.Fatalf("encoding an object: %v", err)
	}
	hash, err := repo.Storer.SetEncodedObject(obj)
	if err != nil {
		t.Fatalf("storing an object: %v", err)
	}
	return hash
}
