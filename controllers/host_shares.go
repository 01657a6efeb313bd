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
	give, busy, ok := shares.tryAcquire(now, obj, host, namespaceShareKey(obj.Namespace))
	if ok {
		return func(err error) {
			var timedOut error
			if err != nil && isTimeout(err) {
				timedOut = err
			}
			shares.settle(host, timedOut)
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
	return hostShareKey("Git server", rawURL, proxy)
}

// hostShareKey is the worker share of the server of what at rawURL (an
// http(s), ssh or scp-like address): its host, with the proxy its traffic
// goes through, if any. It names no credentials.
func hostShareKey(what, rawURL, proxy string) string {
	host := rawURL
	if u, err := url.Parse(rawURL); err == nil && u.Host != "" {
		host = u.Host
	} else if h, ok := scpHost(rawURL); ok {
		host = h
	}
	key := what + " " + host
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
