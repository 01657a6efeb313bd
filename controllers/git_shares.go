package controllers

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/types"

	uprevv1 "github.com/uprev-dev/uprev/api/v1alpha1"
	"github.com/uprev-dev/uprev/internal/gitrepo"
)

// takeGitShare takes, at now, for the object obj, its kind's share of the
// workers for Git work: one of the Git server's (its host, with the proxy
// its traffic goes through) and one of its namespace's (workerShares). A
// run that finds either taken does not wait in its worker: it is put off
// (outcome.putOff) and run again when its turn comes. When the server's
// last call timed out, it is tried by one run at a time until it answers
// again, and the runs that find it so are not Ready, naming the server.
// The returned function gives the shares back, told the run's Git error,
// so that a timeout puts the server on probation and an answer ends it.
func takeGitShare(shares *workerShares, now time.Time, obj types.NamespacedName, rawURL, proxy string) (release func(gitErr error), err error) {
	host := gitShareKey(rawURL, proxy)
	give, busy, ok := shares.tryAcquire(now, obj, host, namespaceShareKey(obj.Namespace))
	if ok {
		return func(gitErr error) {
			var timedOut error
			if errors.Is(gitErr, gitrepo.ErrTimeout) {
				timedOut = gitErr
			}
			shares.settle(host, timedOut)
			give()
		}, nil
	}
	if busy.timedOut != nil {
		return nil, putOffAfter(uprevv1.GitTimeoutReason,
			fmt.Errorf("waiting for %s, which one run at a time tries until it answers again; the last run found: %w", busy.key, busy.timedOut), busyRetry)
	}
	return nil, waiting(uprevv1.GitSlotsBusyReason, busyRetry,
		fmt.Errorf("waiting for Git: %s already holds its share of the workers", busy.key))
}

// gitShareKey is the worker share of the Git server at rawURL: its host,
// with the proxy its traffic goes through, if any.
func gitShareKey(rawURL, proxy string) string {
	host := rawURL
	if u, err := url.Parse(rawURL); err == nil && u.Host != "" {
		host = u.Host
	} else if h, ok := scpHost(rawURL); ok {
		host = h
	}
	key := "Git server " + host
	if proxy != "" {
		key += " via proxy " + proxy
	}
	return key
}

// scpHost reads the host of an scp-like Git address ([user@]host:path).
func scpHost(rawURL string) (string, bool) {
	before, _, ok := strings.Cut(rawURL, ":")
	if !ok || strings.Contains(before, "/") {
		return "", false
	}
	_, host, _ := strings.Cut(before, "@")
	if !strings.Contains(before, "@") {
		host = before
	}
	return host, host != ""
}
