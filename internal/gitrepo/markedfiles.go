package gitrepo

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"path"
	"path/filepath"
	"strings"

	"github.com/fluxcd/pkg/cache"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
)

// maxIndexedTrees bounds how many trees the index of files holding a token
// remembers, across every kept clone: about 100 bytes each, plus the names
// of the files found.
const maxIndexedTrees = 1 << 16

// indexedTree is what the index knows of one tree object.
type indexedTree struct {
	// files are the regular files under the tree whose content holds the
	// token, relative to the tree.
	files []string
	// links says a symbolic link or a submodule is under the tree: what
	// holds the token behind it is not known from the tree alone.
	links bool
}

// treeIndex remembers, by token and tree object, the files under the tree
// that hold the token. Trees are content addressed, so an entry holds in
// every repository and never goes stale: a run after a commit reads only
// the trees and blobs that the commit changed.
var treeIndex = func() *cache.LRU[indexedTree] {
	lru, err := cache.NewLRU[indexedTree](maxIndexedTrees)
	if err != nil {
		panic(err) // only for a capacity that is not positive
	}
	return lru
}()

// FilesContaining returns the files under dir, a slash-separated directory
// relative to the working tree's root, whose content holds one of tokens, relative
// to dir, as the tree of the commit that the working tree was handed out at
// records them. It is meant for an EditFunc, before it writes anything.
//
// known is false, with no files, when the answer cannot be read from a
// tree: the working tree holds a merge rather than one commit, dir is not a
// directory of that tree, or a symbolic link or submodule is under it. The
// caller then reads the files themselves.
//
// Each tree is read once per token while the index remembers it, so the
// cost of a call follows what changed since the trees were last read, not
// the size of the repository.
func (s *Session) FilesContaining(dir string, tokens ...string) (files []string, known bool, err error) {
	if s.editBase.IsZero() {
		return nil, false, nil
	}
	commit, err := s.repo.CommitObject(s.editBase)
	if err != nil {
		return nil, false, fmt.Errorf("reading commit %s: %w", s.editBase, err)
	}
	hash := commit.TreeHash
	if dir == "" {
		dir = "."
	}
	if !filepath.IsLocal(dir) {
		return nil, false, nil
	}
	if dir = path.Clean(filepath.ToSlash(dir)); dir != "." {
		root, err := s.repo.TreeObject(hash)
		if err != nil {
			return nil, false, fmt.Errorf("reading the tree of %s: %w", s.editBase, err)
		}
		entry, err := root.FindEntry(dir)
		if errors.Is(err, object.ErrEntryNotFound) || errors.Is(err, object.ErrDirectoryNotFound) {
			return nil, false, nil
		}
		if err != nil {
			return nil, false, fmt.Errorf("finding %s in the tree of %s: %w", dir, s.editBase, err)
		}
		if entry.Mode != filemode.Dir {
			return nil, false, nil
		}
		hash = entry.Hash
	}
	t, err := s.indexTree(hash, tokens)
	if err != nil || t.links {
		return nil, false, err
	}
	return append([]string{}, t.files...), true, nil
}

// indexTree returns what the index knows of the tree hash, reading the
// tree, and those of its subtrees and blobs the index does not know yet.
func (s *Session) indexTree(hash plumbing.Hash, tokens []string) (indexedTree, error) {
	key := strings.Join(tokens, "\x00") + "\x00" + hash.String()
	if t, err := treeIndex.Get(key); err == nil {
		return t, nil
	}
	tree, err := s.repo.TreeObject(hash)
	if err != nil {
		return indexedTree{}, fmt.Errorf("reading tree %s: %w", hash, err)
	}
	var t indexedTree
	for _, e := range tree.Entries {
		switch e.Mode {
		case filemode.Dir:
			sub, err := s.indexTree(e.Hash, tokens)
			if err != nil {
				return indexedTree{}, err
			}
			t.links = t.links || sub.links
			for _, f := range sub.files {
				t.files = append(t.files, e.Name+"/"+f)
			}
		case filemode.Regular, filemode.Executable, filemode.Deprecated:
			holds, err := s.blobContains(e.Hash, tokens)
			if err != nil {
				return indexedTree{}, err
			}
			if holds {
				t.files = append(t.files, e.Name)
			}
		default:
			t.links = true
		}
	}
	_ = treeIndex.Set(key, t) // an error only says another caller set it first
	return t, nil
}

// blobContains reports whether the blob hash holds one of tokens.
func (s *Session) blobContains(hash plumbing.Hash, tokens []string) (bool, error) {
	blob, err := s.repo.BlobObject(hash)
	if err != nil {
		return false, fmt.Errorf("reading blob %s: %w", hash, err)
	}
	r, err := blob.Reader()
	if err != nil {
		return false, fmt.Errorf("reading blob %s: %w", hash, err)
	}
	defer func() { _ = r.Close() }() // read only
	content, err := io.ReadAll(r)
	if err != nil {
		return false, fmt.Errorf("reading blob %s: %w", hash, err)
	}
	for _, token := range tokens {
		if bytes.Contains(content, []byte(token)) {
			return true, nil
		}
	}
	return false, nil
}
