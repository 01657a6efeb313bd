package gitrepo

import (
	"errors"
	"fmt"
	"math"
	"sort"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/format/index"
	"github.com/go-git/go-git/v5/plumbing/object"
)

// checkoutFresh writes the files of commit into the empty working tree of a
// new clone and an index for them, and detaches HEAD there. It does what a
// hard reset does on an empty working tree, several times faster. A tree
// entry that is not a valid path fails it with a *BadCommitError; what was
// written until then stays inside the working tree, and HEAD and the index
// are left as they were.
func (s *Session) checkoutFresh(commit plumbing.Hash) error {
	tree, err := s.commitTree(commit)
	if err != nil {
		return err
	}
	root, err := s.worktree()
	if err != nil {
		return err
	}
	idx := &index.Index{Version: 2}
	write := func(f object.TreeEntry) error {
		info, err := s.writeEntry(root, f.Name, f)
		if err != nil {
			return err
		}
		idx.Entries = append(idx.Entries, &index.Entry{
			Name: f.Name, Hash: f.Hash, Mode: f.Mode, ModifiedAt: info.ModTime(), Size: indexSize(info.Size()),
		})
		return nil
	}
	err = checkEntries(tree, "")
	for i := 0; err == nil && i < len(tree.Entries); i++ {
		err = eachFile(s, "", tree.Entries[i], write)
	}
	if err != nil {
		return inCommit(fmt.Errorf("checking out %s: %w", commit, err), commit)
	}
	sort.Slice(idx.Entries, func(i, j int) bool { return idx.Entries[i].Name < idx.Entries[j].Name })
	if err := s.repo.Storer.SetIndex(idx); err != nil {
		return fmt.Errorf("writing the index: %w", err)
	}
	if err := s.repo.Storer.SetReference(plumbing.NewHashReference(plumbing.HEAD, commit)); err != nil {
		return fmt.Errorf("detaching HEAD: %w", err)
	}
	s.tree.record(s.dir, commit)
	return nil
}

// branchTip returns the fetched tip of the branch; sync has checked that it
// exists.
func (s *Session) branchTip() plumbing.Hash {
	ref, err := s.repo.Reference(s.trackingRef(s.branch), true)
	if err != nil {
		return plumbing.ZeroHash
	}
	return ref.Hash()
}

// resetTo detaches HEAD at commit and makes the index and working tree match
// it exactly, removing whatever else is there. A working tree that an
// earlier session left clean at HEAD is moved by the difference between the
// two commits, which costs reading the files' metadata once; any other is
// emptied and checked out afresh, which costs writing every file.
func (s *Session) resetTo(commit plumbing.Hash) error {
	if s.tree.cleanAt(s.dir, commit) {
		return nil
	}
	switched, err := s.switchCleanTree(commit)
	var bad *BadCommitError
	switch {
	case errors.As(err, &bad):
		return err
	case err == nil && switched:
		return nil
	}
	// The fresh checkout below repairs whatever the switch did or did not do.
	s.tree.invalidate()
	if err := s.clearWorktree(); err != nil {
		return err
	}
	return s.checkoutFresh(commit)
}

// indexSize is a file's size as the Git index holds it: its low 32 bits,
// as Git keeps them, so that a file of 4 GiB or more still matches its entry
// (and is told apart by its content, as Git does).
func indexSize(size int64) uint32 {
	return uint32(size & math.MaxUint32)
}
