package source

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"k8s.io/client-go/util/jsonpath"
)

// MaxJSONPathLength bounds a JSONPath expression, so that with the
// subset ParseJSONPath accepts, an evaluation costs at most a small multiple
// of the document's values.
const MaxJSONPathLength = 512

// MaxFeedValues bounds the values of a JSON document read by ListJSON, as
// countJSONValues counts them (one, plus one per opening bracket and per
// comma: at most twice the values). Decoded, a value costs up to about 180
// bytes (an empty object, for the 3 bytes of "{},"), so the bound keeps a
// document's decoding under about 48 MiB whatever an answer inside the
// size bound holds; a release feed has a few thousand.
const MaxFeedValues = 1 << 18

// ParseJSONPath compiles a JSONPath expression in kubectl's syntax
// ({.edge}, {.releases[*].version}); braces may be left out. The error
// wraps ErrInvalidConfig.
//
// Only a subset of kubectl's syntax is accepted, one whose evaluation
// visits each value of the document at most once per step: fields ($, .a,
// ['a']), indexes and slices ([0], [-1:], [0:10:2]), wildcards ([*]) and
// filters ([?(@.prerelease==false)]), in one or more {...} groups. Refused
// are recursive descent (..), whose every step multiplies the results (five
// of them over 140 bytes make ten million), unions ([0,1], ['a','b']),
// which can name one value many times at every step, range/end, and text
// outside the braces. kubectl's evaluator (k8s.io/client-go/util/jsonpath)
// has no bound on steps and does not stop at a deadline, so the bound is
// set here, on the expression.
func ParseJSONPath(expr string) (*jsonpath.JSONPath, error) {
	if len(expr) > MaxJSONPathLength {
		return nil, fmt.Errorf("%w: JSONPath of %d characters, more than %d", ErrInvalidConfig, len(expr), MaxJSONPathLength)
	}
	if !strings.HasPrefix(strings.TrimSpace(expr), "{") {
		expr = "{" + expr + "}"
	}
	tree, err := jsonpath.Parse("versions", expr)
	if err != nil {
		return nil, fmt.Errorf("%w: JSONPath %q: %w", ErrInvalidConfig, expr, err)
	}
	for _, group := range tree.Root.Nodes {
		if _, ok := group.(*jsonpath.ListNode); !ok {
			return nil, fmt.Errorf("%w: JSONPath %q: text outside {...} is not supported", ErrInvalidConfig, expr)
		}
		if err := checkJSONPathSubset(group); err != nil {
			return nil, fmt.Errorf("%w: JSONPath %q: %w", ErrInvalidConfig, expr, err)
		}
	}
	jp := jsonpath.New("versions")
	if err := jp.Parse(expr); err != nil {
		return nil, fmt.Errorf("%w: JSONPath %q: %w", ErrInvalidConfig, expr, err)
	}
	return jp, nil
}

// checkJSONPathSubset refuses the nodes of kubectl's JSONPath outside the
// subset ParseJSONPath documents.
func checkJSONPathSubset(node jsonpath.Node) error {
	switch n := node.(type) {
	case *jsonpath.ListNode:
		for _, child := range n.Nodes {
			if err := checkJSONPathSubset(child); err != nil {
				return err
			}
		}
	case *jsonpath.FilterNode:
		for _, side := range []*jsonpath.ListNode{n.Left, n.Right} {
			if side == nil {
				continue
			}
			if err := checkJSONPathSubset(side); err != nil {
				return err
			}
		}
	case *jsonpath.FieldNode, *jsonpath.ArrayNode, *jsonpath.WildcardNode,
		*jsonpath.IntNode, *jsonpath.FloatNode, *jsonpath.BoolNode, *jsonpath.TextNode:
	case *jsonpath.RecursiveNode:
		return errors.New("recursive descent (..) is not supported")
	case *jsonpath.UnionNode:
		return errors.New("unions ([a,b]) are not supported")
	case *jsonpath.IdentifierNode:
		return fmt.Errorf("%s is not supported", n.Name)
	default:
		return fmt.Errorf("%s is not supported", node)
	}
	return nil
}

// countJSONValues returns an upper bound of the values of the JSON
// document doc: one, plus one for each opening bracket and each comma
// outside strings. It allocates nothing, so a document is measured before
// encoding/json (which has no bound on values) decodes it.
func countJSONValues(doc []byte) int {
	n, inString, escaped := 1, false, false
	for _, b := range doc {
		switch {
		case escaped:
			escaped = false
		case inString:
			switch b {
			case '\\':
				escaped = true
			case '"':
				inString = false
			}
		case b == '"':
			inString = true
		case b == '[', b == '{', b == ',':
			n++
		}
	}
	return n
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
	a, notModified, err := s.get(ctx, docURL, "", map[string]string{"Accept": "application/json"}, parseJSONDocument)
	if err != nil {
		return Listing{}, err
	}
	if err := ctx.Err(); err != nil {
		return Listing{}, fmt.Errorf("%w: %s was not read within the source's timeout: %w", ErrUnreachable, RedactURL(docURL), err)
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

// parseJSONDocument decodes a JSON document of at most MaxFeedValues
// values.
func parseJSONDocument(resp *http.Response, body []byte) (answer, error) {
	if n := countJSONValues(body); n > MaxFeedValues {
		return answer{}, fmt.Errorf("%w: the JSON document has up to %d values, more than the %d a feed may have", ErrInvalidResponse, n, MaxFeedValues)
	}
	var doc any
	if err := json.Unmarshal(body, &doc); err != nil {
		return answer{}, fmt.Errorf("%w: not a JSON document (Content-Type %q): %w", ErrInvalidResponse, resp.Header.Get("Content-Type"), err)
	}
	return answer{value: doc}, nil
}
