package gitrepo

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/format/gitignore"
	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/uprev-dev/uprev/internal/confined"
)

// signatureCleaner drops from a commit's author and committer what go-git's
// Worktree.Commit drops, so that both ways of committing write the same.
var signatureCleaner = strings.NewReplacer("<", "", ">", "", "\n", "")

// commitFiles commits, on parent, whose tree the working tree held when
// the edit began, the files the edit named: their blobs are stored, the
// trees along their paths rebuilt from the parent's, and HEAD detached at
// the commit. Nothing else is read, neither the index nor the other files.
//
// built is false, having stored at most some blobs, when the files cannot
// be committed this way and the caller must compare the whole working tree
// instead: a file lies under a directory the parent does not have (a new
// directory, which the edit may have made a symbolic link) or under one of
// its entries that is not a directory. A name that is not a valid path of
// a file in the working tree (absolute, with `..`, or in `.git`) fails it.
// The hash is zero when the tree is the parent's: nothing changed.
func (s *Session) commitFiles(parent plumbing.Hash, edit Edit, who object.Signature, signer *Signer) (hash plumbing.Hash, built bool, err error) {
	root, err := s.worktree()
	if err != nil {
		return plumbing.ZeroHash, false, err
	}
	files := make(map[string]*object.TreeEntry, len(edit.Files))
	for _, named := range edit.Files {
		name := filepath.ToSlash(filepath.Clean(filepath.FromSlash(named)))
		if !filepath.IsLocal(filepath.FromSlash(named)) || checkPath(name) != nil {
			return plumbing.ZeroHash, false, fmt.Errorf("committing %q: not the path of a file in the working tree", named)
		}
		entry, err := s.fileEntry(root, name)
		if err != nil {
			return plumbing.ZeroHash, false, fmt.Errorf("committing %s: %w", name, err)
		}
		files[name] = entry
	}
	parentCommit, err := s.repo.CommitObject(parent)
	if err != nil {
		return plumbing.ZeroHash, false, fmt.Errorf("reading commit %s: %w", parent, err)
	}
	tree, built, err := s.replaceFiles(parentCommit.TreeHash, "", files)
	if err != nil || !built {
		return plumbing.ZeroHash, built, err
	}
	if tree == parentCommit.TreeHash {
		return plumbing.ZeroHash, true, nil
	}
	who.Name, who.Email = signatureCleaner.Replace(who.Name), signatureCleaner.Replace(who.Email)
	commit := &object.Commit{Author: who, Committer: who, Message: edit.Message, TreeHash: tree, ParentHashes: []plumbing.Hash{parent}}
	if err := signer.sign(commit); err != nil {
		return plumbing.ZeroHash, false, err
	}
	obj := s.repo.Storer.NewEncodedObject()
	if err := commit.Encode(obj); err != nil {
		return plumbing.ZeroHash, false, fmt.Errorf("encoding the commit: %w", err)
	}
	if hash, err = s.repo.Storer.SetEncodedObject(obj); err != nil {
		return plumbing.ZeroHash, false, fmt.Errorf("storing the commit: %w", err)
	}
	if err := s.repo.Storer.SetReference(plumbing.NewHashReference(plumbing.HEAD, hash)); err != nil {
		return plumbing.ZeroHash, false, fmt.Errorf("detaching HEAD: %w", err)
	}
	return hash, true, nil
}

// fileEntry stores the file name of the working tree root as a blob and
// returns its tree entry, or nil when it is gone as a file: missing, under
// a parent that became a file (ENOTDIR), or become a directory.
func (s *Session) fileEntry(root *confined.Root, name string) (*object.TreeEntry, error) {
	info, err := root.Lstat(name)
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) || (err == nil && info.IsDir()) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	mode, err := filemode.NewFromOSFileMode(info.Mode())
	if err != nil {
		return nil, err
	}
	hash, err := s.storeBlob(root, name, info)
	if err != nil {
		return nil, err
	}
	return &object.TreeEntry{Hash: hash, Mode: mode}, nil
}

// replaceFiles stores the tree made from the tree hash, found at prefix, by
// putting in each file of files (its path relative to the whole tree; nil
// removes it) and returns its hash. Only the subtrees holding one of
// files are read and written. A directory left empty leaves its tree.
// built is false when a file's parent directories are not all directories
// of the tree (see commitFiles).
func (s *Session) replaceFiles(hash plumbing.Hash, prefix string, files map[string]*object.TreeEntry) (plumbing.Hash, bool, error) {
	tree, err := s.repo.TreeObject(hash)
	if err != nil {
		return plumbing.ZeroHash, false, fmt.Errorf("reading tree %s: %w", hash, err)
	}
	// The files of each subdirectory, and those of this directory.
	under := map[string]map[string]*object.TreeEntry{}
	here := map[string]*object.TreeEntry{}
	for path, entry := range files {
		name, _, nested := strings.Cut(strings.TrimPrefix(path, prefix), "/")
		if nested {
			if under[name] == nil {
				under[name] = map[string]*object.TreeEntry{}
			}
			under[name][path] = entry
			continue
		}
		here[name] = entry
	}
	entries := make([]object.TreeEntry, 0, len(tree.Entries)+len(here))
	for _, e := range tree.Entries {
		if sub, ok := under[e.Name]; ok {
			delete(under, e.Name)
			if e.Mode != filemode.Dir {
				return plumbing.ZeroHash, false, nil
			}
			h, built, err := s.replaceFiles(e.Hash, prefix+e.Name+"/", sub)
			if err != nil || !built {
				return plumbing.ZeroHash, built, err
			}
			if h != emptyTree {
				e.Hash = h
				entries = append(entries, e)
			}
			continue
		}
		if f, ok := here[e.Name]; ok {
			delete(here, e.Name)
			if e.Mode == filemode.Dir {
				// A directory made a file: what else went is not named.
				return plumbing.ZeroHash, false, nil
			}
			if f != nil {
				entries = append(entries, object.TreeEntry{Name: e.Name, Mode: f.Mode, Hash: f.Hash})
			}
			continue
		}
		entries = append(entries, e)
	}
	if len(under) > 0 {
		return plumbing.ZeroHash, false, nil
	}
	for name, f := range here {
		if f == nil {
			continue
		}
		// A new file is added unless ignored, as by `git add --all`.
		ignored, err := s.ignored(prefix + name)
		if err != nil {
			return plumbing.ZeroHash, false, err
		}
		if !ignored {
			entries = append(entries, object.TreeEntry{Name: name, Mode: f.Mode, Hash: f.Hash})
		}
	}
	// Git orders a tree's entries by name, a directory's name followed by
	// a slash.
	sortName := func(e object.TreeEntry) string {
		if e.Mode == filemode.Dir {
			return e.Name + "/"
		}
		return e.Name
	}
	slices.SortFunc(entries, func(a, b object.TreeEntry) int { return strings.Compare(sortName(a), sortName(b)) })
	obj := s.repo.Storer.NewEncodedObject()
	if err := (&object.Tree{Entries: entries}).Encode(obj); err != nil {
		return plumbing.ZeroHash, false, fmt.Errorf("encoding tree %s: %w", prefix, err)
	}
	if s.repo.Storer.HasEncodedObject(obj.Hash()) == nil {
		return obj.Hash(), true, nil
	}
	h, err := s.repo.Storer.SetEncodedObject(obj)
	if err != nil {
		return plumbing.ZeroHash, false, fmt.Errorf("storing tree %s: %w", prefix, err)
	}
	return h, true, nil
}

// ignored reports whether the .gitignore files of the directories along
// the slash-separated path name, or .git/info/exclude, ignore the file
// name, reading only those files where go-git's status reads every
// directory's.
func (s *Session) ignored(name string) (bool, error) {
	root, err := s.worktree()
	if err != nil {
		return false, err
	}
	parts := strings.Split(name, "/")
	var patterns []gitignore.Pattern
	read := func(file string, domain []string) error {
		content, err := root.ReadFile(file)
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("reading %s: %w", file, err)
		}
		for _, line := range strings.Split(string(content), "\n") {
			line = strings.TrimSuffix(line, "\r")
			if !strings.HasPrefix(line, "#") && strings.TrimSpace(line) != "" {
				patterns = append(patterns, gitignore.ParsePattern(line, domain))
			}
		}
		return nil
	}
	if err := read(".git/info/exclude", nil); err != nil {
		return false, err
	}
	for i := range parts {
		if err := read(strings.Join(append(parts[:i:i], ".gitignore"), "/"), parts[:i:i]); err != nil {
			return false, err
		}
	}
	return gitignore.NewMatcher(patterns).Match(parts, false), nil
}

// emptyTree is the hash of the tree without entries.
var emptyTree = plumbing.ComputeHash(plumbing.TreeObject, nil)

// newObjects returns commit and the trees and blobs of its tree that none
// of its parents has at the same path: the objects a remote that holds the
// parents lacks, or a few more (a blob moved from another path). Only the
// subtrees that differ from the parents' are read, so the cost follows
// what the commit changed, not the size of its tree.
func (s *Session) newObjects(commit plumbing.Hash) ([]plumbing.Hash, error) {
	c, err := s.repo.CommitObject(commit)
	if err != nil {
		return nil, fmt.Errorf("reading commit %s: %w", commit, err)
	}
	parents := make([]plumbing.Hash, 0, len(c.ParentHashes))
	for _, p := range c.ParentHashes {
		pc, err := s.repo.CommitObject(p)
		if err != nil {
			return nil, fmt.Errorf("reading commit %s: %w", p, err)
		}
		parents = append(parents, pc.TreeHash)
	}
	objects := []plumbing.Hash{commit}
	seen := map[plumbing.Hash]bool{}
	var walk func(tree plumbing.Hash, theirs []plumbing.Hash) error
	walk = func(tree plumbing.Hash, theirs []plumbing.Hash) error {
		if seen[tree] || slices.Contains(theirs, tree) {
			return nil
		}
		seen[tree] = true
		objects = append(objects, tree)
		t, err := s.repo.TreeObject(tree)
		if err != nil {
			return fmt.Errorf("reading tree %s: %w", tree, err)
		}
		// The entries the parents' trees have at this path, by name.
		known := map[string][]object.TreeEntry{}
		for _, h := range theirs {
			pt, err := s.repo.TreeObject(h)
			if err != nil {
				return fmt.Errorf("reading tree %s: %w", h, err)
			}
			for _, e := range pt.Entries {
				known[e.Name] = append(known[e.Name], e)
			}
		}
		for _, e := range t.Entries {
			var subtrees []plumbing.Hash
			same := false
			for _, k := range known[e.Name] {
				same = same || k.Hash == e.Hash
				if k.Mode == filemode.Dir {
					subtrees = append(subtrees, k.Hash)
				}
			}
			switch {
			case same || seen[e.Hash] || e.Mode == filemode.Submodule:
			case e.Mode == filemode.Dir:
				if err := walk(e.Hash, subtrees); err != nil {
					return err
				}
			default:
				seen[e.Hash] = true
				objects = append(objects, e.Hash)
			}
		}
		return nil
	}
	if err := walk(c.TreeHash, parents); err != nil {
		return nil, err
	}
	return objects, nil
}
