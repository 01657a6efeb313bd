package source

import (
	"context"

	"github.com/uprev-dev/uprev/internal/gitrepo"
)

// ListGitTags lists the tags of the Git repository remote reaches, by one
// listing of its references (gitrepo.Remote.ListTags: no clone, the Git
// deadlines and denied addresses of every Git operation). Errors wrap
// gitrepo's sentinels (ErrAuthentication, ErrTimeout, ...).
func ListGitTags(ctx context.Context, remote *gitrepo.Remote) (Listing, error) {
	tags, err := remote.ListTags(ctx)
	if err != nil {
		return Listing{}, err
	}
	versions := make([]Version, len(tags))
	for i, t := range tags {
		versions[i] = Version{Version: t}
	}
	return Listing{Versions: versions}, nil
}
