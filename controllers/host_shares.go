package controllers

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/types"

	uprevv1 "github.com/uprev-dev/uprev/api/v1alpha1"
	"github.com/uprev-dev/uprev/internal/gitrepo"
)

// shareReasons are the condition reasons of a run put off for a share of
// the workers: busy while the share is taken (Reconciling, Ready left as it
// was), timedOut while the host is on probation (Ready=False).
type shareReasons struct {
	busy, timedOut string
}

// Reasons of the kinds whose work waits on hosts that objects name.
var (
	gitShareReasons    = shareReasons{busy: uprevv1.GitSlotsBusyReason, timedOut: uprevv1.GitTimeoutReason}
	sourceShareReasons = shareReasons{busy: uprevv1.SourceBusyReason, timedOut: uprevv1.SourceUnreachableReason}
	forgeShareReasons  = shareReasons{busy: forgeBusyReason, timedOut: uprevv1.PullRequestFailedReason}
)

// forgeBusyReason: the pull request of a pushed commit waits because its
// forge's API already holds its share of the workers.
const (
	forgeBusyReason = "ForgeBusy"
)

// takeHostShare takes, at now, for the object obj, its kind's share of the
// workers for work that waits on an outside host: one of the host's (host,
// a share key with the proxy its traffic goes through) and one of the
// object's namespace's (workerShares). A run that finds either taken does
// not wait in its worker: it is put off (outcome.putOff) and run again when
// its turn comes. When the host's last call timed out, it is tried by one
// run at a time until it answers again, and the runs that find it so are
// not Ready, naming the host. The returned function gives the shares back,
// told the run's error, which isTimeout tells apart: a timeout puts the
// host on probation, anything else (an answer, even a refusal) ends it.
func takeHostShare(shares *workerShares, now time.Time, obj types.NamespacedName, host string, reasons shareReasons, isTimeout func(error) bool) (release func(err error), err error) {
	return takeShares(shares, now, obj, host, reasons, isTimeout, namespaceShareKey(obj.Namespace))
}

// takeForgeShare is takeHostShare for the forge calls of a run that
// already holds its namespace's share (its Git share): a share of the
// forge API at apiURL alone, so that a forge that never answers holds at
// most its share of the workers.
func takeForgeShare(shares *workerShares, now time.Time, obj types.NamespacedName, apiURL string) (release func(err error), err error) {
	return takeShares(shares, now, obj, hostShareKey("forge", urlHost(apiURL), ""), forgeShareReasons, isForgeTimeout)
}

// isForgeTimeout tells a forge call that got no answer in time.
func isForgeTimeout(err error) bool {
	var netErr net.Error
	return errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &netErr) && netErr.Timeout())
}

// takeShares takes a share of host and of the other keys (see
// takeHostShare).
func takeShares(shares *workerShares, now time.Time, obj types.NamespacedName, host string, reasons shareReasons, isTimeout func(error) bool, others ...string) (release func(err error), err error) {
	give, busy, ok := shares.tryAcquire(now, obj, append([]string{host}, others...)...)
	if ok {
		return func(err error) {
			// A run put off after it took its share (for a kept clone in
			// use, a forge's share) did not hear from the host.
			if !(outcome{err: err}).putOff() {
				var timedOut error
				if err != nil && isTimeout(err) {
					timedOut = err
				}
				shares.settle(host, timedOut)
			}
			give()
		}, nil
	}
	if busy.timedOut != nil {
		return nil, putOffAfter(reasons.timedOut,
			fmt.Errorf("waiting for %s, which one run at a time tries until it answers again; the last run found: %w", busy.key, busy.timedOut), busyRetry)
	}
	return nil, waiting(reasons.busy, busyRetry, fmt.Errorf("waiting: %s already holds its share of the workers", busy.key))
}

// takeGitShare is takeHostShare for the Git work of a run on the
// repository at rawURL, reached through proxy (a host, empty for none).
func takeGitShare(shares *workerShares, now time.Time, obj types.NamespacedName, rawURL, proxy string) (release func(err error), err error) {
	return takeHostShare(shares, now, obj, gitShareKey(rawURL, proxy), gitShareReasons, isGitTimeout)
}

// isGitTimeout tells a Git call that got no answer in time.
func isGitTimeout(err error) bool { return errors.Is(err, gitrepo.ErrTimeout) }

// gitShareKey is the worker share of the Git server at rawURL: its host,
// with the proxy its traffic goes through, if any.
func gitShareKey(rawURL, proxy string) string {
	return hostShareKey("Git server", urlHost(rawURL), proxy)
}

// hostShareKey is the one spelling of the worker share of a host behind a
// proxy, for registries, Git servers, sources and forges: what the host
// serves, the host (with its port, if any) and, when its traffic goes
// through a proxy, which one (its host, or the Secret that names it). It
// names no credentials.
func hostShareKey(what, host, proxy string) string {
	key := what + " " + host
	if proxy != "" {
		key += " via proxy " + proxy
	}
	return key
}

// urlHost is the host (with its port, if any) of rawURL, an http(s), ssh
// or scp-like address, or rawURL itself when it has none. It drops any
// credentials.
func urlHost(rawURL string) string {
	if u, err := url.Parse(rawURL); err == nil && u.Host != "" {
		return u.Host
	} else if h, ok := scpHost(rawURL); ok {
		return h
	}
	return rawURL
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

// openClone is how a run of obj opens its kept clone: without waiting for
// another run that uses it (gitrepo.WakeWhenFree). A clone in use puts the
// run off (cloneBusy), and the run is woken through shares, the same way a
// share's turn wakes it, when the clone is given back.
func openClone(ctx context.Context, shares *workerShares, obj types.NamespacedName) context.Context {
	return gitrepo.WakeWhenFree(ctx, func() { shares.wake(obj) })
}

// cloneBusy is the error of a run that found its kept clone in use (err
// wraps gitrepo.ErrCloneBusy): put off, its request not handled, until it
// is woken or, at the latest, after busyRetry. Nil for any other err.
func cloneBusy(err error) error {
	if !errors.Is(err, gitrepo.ErrCloneBusy) {
		return nil
	}
	return waiting(uprevv1.GitSlotsBusyReason, busyRetry, fmt.Errorf("waiting: %w", err))
}
