package gitrepo

import (
	"errors"
	"fmt"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
)

// ErrNoCommitter means a checkout's Git configuration (its own, the
// user's or the system's) names no user.name and user.email to commit as.
var ErrNoCommitter = errors.New("no user.name and user.email in the Git configuration")

// CommitRecord makes a commit with message and no change of files on the
// branch HEAD of the checkout holding dir is on, as `git commit
// --allow-empty` would, authored and committed by the user its Git
// configuration names, and returns the commit's SHA and the branch. The
// index and working tree are left as they were: what is staged stays
// staged, and is not committed. A detached HEAD, or a branch moved by
// someone else meanwhile, is an error.
func CommitRecord(dir, message string, now time.Time) (sha, branch string, err error) {
	repo, err := git.PlainOpenWithOptions(dir, &git.PlainOpenOptions{DetectDotGit: true, EnableDotGitCommonDir: true})
	if errors.Is(err, git.ErrRepositoryNotExists) {
		return "", "", fmt.Errorf("%s: %w", dir, ErrNotRepository)
	}
	if err != nil {
		return "", "", fmt.Errorf("opening Git repository at %s: %w", dir, err)
	}
	head, err := repo.Head()
	if err != nil {
		return "", "", fmt.Errorf("reading HEAD: %w", err)
	}
	if !head.Name().IsBranch() {
		return "", "", fmt.Errorf("%s: HEAD is detached; check out the branch to record the commit on", dir)
	}
	parent, err := repo.CommitObject(head.Hash())
	if err != nil {
		return "", "", fmt.Errorf("reading HEAD's commit: %w", err)
	}
	cfg, err := repo.ConfigScoped(config.SystemScope)
	if err != nil {
		return "", "", fmt.Errorf("reading the Git configuration: %w", err)
	}
	if cfg.User.Name == "" || cfg.User.Email == "" {
		return "", "", ErrNoCommitter
	}
	who := object.Signature{Name: cfg.User.Name, Email: cfg.User.Email, When: now}
	commit := &object.Commit{Author: who, Committer: who, Message: message, TreeHash: parent.TreeHash, ParentHashes: []plumbing.Hash{parent.Hash}}
	obj := repo.Storer.NewEncodedObject()
	if err := commit.Encode(obj); err != nil {
		return "", "", fmt.Errorf("encoding the commit: %w", err)
	}
	hash, err := repo.Storer.SetEncodedObject(obj)
	if err != nil {
		return "", "", fmt.Errorf("writing the commit: %w", err)
	}
	if err := repo.Storer.CheckAndSetReference(plumbing.NewHashReference(head.Name(), hash), head); err != nil {
		return "", "", fmt.Errorf("moving branch %s to the commit: %w", head.Name().Short(), err)
	}
	return hash.String(), head.Name().Short(), nil
}
