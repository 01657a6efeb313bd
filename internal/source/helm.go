package source

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
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

// maxWholeIndexBytes bounds the indexes read whole, with Helm's own
// loading, when they are neither in block style nor JSON (flow style,
// anchors shared between charts): decoded whole, an index costs about 20
// times its size.
const maxWholeIndexBytes = 1 << 20

// chartVersions reads the versions of chart out of an index.yaml
// (chartEntries), each version's URL resolved against base.
func chartVersions(body []byte, base *url.URL, chart string) ([]Version, error) {
	var versions []Version
	err := chartEntries(body, chart, func(cv *repo.ChartVersion) {
		versions = appendChartVersion(versions, cv, base)
	}, func() { versions = versions[:0] })
	if err != nil {
		return nil, err
	}
	return versions, nil
}

// chartEntries calls visit with each entry of chart in an index.yaml,
// keeping only that chart's entries. Decoded whole with Helm's loading, a
// 14 MiB index of many charts costs over 250 MiB; read here, it costs its
// chart's entries, decoded one at a time. An index in block style (as
// `helm repo index` writes it) is cut at its lines, a JSON one read by
// encoding/json's tokens; a small index in any other form is decoded
// whole, after reset forgets the entries visited before.
func chartEntries(body []byte, chart string, visit func(*repo.ChartVersion), reset func()) error {
	var err error
	if first := bytes.TrimLeft(body, " \t\r\n"); len(first) > 0 && first[0] == '{' {
		err = chartEntriesJSON(body, chart, visit)
	} else {
		err = chartEntriesBlockStyle(body, chart, visit)
	}
	if err != nil && !errors.Is(err, ErrNotListed) && len(body) <= maxWholeIndexBytes {
		reset()
		return chartEntriesWhole(body, chart, visit)
	}
	if err != nil && !errors.Is(err, ErrNotListed) {
		return fmt.Errorf("%w: not a Helm repository index in block style (as helm repo index writes it) or JSON, which an index of %d bytes must be: %w", ErrInvalidResponse, len(body), err)
	}
	return err
}

// chartEntriesWhole visits the entries of chart in an index.yaml decoded
// whole with Helm's index types.
func chartEntriesWhole(body []byte, chart string, visit func(*repo.ChartVersion)) error {
	var index repo.IndexFile
	if err := yaml.Unmarshal(body, &index); err != nil {
		return fmt.Errorf("%w: not a Helm repository index: %w", ErrInvalidResponse, err)
	}
	if index.APIVersion == "" {
		return errNoAPIVersion
	}
	entries, ok := index.Entries[chart]
	if !ok {
		return notInIndex(chart, len(index.Entries))
	}
	for _, cv := range entries {
		visit(cv)
	}
	return nil
}

// errNoAPIVersion is the error of an index without apiVersion.
var errNoAPIVersion = fmt.Errorf("%w: not a Helm repository index: it has no apiVersion", ErrInvalidResponse)

// notInIndex is the error of a chart absent from an index of charts
// charts.
func notInIndex(chart string, charts int) error {
	return fmt.Errorf("%w: chart %q is not in the repository's index (%d charts)", ErrNotListed, chart, charts)
}

// appendChartVersion appends cv to versions, its URL resolved against the
// repository (as Helm does) and its digest prefixed; entries without
// metadata or version are left out.
func appendChartVersion(versions []Version, cv *repo.ChartVersion, base *url.URL) []Version {
	if cv == nil || cv.Metadata == nil || cv.Version == "" {
		return versions
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
	return append(versions, v)
}

// chartEntriesJSON visits chart's entries in an index in JSON, read with
// encoding/json's tokens: the other charts' entries are skipped, the
// chart's decoded one at a time.
func chartEntriesJSON(body []byte, chart string, visit func(*repo.ChartVersion)) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := expectDelim(dec, '{'); err != nil {
		return err
	}
	var apiVersion string
	found, charts := false, 0
	for dec.More() {
		key, err := dec.Token()
		if err != nil {
			return err
		}
		switch key {
		case "apiVersion":
			err = dec.Decode(&apiVersion)
		case "entries":
			if err := expectDelim(dec, '{'); err != nil {
				return err
			}
			for dec.More() {
				name, err := dec.Token()
				if err != nil {
					return err
				}
				charts++
				if name != chart || found {
					if err := dec.Decode(&skipJSON{}); err != nil {
						return err
					}
					continue
				}
				found = true
				if err := expectDelim(dec, '['); err != nil {
					return err
				}
				for dec.More() {
					var cv repo.ChartVersion
					if err := dec.Decode(&cv); err != nil {
						return fmt.Errorf("chart %q: %w", chart, err)
					}
					visit(&cv)
				}
				if err := expectDelim(dec, ']'); err != nil {
					return err
				}
			}
			err = expectDelim(dec, '}')
		default:
			err = dec.Decode(&skipJSON{})
		}
		if err != nil {
			return err
		}
	}
	if apiVersion == "" {
		return errNoAPIVersion
	}
	if !found {
		return notInIndex(chart, charts)
	}
	return nil
}

// skipJSON is a JSON value read and left: json.Decoder hands it its bytes
// in the decoder's own buffer, so skipping a chart allocates nothing.
type skipJSON struct{}

// UnmarshalJSON leaves the value.
func (skipJSON) UnmarshalJSON([]byte) error { return nil }

// expectDelim reads the next token of dec, which must be delim.
func expectDelim(dec *json.Decoder, delim json.Delim) error {
	t, err := dec.Token()
	if err != nil {
		return err
	}
	if t != delim {
		return fmt.Errorf("%v where %v was expected", t, delim)
	}
	return nil
}
