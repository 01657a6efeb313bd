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

	yamlv3 "gopkg.in/yaml.v3"
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

// chartVersions reads the versions of chart out of an index.yaml, keeping
// only that chart's entries. Decoded whole with Helm's loading, a 14 MiB
// index of many charts costs over 250 MiB; read here, it costs its chart's
// entries, decoded one at a time. An index in block style (as `helm repo
// index` writes it) is cut at its lines, a JSON one read by encoding/json's
// tokens; a small index in any other form is decoded whole.
func chartVersions(body []byte, base *url.URL, chart string) ([]Version, error) {
	var versions []Version
	var err error
	if first := bytes.TrimLeft(body, " \t\r\n"); len(first) > 0 && first[0] == '{' {
		versions, err = chartVersionsJSON(body, base, chart)
	} else {
		versions, err = chartVersionsBlock(body, base, chart)
	}
	if err != nil && !errors.Is(err, ErrNotListed) && len(body) <= maxWholeIndexBytes {
		return chartVersionsWhole(body, base, chart)
	}
	if err != nil && !errors.Is(err, ErrNotListed) {
		return nil, fmt.Errorf("%w: not a Helm repository index in block style (as helm repo index writes it) or JSON, which an index of %d bytes must be: %w", ErrInvalidResponse, len(body), err)
	}
	return versions, err
}

// chartVersionsWhole reads the versions of chart out of an index.yaml
// decoded whole with Helm's index types.
func chartVersionsWhole(body []byte, base *url.URL, chart string) ([]Version, error) {
	var index repo.IndexFile
	if err := yaml.Unmarshal(body, &index); err != nil {
		return nil, fmt.Errorf("%w: not a Helm repository index: %w", ErrInvalidResponse, err)
	}
	if index.APIVersion == "" {
		return nil, errNoAPIVersion
	}
	entries, ok := index.Entries[chart]
	if !ok {
		return nil, notInIndex(chart, len(index.Entries))
	}
	versions := make([]Version, 0, len(entries))
	for _, cv := range entries {
		versions = appendChartVersion(versions, cv, base)
	}
	return versions, nil
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

// chartVersionsJSON reads chart's versions out of an index in JSON, with
// encoding/json's tokens: the other charts' entries are skipped, the
// chart's decoded one at a time.
func chartVersionsJSON(body []byte, base *url.URL, chart string) ([]Version, error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := expectDelim(dec, '{'); err != nil {
		return nil, err
	}
	var apiVersion string
	var versions []Version
	found, charts := false, 0
	for dec.More() {
		key, err := dec.Token()
		if err != nil {
			return nil, err
		}
		switch key {
		case "apiVersion":
			err = dec.Decode(&apiVersion)
		case "entries":
			if err := expectDelim(dec, '{'); err != nil {
				return nil, err
			}
			for dec.More() {
				name, err := dec.Token()
				if err != nil {
					return nil, err
				}
				charts++
				if name != chart || found {
					if err := dec.Decode(&skipJSON{}); err != nil {
						return nil, err
					}
					continue
				}
				found = true
				if err := expectDelim(dec, '['); err != nil {
					return nil, err
				}
				for dec.More() {
					var cv repo.ChartVersion
					if err := dec.Decode(&cv); err != nil {
						return nil, fmt.Errorf("chart %q: %w", chart, err)
					}
					versions = appendChartVersion(versions, &cv, base)
				}
				if err := expectDelim(dec, ']'); err != nil {
					return nil, err
				}
			}
			err = expectDelim(dec, '}')
		default:
			err = dec.Decode(&skipJSON{})
		}
		if err != nil {
			return nil, err
		}
	}
	if apiVersion == "" {
		return nil, errNoAPIVersion
	}
	if !found {
		return nil, notInIndex(chart, charts)
	}
	return versions, nil
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

// indexLine is one line of an index in block style.
type indexLine struct {
	// start and end are the line's offsets in the index, end after its
	// newline.
	start, end int
	// indent is the line's leading spaces.
	indent int
	// text is the line without its indentation and line break.
	text []byte
}

// blank tells whether the line holds nothing but a comment or spaces.
func (l indexLine) blank() bool {
	return len(l.text) == 0 || l.text[0] == '#'
}

// indexLines calls yield with each line of body from offset from to
// offset to.
func indexLines(body []byte, from, to int, yield func(indexLine) bool) {
	for start := from; start < to; {
		end := to
		if i := bytes.IndexByte(body[start:to], '\n'); i >= 0 {
			end = start + i + 1
		}
		line := bytes.TrimRight(body[start:end], "\r\n")
		text := bytes.TrimLeft(line, " ")
		if !yield(indexLine{start: start, end: end, indent: len(line) - len(text), text: bytes.TrimRight(text, " ")}) {
			return
		}
		start = end
	}
}

// mappingKey reads the key of a block mapping's line ("key:", "key: v",
// "'key': v") and what follows its colon; ok is false when the line is not
// one.
func mappingKey(text []byte) (key string, rest []byte, ok bool) {
	if len(text) == 0 || bytes.ContainsAny(text[:1], "-?[{&*!|>%@`#") {
		return "", nil, false
	}
	if text[0] == '"' || text[0] == '\'' {
		// A quoted key: the quote ends where the line has `quote:`.
		end := bytes.Index(text[1:], []byte{text[0], ':'})
		if end < 0 {
			return "", nil, false
		}
		if err := yamlv3.Unmarshal(text[:end+2], &key); err != nil {
			return "", nil, false
		}
		rest = text[end+3:]
		return key, bytes.TrimSpace(rest), len(rest) == 0 || rest[0] == ' '
	}
	i := bytes.Index(text, []byte(": "))
	if i < 0 {
		if !bytes.HasSuffix(text, []byte(":")) {
			return "", nil, false
		}
		i = len(text) - 1
	}
	return string(bytes.TrimRight(text[:i], " ")), bytes.TrimSpace(text[i+1:]), true
}

// valueOnLine tells whether rest, what follows a key's colon, is a value
// (rather than nothing, or a comment).
func valueOnLine(rest []byte) bool {
	return len(rest) > 0 && rest[0] != '#'
}

// chartVersionsBlock reads chart's versions out of an index in block
// style, cut at its lines: the top-level keys start at the first column,
// entries' charts at the indentation of its first line, and each of the
// chart's entries at the "- " of its sequence. Only apiVersion and the
// chart's entries are decoded, each entry on its own with Helm's types.
func chartVersionsBlock(body []byte, base *url.URL, chart string) ([]Version, error) {
	var apiVersion, entries [2]int
	var structure error
	current := ""
	indexLines(body, 0, len(body), func(l indexLine) bool {
		if l.blank() {
			return true
		}
		if l.indent > 0 {
			if current == "" {
				structure = fmt.Errorf("line at offset %d is indented under no key", l.start)
				return false
			}
			return true
		}
		if bytes.Equal(l.text, []byte("---")) && current == "" {
			return true
		}
		key, rest, ok := mappingKey(l.text)
		if !ok {
			structure = fmt.Errorf("line at offset %d is not a key of the index", l.start)
			return false
		}
		if current == "entries" {
			entries[1] = l.start
		}
		current = key
		switch key {
		case "apiVersion":
			apiVersion = [2]int{l.start, l.end}
		case "entries":
			if valueOnLine(rest) {
				structure = errors.New("entries is not a block mapping")
				return false
			}
			entries = [2]int{l.end, len(body)}
		}
		return true
	})
	if structure != nil {
		return nil, structure
	}
	var head struct {
		APIVersion string `yaml:"apiVersion"`
	}
	if apiVersion[1] > 0 {
		if err := yamlv3.Unmarshal(body[apiVersion[0]:apiVersion[1]], &head); err != nil {
			return nil, fmt.Errorf("apiVersion: %w", err)
		}
	}
	if head.APIVersion == "" {
		return nil, errNoAPIVersion
	}

	// The chart's lines, among entries'.
	chartIndent, charts := -1, 0
	var lines [2]int
	indexLines(body, entries[0], entries[1], func(l indexLine) bool {
		if l.blank() {
			return true
		}
		if chartIndent < 0 {
			chartIndent = l.indent
		}
		if l.indent < chartIndent {
			structure = fmt.Errorf("line at offset %d is indented less than the charts", l.start)
			return false
		}
		if l.indent > chartIndent || l.text[0] == '-' {
			return true
		}
		key, _, ok := mappingKey(l.text)
		if !ok {
			structure = fmt.Errorf("line at offset %d is not a chart of the index", l.start)
			return false
		}
		charts++
		if lines[0] > 0 && lines[1] == 0 {
			lines[1] = l.start
		}
		if key == chart && lines[0] == 0 {
			lines[0] = l.start
		}
		return true
	})
	if structure != nil {
		return nil, structure
	}
	if lines[0] == 0 {
		return nil, notInIndex(chart, charts)
	}
	if lines[1] == 0 {
		lines[1] = entries[1]
	}
	return chartEntriesBlock(body, lines, base, chart)
}

// chartEntriesBlock decodes the entries of chart, whose key and sequence
// are the lines of body from lines[0] to lines[1], one entry at a time.
func chartEntriesBlock(body []byte, lines [2]int, base *url.URL, chart string) ([]Version, error) {
	var versions []Version
	var structure error
	itemIndent, item := -1, -1
	decode := func(end int) bool {
		if item < 0 {
			return true
		}
		var cvs []*repo.ChartVersion
		if err := yaml.Unmarshal(body[item:end], &cvs); err != nil {
			structure = fmt.Errorf("chart %q: entry at offset %d: %w", chart, item, err)
			return false
		}
		for _, cv := range cvs {
			versions = appendChartVersion(versions, cv, base)
		}
		return true
	}
	first := true
	indexLines(body, lines[0], lines[1], func(l indexLine) bool {
		if first {
			first = false
			if _, rest, _ := mappingKey(l.text); valueOnLine(rest) {
				structure = fmt.Errorf("chart %q: its entries are not a block sequence", chart)
				return false
			}
			return true
		}
		if l.blank() {
			return true
		}
		if itemIndent < 0 {
			itemIndent = l.indent
		}
		if l.indent == itemIndent && l.text[0] == '-' {
			if !decode(l.start) {
				return false
			}
			item = l.start
			return true
		}
		if l.indent <= itemIndent {
			structure = fmt.Errorf("chart %q: line at offset %d is not an entry", chart, l.start)
			return false
		}
		return true
	})
	if structure == nil {
		decode(lines[1])
	}
	if structure != nil {
		return nil, structure
	}
	return versions, nil
}
