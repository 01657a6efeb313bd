package gitrepo

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync/atomic"

	"github.com/go-git/go-git/v5/plumbing/transport"
	"github.com/go-git/go-git/v5/plumbing/transport/client"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"

	"github.com/uprev-dev/uprev/internal/outbound"
)

// Bounds of one listing of a remote's references (ListTags). A remote
// past one is refused with ErrListingTooLarge.
const (
	// MaxListedTags bounds the tags ListTags returns.
	MaxListedTags = 100_000
	// MaxAdvertisedRefs bounds the references a remote may advertise:
	// tags, branches and, on GitHub, a ref or two per pull request.
	MaxAdvertisedRefs = 250_000
	// MaxAdvertisementBytes bounds the bytes read from the remote for one
	// listing, counted on the connection as they arrive.
	MaxAdvertisementBytes = 32 << 20
)

// ErrListingTooLarge means a remote's listing of its references passed
// one of the bounds above.
var ErrListingTooLarge = errors.New("reference listing too large")

// ListTags returns the names of the remote's tags (without refs/tags/),
// read from one listing of its references: nothing is cloned or fetched,
// nothing is written to disk. The listing runs under the remote's timeout,
// goes through the same checked connections (outbound.Install) as every
// other Git operation, and is bounded in size: at most
// MaxAdvertisementBytes read from the server, MaxAdvertisedRefs references
// and MaxListedTags tags, past which it fails with ErrListingTooLarge.
func (r *Remote) ListTags(ctx context.Context) ([]string, error) {
	budget := &readBudget{limit: MaxAdvertisementBytes}
	var names []string
	err := r.withDeadline(ctx, "listing the tags of", func(ctx context.Context, proxy transport.ProxyOptions) error {
		var err error
		names, err = r.listTags(ctx, proxy, budget)
		return err
	})
	switch {
	case budget.exceeded():
		return nil, fmt.Errorf("listing the tags of %s: %w: the server sent more than %d bytes", r.Redacted(), ErrListingTooLarge, MaxAdvertisementBytes)
	case errors.Is(err, ErrListingTooLarge):
		return nil, fmt.Errorf("listing the tags of %s: %w", r.Redacted(), err)
	case err != nil:
		return nil, fmt.Errorf("listing the tags of %s: %w", r.Redacted(), classify(err))
	}
	return names, nil
}

// listTags reads the remote's advertisement of its references, every byte
// read from the server counted against budget, and returns its tags.
func (r *Remote) listTags(ctx context.Context, proxy transport.ProxyOptions, budget *readBudget) ([]string, error) {
	ep, err := transport.NewEndpoint(r.URL)
	if err != nil {
		return nil, err
	}
	ep.CaBundle = r.caBundle
	ep.Proxy = proxy
	var cli transport.Transport
	if r.ssh {
		// The SSH connection is dialed by the deadline dialer, which
		// counts its reads against the budget.
		limitSSHReads(proxy, budget)
		if cli, err = client.NewClient(ep); err != nil {
			return nil, err
		}
	} else {
		cli = githttp.NewClient(budget.httpClient())
	}
	session, err := cli.NewUploadPackSession(ep, r.auth)
	if err != nil {
		return nil, err
	}
	defer func() { _ = session.Close() }() // the references are read by then, or failed with their own error
	adv, err := session.AdvertisedReferencesContext(ctx)
	if err != nil {
		return nil, err
	}
	if n := len(adv.References); n > MaxAdvertisedRefs {
		return nil, fmt.Errorf("%w: the server advertises %d references, more than %d references", ErrListingTooLarge, n, MaxAdvertisedRefs)
	}
	refs, err := adv.AllReferences()
	if err != nil {
		return nil, err
	}
	var tags []string
	for _, ref := range refs {
		if !ref.Name().IsTag() {
			continue
		}
		if len(tags) == MaxListedTags {
			return nil, fmt.Errorf("%w: more than %d tags", ErrListingTooLarge, MaxListedTags)
		}
		tags = append(tags, ref.Name().Short())
	}
	return tags, nil
}

// readBudget counts the bytes read on the connections of one operation
// and fails their reads once more than limit arrived.
type readBudget struct {
	limit int64
	read  atomic.Int64
}

// errBudgetSpent ends the reads of a connection past its budget.
var errBudgetSpent = errors.New("read budget spent")

// exceeded tells whether more than the limit was read.
func (b *readBudget) exceeded() bool {
	return b.read.Load() > b.limit
}

// conn returns c with its reads counted against b.
func (b *readBudget) conn(c net.Conn) net.Conn {
	return &budgetConn{Conn: c, budget: b}
}

// httpClient returns an HTTP client for one operation: the outbound
// layer's transport (outbound.Install's deny list), connections counted
// against b, none kept for another operation. go-git clones its transport
// for a remote with its own CA or proxy; the clone keeps the dialer.
func (b *readBudget) httpClient() *http.Client {
	t := outbound.Installed().Transport()
	dial := t.DialContext
	t.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return b.conn(c), nil
	}
	t.DisableKeepAlives = true
	return outbound.NewClient(t, nil)
}

// budgetConn is a connection whose reads are counted against a budget.
type budgetConn struct {
	net.Conn
	budget *readBudget
}

// Read reads from the connection, failing once the budget is spent.
func (c *budgetConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if c.budget.read.Add(int64(n)) > c.budget.limit {
		return n, errBudgetSpent
	}
	return n, err
}
