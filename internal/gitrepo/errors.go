// Package gitrepo keeps clones of Git repositories, fetches them
// incrementally, commits and pushes updates without ever forcing, signs
// commits, and finds reverted automation commits.
//
// It knows nothing of Kubernetes: credentials come in as a Secret's data map
// and errors come out typed, so a controller can tell configuration errors
// (mark Stalled) from transient ones (retry).
package gitrepo

import (
	"errors"
	"fmt"
	"net"
	"strings"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing/transport"
)

var (
	// ErrAuthentication means the remote refused the credentials, or asked
	// for credentials that were not given.
	ErrAuthentication = errors.New("authentication failed")
	// ErrUnknownHostKey means the SSH server's host key is not in
	// known_hosts (or does not match the one there).
	ErrUnknownHostKey = errors.New("SSH host key not trusted by known_hosts")
	// ErrRefNotFound means the branch to check out does not exist on the
	// remote.
	ErrRefNotFound = errors.New("reference not found")
	// ErrInvalidSecret means a Secret's data cannot be used: a key is
	// missing, malformed, or does not fit the URL's scheme.
	ErrInvalidSecret = errors.New("invalid secret")
	// ErrTimeout means a network operation with the remote did not end
	// within the remote's timeout; its message names the host.
	ErrTimeout = errors.New("timeout")
)

// PushRejectedError means every push attempt was rejected because the remote
// branch kept moving; nothing was forced.
type PushRejectedError struct {
	// Branch is the branch pushed to.
	Branch string
	// Attempts is how many times the push was tried.
	Attempts int
	// Err is the last rejection.
	Err error
}

// Error describes the rejection.
func (e *PushRejectedError) Error() string {
	return fmt.Sprintf("push to branch %q rejected after %d attempts: %v", e.Branch, e.Attempts, e.Err)
}

// Unwrap returns the last rejection.
func (e *PushRejectedError) Unwrap() error {
	return e.Err
}

// BadCommitError means a commit's tree holds an entry whose name is not a
// valid path in a working tree: empty, `.` or `..`, `.git` in any case, or
// holding a slash, a backslash or a NUL byte, or a name found twice in one
// tree, as git's fsck reports them. Git refuses such a commit on a push to a
// server that checks what it receives; one that does not may still serve
// it. The commit is not checked out, and nothing of its tree is written
// outside the working tree.
type BadCommitError struct {
	// Commit is the SHA of the commit refused.
	Commit string
	// Path is the entry's path in the commit's tree, the invalid name last.
	Path string
	// Reason says what is wrong with the name.
	Reason string
}

// Error names the commit, the entry and what is wrong with it.
func (e *BadCommitError) Error() string {
	return fmt.Sprintf("commit %s has a tree entry that is not a valid path: %q %s", e.Commit, e.Path, e.Reason)
}

// classify wraps the errors of go-git's transports that a caller must decide
// on with this package's sentinel errors, keeping the original text.
func classify(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, ErrUnknownHostKey), errors.Is(err, ErrAuthentication), errors.Is(err, ErrRefNotFound):
		return err
	case errors.Is(err, transport.ErrAuthenticationRequired),
		errors.Is(err, transport.ErrAuthorizationFailed),
		strings.Contains(err.Error(), "unable to authenticate"):
		return fmt.Errorf("%w: %w", ErrAuthentication, err)
	case errors.Is(err, git.NoMatchingRefSpecError{}):
		return fmt.Errorf("%w: %w", ErrRefNotFound, err)
	default:
		return err
	}
}

// isRemoteError reports whether err came from reaching the remote, or from
// what the remote holds (such as a bad commit, which a new clone would
// refuse again), rather than from the local clone.
func isRemoteError(err error) bool {
	var netErr net.Error
	var bad *BadCommitError
	return errors.Is(err, ErrAuthentication) || errors.Is(err, ErrUnknownHostKey) || errors.Is(err, ErrTimeout) ||
		errors.Is(err, ErrRefNotFound) || errors.Is(err, transport.ErrRepositoryNotFound) ||
		errors.As(err, &netErr) || errors.As(err, &bad)
}
