package source

import (
	"bytes"
	"errors"
	"fmt"

	yamlv3 "gopkg.in/yaml.v3"
	repo "helm.sh/helm/v4/pkg/repo/v1"
	"sigs.k8s.io/yaml"
)

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

// chartEntriesBlockStyle visits chart's entries in an index in block
// style, cut at its lines: the top-level keys start at the first column,
// entries' charts at the indentation of its first line, and each of the
// chart's entries at the "- " of its sequence. Only apiVersion and the
// chart's entries are decoded, each entry on its own with Helm's types.
func chartEntriesBlockStyle(body []byte, chart string, visit func(*repo.ChartVersion)) error {
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
		return structure
	}
	var head struct {
		APIVersion string `yaml:"apiVersion"`
	}
	if apiVersion[1] > 0 {
		if err := yamlv3.Unmarshal(body[apiVersion[0]:apiVersion[1]], &head); err != nil {
			return fmt.Errorf("apiVersion: %w", err)
		}
	}
	if head.APIVersion == "" {
		return errNoAPIVersion
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
		return structure
	}
	if lines[0] == 0 {
		return notInIndex(chart, charts)
	}
	if lines[1] == 0 {
		lines[1] = entries[1]
	}
	return chartEntriesBlock(body, lines, chart, visit)
}

// chartEntriesBlock decodes the entries of chart, whose key and sequence
// are the lines of body from lines[0] to lines[1], one entry at a time.
func chartEntriesBlock(body []byte, lines [2]int, chart string, visit func(*repo.ChartVersion)) error {
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
			visit(cv)
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
		return structure
	}
	return nil
}
