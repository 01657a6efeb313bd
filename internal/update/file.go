package update

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"gopkg.in/yaml.v3"
)

// errReadBack is wrapped by the error reported for a file whose rewritten
// content does not parse back to the values meant to be written.
var errReadBack = errors.New("rewritten file does not read back as written")

// fileResult is what rewriting one file's content produced.
type fileResult struct {
	changes    []Change
	refused    []Refusal
	unresolved []Unresolved
	errs       []*FileError
	// out is the new content, nil when no value changed.
	out []byte
}

// edit replaces src[start:end] with text.
type edit struct {
	start, end int
	text       string
}

// unitKey groups the markers of one policy in one YAML document; a refusal
// of any of their changes refuses them all, so that a Helm values tag: and
// digest: never end up from different versions.
type unitKey struct {
	doc    int
	policy PolicyKey
}

// rewriter holds what every file of a run is rewritten with.
type rewriter struct {
	policies         map[PolicyKey]Ref
	assets           map[AssetKey]string
	defaultNamespace string
	guard            Guard
	// scans keeps the scans of contents seen before; nil scans each.
	scans *ScanCache
}

// rewriteFile computes the new content of one file. file is the name used
// in the result. A file with any error is left as it was: the result then
// holds only the errors.
func (rw *rewriter) rewriteFile(file string, src []byte) fileResult {
	sites, lineErrs := rw.scans.scan(src, rw.defaultNamespace)
	if len(lineErrs) > 0 {
		errs := make([]*FileError, len(lineErrs))
		for i, e := range lineErrs {
			errs[i] = &FileError{File: file, Line: e.line, Err: e.err}
		}
		return fileResult{errs: errs}
	}

	var res fileResult
	newValues := make([]string, len(sites))
	olds, news := map[unitKey]Ref{}, map[unitKey]Ref{}
	for i, st := range sites {
		ref, ok := rw.policies[st.marker.Policy]
		if !ok {
			res.unresolved = append(res.unresolved, Unresolved{File: file, Line: st.line, Marker: st.marker,
				Reason: fmt.Sprintf("policy %s is not among the automation's policies", st.marker.Policy)})
			continue
		}
		value, missing := rw.value(ref, st.marker)
		if missing != "" {
			res.unresolved = append(res.unresolved, Unresolved{File: file, Line: st.line, Marker: st.marker,
				Reason: fmt.Sprintf("policy %s reports no %s", st.marker.Policy, missing)})
			continue
		}
		newValues[i] = value
		k := unitKey{doc: st.doc, policy: st.marker.Policy}
		olds[k] = fillRef(olds[k], refParts(st.marker.Kind, st.value))
		newParts := refParts(st.marker.Kind, newValues[i])
		if st.marker.Policy.Kind == SourceKind {
			// Every value of a source moves to its one version.
			newParts.Tag = ref.Tag
		}
		news[k] = fillRef(news[k], newParts)
	}

	// Ask the guard about every change first: a refusal holds for the whole
	// unit, including changes the guard allowed.
	var changed []int
	changes := make(map[int]Change)
	reasons := make(map[int]error)
	unitReasons := make(map[unitKey]error)
	for i, st := range sites {
		if newValues[i] == "" || newValues[i] == st.value {
			continue
		}
		k := unitKey{doc: st.doc, policy: st.marker.Policy}
		c := Change{
			File: file, Line: st.line, Object: st.object, Policy: st.marker.Policy, Kind: st.marker.Kind,
			OldValue: st.value, NewValue: newValues[i],
			Old:    documentRef(st.marker.Kind, st.value, olds[k]),
			New:    documentRef(st.marker.Kind, newValues[i], news[k]),
			Latest: rw.policies[st.marker.Policy],
		}
		changed = append(changed, i)
		changes[i] = c
		if rw.guard == nil {
			continue
		}
		if reason := rw.guard(c); reason != nil {
			reasons[i] = reason
			if _, seen := unitReasons[k]; !seen {
				unitReasons[k] = reason
			}
		}
	}

	var edits []edit
	expected := make([]string, len(sites))
	for i, st := range sites {
		expected[i] = st.value
	}
	for _, i := range changed {
		st := sites[i]
		if reason, refused := unitReasons[unitKey{doc: st.doc, policy: st.marker.Policy}]; refused {
			if own, ok := reasons[i]; ok {
				reason = own
			}
			res.refused = append(res.refused, Refusal{Change: changes[i], Reason: reason})
			continue
		}
		edits = append(edits, edit{start: st.start, end: st.end, text: renderScalar(newValues[i], st.style, st.flow)})
		res.changes = append(res.changes, changes[i])
		expected[i] = newValues[i]
	}
	if len(edits) == 0 {
		return res
	}

	out, err := applyEdits(src, edits)
	if err == nil {
		err = rw.checkReadBack(out, sites, expected)
	}
	if err != nil {
		return fileResult{errs: []*FileError{{File: file, Err: err}}}
	}
	res.out = out
	return res
}

// value returns what marker m writes, its policy's reference being ref, or
// names the part the policy does not report.
func (rw *rewriter) value(ref Ref, m Marker) (value, missing string) {
	if m.Kind == KindAssetURL || m.Kind == KindAssetSHA256 {
		v, ok := rw.assets[AssetKey{Source: m.Policy, Kind: m.Kind, Asset: m.Asset}]
		if !ok || v == "" {
			return "", fmt.Sprintf("%s of asset %s", m.Kind, m.Asset)
		}
		return v, ""
	}
	if missing := missingPart(ref, m.Kind); missing != "" {
		return "", missing
	}
	return ref.Value(m.Kind), ""
}

// missingPart names the part of ref that a marker of the given kind needs
// but the policy does not report, or returns "".
func missingPart(ref Ref, kind MarkerKind) string {
	switch {
	case ref.Image == "" && (kind == KindImage || kind == KindName):
		return "image name"
	case ref.Tag == "" && (kind == KindImage || kind == KindTag):
		return "tag"
	case ref.Tag == "" && kind == KindVersion:
		return "version"
	case ref.Digest == "" && kind == KindDigest:
		return "digest"
	}
	return ""
}

// refParts returns the parts of a reference that a marked value of the
// given kind carries.
func refParts(kind MarkerKind, value string) Ref {
	switch kind {
	case KindName:
		return Ref{Image: value}
	case KindTag, KindVersion:
		return Ref{Tag: value}
	case KindDigest:
		return Ref{Digest: value}
	case KindAssetURL, KindAssetSHA256:
		// An asset's value carries no part of the version.
		return Ref{}
	default:
		return ParseRef(value)
	}
}

// documentRef returns the reference a value stands for in its document: a
// bare marker's value is complete; a part is completed from the document's
// other markers of the same policy.
func documentRef(kind MarkerKind, value string, document Ref) Ref {
	if kind == KindImage {
		return ParseRef(value)
	}
	return fillRef(refParts(kind, value), document)
}

// fillRef returns r with its empty parts taken from from.
func fillRef(r, from Ref) Ref {
	return Ref{
		Image:  cmp.Or(r.Image, from.Image),
		Tag:    cmp.Or(r.Tag, from.Tag),
		Digest: cmp.Or(r.Digest, from.Digest),
	}
}

// applyEdits returns src with the edits made.
func applyEdits(src []byte, edits []edit) ([]byte, error) {
	slices.SortFunc(edits, func(a, b edit) int { return cmp.Compare(a.start, b.start) })
	out := make([]byte, 0, len(src)+64*len(edits))
	last := 0
	for _, e := range edits {
		if e.start < last {
			return nil, fmt.Errorf("%w: overlapping values at byte %d", errReadBack, e.start)
		}
		out = append(out, src[last:e.start]...)
		out = append(out, e.text...)
		last = e.end
	}
	return append(out, src[last:]...), nil
}

// checkReadBack parses the rewritten content and checks that it holds the
// same markers, each with the expected value. The scan is kept, so that
// the next run, which reads this content, need not parse it again.
func (rw *rewriter) checkReadBack(out []byte, before []site, expected []string) error {
	after, lineErrs := rw.scans.scan(out, rw.defaultNamespace)
	if len(lineErrs) > 0 {
		return fmt.Errorf("%w: line %d: %w", errReadBack, lineErrs[0].line, lineErrs[0].err)
	}
	if len(after) != len(before) {
		return fmt.Errorf("%w: %d markers instead of %d", errReadBack, len(after), len(before))
	}
	for i, st := range after {
		if st.marker != before[i].marker || st.value != expected[i] {
			return fmt.Errorf("%w: line %d holds %q, want %q", errReadBack, st.line, st.value, expected[i])
		}
	}
	return nil
}

// renderScalar returns the YAML text for value in the given quoting style.
// A value that cannot be written in that style without changing its meaning
// is written double-quoted.
func renderScalar(value string, style yaml.Style, flow bool) string {
	switch {
	case style == yaml.SingleQuotedStyle && singleQuotable(value):
		return "'" + strings.ReplaceAll(value, "'", "''") + "'"
	case style == 0 && plainSafe(value, flow):
		return value
	default:
		return doubleQuote(value)
	}
}

// singleQuotable reports whether value can be written single-quoted on one
// line.
func singleQuotable(value string) bool {
	if !utf8.ValidString(value) {
		return false
	}
	for _, r := range value {
		if r != ' ' && r != '\t' && !unicode.IsPrint(r) {
			return false
		}
	}
	return true
}

// plainSafe reports whether value can be written as a plain scalar and still
// read back as the same string.
func plainSafe(value string, flow bool) bool {
	if value == "" || !singleQuotable(value) || strings.ContainsAny(value, "\t") ||
		strings.ContainsRune("-?:,[]{}#&*!|>'\"%@` ", rune(value[0])) ||
		strings.HasSuffix(value, " ") || strings.HasSuffix(value, ":") ||
		strings.Contains(value, ": ") || strings.Contains(value, " #") ||
		(flow && strings.ContainsAny(value, ",[]{}")) {
		return false
	}
	var n yaml.Node
	if yaml.Unmarshal([]byte(value), &n) != nil || len(n.Content) != 1 {
		return false
	}
	s := n.Content[0]
	return s.Kind == yaml.ScalarNode && s.Style == 0 && s.Tag == "!!str" && s.Value == value
}

// doubleQuote returns value as a YAML double-quoted scalar.
func doubleQuote(value string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range value {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\t':
			b.WriteString(`\t`)
		case r == ' ' || unicode.IsPrint(r) && r != utf8.RuneError:
			b.WriteRune(r)
		case r <= 0xFFFF:
			fmt.Fprintf(&b, `\u%04X`, r)
		default:
			fmt.Fprintf(&b, `\U%08X`, r)
		}
	}
	b.WriteByte('"')
	return b.String()
}
