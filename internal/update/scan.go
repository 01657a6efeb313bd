package update

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"unicode/utf8"

	"gopkg.in/yaml.v3"
)

// errUnsupportedValue is wrapped (together with ErrInvalidMarker) by errors
// about markers whose value cannot be replaced in place.
var errUnsupportedValue = errors.New("value cannot be rewritten in place")

// site is one marked scalar of a file.
type site struct {
	marker Marker
	// doc is the index of the YAML document holding the scalar.
	doc int
	// object identifies the Kubernetes object that document describes.
	object Object
	// line is the scalar's 1-based line.
	line int
	// start and end delimit the scalar's text in the file, quotes included,
	// anchor and tag excluded.
	start, end int
	// value is the scalar's value.
	value string
	// style is the scalar's quoting style.
	style yaml.Style
	// flow is set for a scalar inside a flow collection.
	flow bool
}

// lineError is an error about one line of a file.
type lineError struct {
	line int
	err  error
}

// scanner finds the marked scalars of one file.
type scanner struct {
	src              []byte
	defaultNamespace string
	lineStarts       []int
	doc              int
	object           Object
	sites            []site
	errs             []lineError
}

// scanMarkers parses src, which may hold several YAML documents, and
// returns its marked scalars in document order. Any error (YAML syntax,
// invalid marker, value that cannot be located) is returned instead; the
// file must then be left untouched.
func scanMarkers(src []byte, defaultNamespace string) ([]site, []lineError) {
	s := &scanner{src: src, defaultNamespace: defaultNamespace}
	dec := yaml.NewDecoder(bytes.NewReader(src))
	for ; ; s.doc++ {
		var doc yaml.Node
		err := dec.Decode(&doc)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, []lineError{{err: fmt.Errorf("parsing YAML: %w", err)}}
		}
		s.object = objectOf(&doc)
		s.visit(&doc, false, "")
	}
	return s.sites, s.errs
}

// fail records an error about the node's line.
func (s *scanner) fail(n *yaml.Node, err error) {
	s.errs = append(s.errs, lineError{line: n.Line, err: err})
}

// visit walks the node tree. inherited is a marker comment that yaml.v3
// attached to the mapping key of n rather than to n itself.
func (s *scanner) visit(n *yaml.Node, flow bool, inherited string) {
	comment := n.LineComment
	if inherited != "" {
		if mentionsMarker([]byte(comment)) {
			s.fail(n, fmt.Errorf("%w: two markers on one value", ErrInvalidMarker))
			return
		}
		comment = inherited
	}
	marked := mentionsMarker([]byte(comment))
	flow = flow || n.Style&yaml.FlowStyle != 0
	switch n.Kind {
	case yaml.ScalarNode:
		if marked {
			s.mark(n, flow, comment)
		}
		return
	case yaml.AliasNode:
		if marked {
			s.fail(n, fmt.Errorf("%w: marker on an alias; put it on the anchored value", ErrInvalidMarker))
		}
		return
	}
	if marked {
		s.fail(n, fmt.Errorf("%w: marker on a collection, not on a scalar value", ErrInvalidMarker))
	}
	if n.Kind != yaml.MappingNode {
		for _, c := range n.Content {
			s.visit(c, flow, "")
		}
		return
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		key, value := n.Content[i], n.Content[i+1]
		keyComment := ""
		if key.Kind == yaml.ScalarNode {
			// yaml.v3 attaches `key: # comment` to the key when the value
			// starts on a later line.
			keyComment = key.LineComment
			if !mentionsMarker([]byte(keyComment)) {
				keyComment = ""
			}
		} else {
			s.visit(key, flow, "")
		}
		s.visit(value, flow, keyComment)
	}
}

// mark records a scalar carrying a marker comment.
func (s *scanner) mark(n *yaml.Node, flow bool, comment string) {
	m, err := ParseMarker(comment, s.defaultNamespace)
	if err != nil {
		s.fail(n, err)
		return
	}
	start, end, err := s.locate(n, flow)
	if err != nil {
		s.fail(n, fmt.Errorf("%w: %w: %w", ErrInvalidMarker, errUnsupportedValue, err))
		return
	}
	s.sites = append(s.sites, site{
		marker: m, doc: s.doc, object: s.object, line: n.Line,
		start: start, end: end, value: n.Value, style: n.Style &^ yaml.TaggedStyle, flow: flow,
	})
}

// locate returns the byte span of a scalar's text in the source.
func (s *scanner) locate(n *yaml.Node, flow bool) (start, end int, err error) {
	style := n.Style &^ yaml.TaggedStyle
	if style&(yaml.LiteralStyle|yaml.FoldedStyle) != 0 {
		return 0, 0, errors.New("block scalar (| or >)")
	}
	off, ok := s.offset(n.Line, n.Column)
	if !ok {
		return 0, 0, fmt.Errorf("no column %d on line %d", n.Column, n.Line)
	}
	off = s.skipProperties(off)
	switch style {
	case yaml.DoubleQuotedStyle:
		end, err = s.quotedEnd(off, '"')
	case yaml.SingleQuotedStyle:
		end, err = s.quotedEnd(off, '\'')
	default:
		end, err = s.plainEnd(off, n.Value, flow)
	}
	if err != nil {
		return 0, 0, err
	}
	if style != 0 {
		var decoded string
		if yaml.Unmarshal(s.src[off:end], &decoded) != nil || decoded != n.Value {
			return 0, 0, errors.New("quoted value does not match its source text")
		}
	}
	return off, end, nil
}

// offset converts yaml.v3's 1-based line and column (counted in characters,
// with YAML's line breaks) into a byte offset.
func (s *scanner) offset(line, column int) (int, bool) {
	if s.lineStarts == nil {
		s.lineStarts = lineStarts(s.src)
	}
	if line < 1 || line > len(s.lineStarts) {
		return 0, false
	}
	off := s.lineStarts[line-1]
	for range column - 1 {
		if off >= len(s.src) || breakWidth(s.src, off) > 0 {
			return 0, false
		}
		_, size := utf8.DecodeRune(s.src[off:])
		off += size
	}
	return off, true
}

// lineStarts returns the byte offset of every line, splitting lines where
// yaml.v3 does: at CR LF, CR, LF, NEL, LS and PS. A leading UTF-8 byte order
// mark is not part of line 1.
func lineStarts(src []byte) []int {
	first := 0
	if bytes.HasPrefix(src, []byte("\uFEFF")) {
		first = 3
	}
	starts := make([]int, 1, bytes.Count(src, []byte("\n"))+2)
	starts[0] = first
	for i := first; i < len(src); {
		// Only these bytes start a line break: \n, \r, and the first byte of
		// NEL (C2 85) and of LS and PS (E2 80 A8/A9).
		for i < len(src) && src[i] != '\n' && src[i] != '\r' && src[i] != 0xC2 && src[i] != 0xE2 {
			i++
		}
		if i == len(src) {
			break
		}
		if w := breakWidth(src, i); w > 0 {
			i += w
			starts = append(starts, i)
			continue
		}
		i++
	}
	return starts
}

// breakWidth returns the length of the line break at src[i:], 0 if none.
func breakWidth(src []byte, i int) int {
	switch {
	case src[i] == '\n':
		return 1
	case src[i] == '\r':
		if i+1 < len(src) && src[i+1] == '\n' {
			return 2
		}
		return 1
	case bytes.HasPrefix(src[i:], []byte("\u0085")):
		return 2
	case bytes.HasPrefix(src[i:], []byte("\u2028")), bytes.HasPrefix(src[i:], []byte("\u2029")):
		return 3
	}
	return 0
}

// skipProperties skips an anchor (&a) and a tag (!!str) in front of a
// scalar, with the blanks after each.
func (s *scanner) skipProperties(off int) int {
	for off < len(s.src) && (s.src[off] == '&' || s.src[off] == '!') {
		for off < len(s.src) && !isBlank(s.src[off]) {
			off++
		}
		for off < len(s.src) && isBlank(s.src[off]) {
			off++
		}
	}
	return off
}

// isBlank reports whether c is white space between tokens.
func isBlank(c byte) bool {
	return c == ' ' || c == '\t' || c == '\r' || c == '\n'
}

// quotedEnd returns the offset just past the closing quote of a quoted
// scalar starting at off; the scalar must be on one line.
func (s *scanner) quotedEnd(off int, quote byte) (int, error) {
	if off >= len(s.src) || s.src[off] != quote {
		return 0, errors.New("quoted value not found at its position")
	}
	for i := off + 1; i < len(s.src); i++ {
		switch {
		case breakWidth(s.src, i) > 0:
			return 0, errors.New("quoted value spans several lines")
		case quote == '"' && s.src[i] == '\\':
			i++
		case s.src[i] == quote && quote == '\'' && i+1 < len(s.src) && s.src[i+1] == '\'':
			i++
		case s.src[i] == quote:
			return i + 1, nil
		}
	}
	return 0, errors.New("unterminated quoted value")
}

// plainEnd returns the offset just past a plain scalar starting at off. A
// one-line plain scalar's text is its value; a multi-line one is refused.
func (s *scanner) plainEnd(off int, value string, flow bool) (int, error) {
	if value == "" {
		return 0, errors.New("empty value")
	}
	end := off + len(value)
	if end > len(s.src) || string(s.src[off:end]) != value {
		return 0, errors.New("plain value spans several lines or is not at its position")
	}
	if end < len(s.src) && !isBlank(s.src[end]) && breakWidth(s.src, end) == 0 &&
		(!flow || bytes.IndexByte([]byte(",]}"), s.src[end]) < 0) {
		return 0, errors.New("plain value does not end where expected")
	}
	return end, nil
}

// objectOf reads the apiVersion, kind and metadata name and namespace of
// a YAML document; those it does not hold (or holds as other than strings)
// stay empty.
func objectOf(doc *yaml.Node) Object {
	var obj Object
	if len(doc.Content) == 0 {
		return obj
	}
	root := doc.Content[0]
	obj.APIVersion = stringField(root, "apiVersion")
	obj.Kind = stringField(root, "kind")
	if md := field(root, "metadata"); md != nil {
		obj.Name = stringField(md, "name")
		obj.Namespace = stringField(md, "namespace")
	}
	return obj
}

// field returns the value of key in the mapping node n, nil when n is not
// a mapping or has no such key.
func field(n *yaml.Node, key string) *yaml.Node {
	if n.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return n.Content[i+1]
		}
	}
	return nil
}

// stringField returns the string value of key in the mapping node n, or "".
func stringField(n *yaml.Node, key string) string {
	if v := field(n, key); v != nil && v.Kind == yaml.ScalarNode && v.Tag == "!!str" {
		return v.Value
	}
	return ""
}
