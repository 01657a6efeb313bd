package gitrepo

import (
	"errors"
	"fmt"
	"io"
	"io/fs"

	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/utils/merkletrie"

	"github.com/uprev-dev/uprev/internal/confined"
)

// mergeIntoWorktree applies to the working tree and index, which hold ours,
// every file that theirs changed since the merge base. Files both sides
// changed take theirs' version. A changed path that is not valid in a
// working tree fails it with a *BadCommitError.
func (s *Session) mergeIntoWorktree(ours, theirs *object.Commit) error {
	bases, err := ours.MergeBase(theirs)
	if err != nil {
		return fmt.Errorf("finding the merge base: %w", err)
	}
	if len(bases) == 0 {
		return errors.New("the branches share no history")
	}
	baseTree, err := bases[0].Tree()
	if err != nil {
		return fmt.Errorf("reading the merge base tree: %w", err)
	}
	theirTree, err := theirs.Tree()
	if err != nil {
		return fmt.Errorf("reading the branch tree: %w", err)
	}
	changes, err := object.DiffTree(baseTree, theirTree)
	if err != nil {
		return fmt.Errorf("comparing trees: %w", err)
	}
	idx, err := s.currentIndex()
	if err != nil {
		return err
	}
	// From here on, the working tree and the index hold more than HEAD.
	s.tree.invalidate()
	root, err := s.worktree()
	if err != nil {
		return err
	}
	paths := make([]string, 0, len(changes))
	for _, change := range changes {
		action, err := change.Action()
		if err != nil {
			return err
		}
		if action == merkletrie.Delete {
			paths = append(paths, change.From.Name)
			if err := checkPath(change.From.Name); err != nil {
				return inCommit(err, bases[0].Hash)
			}
			if err := removeFile(root, change.From.Name); err != nil {
				return err
			}
			continue
		}
		if err := checkPath(change.To.Name); err != nil {
			return inCommit(err, theirs.Hash)
		}
		paths = append(paths, change.To.Name)
		if _, err := s.writeEntry(root, change.To.Name, change.To.TreeEntry); err != nil {
			return err
		}
	}
	return s.stageInto(idx, paths)
}

// writeEntry writes the blob of a tree entry to path in the working tree
// root and describes the file written.
func (s *Session) writeEntry(root *confined.Root, path string, entry object.TreeEntry) (fs.FileInfo, error) {
	blob, err := s.repo.BlobObject(entry.Hash)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	r, err := blob.Reader()
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	defer func() { _ = r.Close() }() // read only
	content, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	switch entry.Mode {
	case filemode.Regular, filemode.Deprecated:
		err = root.WriteFile(path, content, 0o644)
	case filemode.Executable:
		err = root.WriteFile(path, content, 0o755)
	case filemode.Symlink:
		err = root.Symlink(string(content), path)
	default:
		return nil, fmt.Errorf("writing %s: unsupported file mode %s", path, entry.Mode)
	}
	if err != nil {
		return nil, fmt.Errorf("writing %s: %w", path, err)
	}
	info, err := root.Lstat(path)
	if err != nil {
		return nil, fmt.Errorf("checking out %s: %w", path, err)
	}
	return info, nil
}
