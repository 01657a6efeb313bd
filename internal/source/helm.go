package source

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	repo "helm.sh/helm/v4/pkg/repo/v1"
	"sigs.k8s.io/yaml"
)

// ListHelmChart lists the versions of chart in the classic Helm repository
// at repoURL, read from its index.yaml with Helm's own index types. Each
// version's URL is its chart archive's (relative URLs resolved against the
// repository, as Helm does) and its Digest the index's digest of the
// archive. key names the source, for conditional requests.
func (c *Client) ListHelmChart(ctx context.Context, key string, access Access, repoURL, chart string) (Listing, error) {
	ctx, cancel := access.withTimeout(ctx)
	defer cancel()
	base := strings.TrimSuffix(repoURL, "/") + "/"
	s, err := c.session(key, base, access)
	if err != nil {
		return Listing{}, err
	}
	indexURL := base + "index.yaml"
	baseURL, _ := url.Parse(base)
	a, notModified, err := s.get(ctx, indexURL, chart, nil, func(_ *http.Response, body []byte) (answer, error) {
		versions, err := chartVersions(body, baseURL, chart)
		return answer{value: versions}, err
	})
	if err != nil {
		return Listing{}, err
	}
	return Listing{Versions: a.value.([]Version), NotModified: notModified}, nil
}

// chartVersions reads the versions of chart out of an index.yaml.
func chartVersions(body []byte, base *url.URL, chart string) ([]Version, error) {
	var index repo.IndexFile
	if err := yaml.Unmarshal(body, &index); err != nil {
		return nil, fmt.Errorf("%w: not a Helm repository index: %w", ErrInvalidResponse, err)
	}
	if index.APIVersion == "" {
		return nil, fmt.Errorf("%w: not a Helm repository index: it has no apiVersion", ErrInvalidResponse)
	}
	entries, ok := index.Entries[chart]
	if !ok {
		return nil, fmt.Errorf("%w: chart %q is not in the repository's index (%d charts)", ErrNotListed, chart, len(index.Entries))
	}
	versions := make([]Version, 0, len(entries))
	for _, cv := range entries {
		if cv == nil || cv.Metadata == nil || cv.Version == "" {
			continue
		}
		v := Version{Version: cv.Version}
		if len(cv.URLs) > 0 {
			if u, err := base.Parse(cv.URLs[0]); err == nil {
				v.URL = u.String()
			}
		}
		if cv.Digest != "" {
			v.Digest = "sha256:" + cv.Digest
		}
		versions = append(versions, v)
	}
	return versions, nil
}
