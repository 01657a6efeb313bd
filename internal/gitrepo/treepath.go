package gitrepo

import (
	"errors"
	"strings"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
)

// invalidName returns what is wrong with name as the name of a tree entry,
// or "" when it is a valid one, with the rules of git's verify_path and
// fsck.
func invalidName(name string) string {
	switch {
	case name == "":
		return "is empty"
	case name == "." || name == "..":
		return "is " + name
	case strings.EqualFold(name, ".git"):
		return "names the .git directory"
	case strings.Contains(name, "/"):
		return "holds a slash"
	case strings.Contains(name, `\`):
		return "holds a backslash"
	case strings.Contains(name, "\x00"):
		return "holds a NUL byte"
	default:
		return ""
	}
}

// checkEntries checks the names of the entries of tree, found at prefix.
// The error, a *BadCommitError, names no commit yet (see inCommit).
func checkEntries(tree *object.Tree, prefix string) error {
	seen := make(map[string]bool, len(tree.Entries))
	for _, e := range tree.Entries {
		if reason := invalidName(e.Name); reason != "" {
			return &BadCommitError{Path: prefix + e.Name, Reason: reason}
		}
		if seen[e.Name] {
			return &BadCommitError{Path: prefix + e.Name, Reason: "is in its tree twice"}
		}
		seen[e.Name] = true
	}
	return nil
}

// checkPath checks each name of the slash-separated path of a file in a
// tree. The error, a *BadCommitError, names no commit yet (see inCommit).
func checkPath(path string) error {
	for _, name := range strings.Split(path, "/") {
		if reason := invalidName(name); reason != "" {
			return &BadCommitError{Path: path, Reason: reason}
		}
	}
	return nil
}

// inCommit names commit in the *BadCommitError of err's chain that names
// none yet, and returns err.
func inCommit(err error, commit plumbing.Hash) error {
	var bad *BadCommitError
	if errors.As(err, &bad) && bad.Commit == "" {
		bad.Commit = commit.String()
	}
	return err
}
