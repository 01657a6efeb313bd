package gitrepo

import (
	"context"
	"fmt"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/transport"
	"github.com/go-git/go-git/v5/storage/memory"
)

// MaxListedTags bounds the tags ListTags returns; a remote advertising more
// is refused.
const MaxListedTags = 100_000

// ListTags returns the names of the remote's tags (without refs/tags/),
// read from one listing of its references: nothing is cloned or fetched,
// nothing is written to disk. The listing runs under the remote's timeout
// and goes through the same checked transports (DenyAddresses) as every
// other Git operation.
func (r *Remote) ListTags(ctx context.Context) ([]string, error) {
	remote := git.NewRemote(memory.NewStorage(), &config.RemoteConfig{Name: "origin", URLs: []string{r.URL}})
	var refs []*plumbing.Reference
	err := r.withDeadline(ctx, "listing the tags of", func(ctx context.Context, proxy transport.ProxyOptions) error {
		var err error
		refs, err = remote.ListContext(ctx, &git.ListOptions{
			Auth:         r.auth,
			CABundle:     r.caBundle,
			ProxyOptions: proxy,
		})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("listing the tags of %s: %w", r.Redacted(), classify(err))
	}
	var tags []string
	for _, ref := range refs {
		if !ref.Name().IsTag() {
			continue
		}
		if len(tags) == MaxListedTags {
			return nil, fmt.Errorf("listing the tags of %s: more than %d tags", r.Redacted(), MaxListedTags)
		}
		tags = append(tags, ref.Name().Short())
	}
	return tags, nil
}
