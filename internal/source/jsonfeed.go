package source

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"k8s.io/client-go/util/jsonpath"
)

// ParseJSONPath compiles a JSONPath expression in kubectl's syntax
// ({.edge}, {.releases[*].version}); braces may be left out. The error
// wraps ErrInvalidConfig.
func ParseJSONPath(expr string) (*jsonpath.JSONPath, error) {
	if !strings.HasPrefix(strings.TrimSpace(expr), "{") {
		expr = "{" + expr + "}"
	}
	jp := jsonpath.New("versions")
	if err := jp.Parse(expr); err != nil {
		return nil, fmt.Errorf("%w: JSONPath %q: %w", ErrInvalidConfig, expr, err)
	}
	return jp, nil
}

// ListJSON lists the version strings the JSONPath expression names in the
// JSON document at docURL, such as a release feed's {.edge}. Every value
// named must be a string (or a number). key names the source, for
// conditional requests.
func (c *Client) ListJSON(ctx context.Context, key string, access Access, docURL, expr string) (Listing, error) {
	ctx, cancel := access.withTimeout(ctx)
	defer cancel()
	jp, err := ParseJSONPath(expr)
	if err != nil {
		return Listing{}, err
	}
	s, err := c.session(key, docURL, access)
	if err != nil {
		return Listing{}, err
	}
	a, notModified, err := s.get(ctx, docURL, "", map[string]string{"Accept": "application/json"}, func(resp *http.Response, body []byte) (answer, error) {
		var doc any
		if err := json.Unmarshal(body, &doc); err != nil {
			return answer{}, fmt.Errorf("%w: not a JSON document (Content-Type %q): %w", ErrInvalidResponse, resp.Header.Get("Content-Type"), err)
		}
		return answer{value: doc}, nil
	})
	if err != nil {
		return Listing{}, err
	}
	results, err := jp.FindResults(a.value)
	if err != nil {
		return Listing{}, fmt.Errorf("%w: JSONPath %q in %s: %w", ErrNotListed, expr, RedactURL(docURL), err)
	}
	var versions []Version
	for _, group := range results {
		for _, v := range group {
			switch value := v.Interface().(type) {
			case string:
				versions = append(versions, Version{Version: value})
			case float64, json.Number:
				versions = append(versions, Version{Version: fmt.Sprint(value)})
			default:
				return Listing{}, fmt.Errorf("%w: JSONPath %q in %s names a %T, not a version string", ErrInvalidResponse, expr, RedactURL(docURL), value)
			}
		}
	}
	return Listing{Versions: versions, NotModified: notModified}, nil
}
