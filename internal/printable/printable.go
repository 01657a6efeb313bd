// Package printable shows control characters visibly: what uprev prints
// or serves that came from the cluster, where a tenant may have written
// escape sequences, passes it (String, Writer), and its JSON and YAML
// encodings carry every control escaped (JSON, YAML).
package printable

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	"sigs.k8s.io/yaml"
)

// String returns s with every control character shown visibly, so that a
// value a tenant wrote (an annotation, a status message, a name of a hold)
// cannot move the cursor, retitle the window, ring the bell or rewrite
// what the terminal shows: kubectl's practice
// (k8s.io/cli-runtime/pkg/printers.EscapeTerminal), extended from ESC and
// CR to every control. It is the one sanitizer of what uprev prints: the
// CLI's table cells pass it, and so does everything written to its output
// and error streams (Writer).
//
// Newline and tab are kept: they shape tables and messages, and cell()
// folds them out of a table's cells. Every other C0 control and DEL is
// shown as \xNN (ESC as \x1b, the bell as \x07), a C1 control
// (U+0080..U+009F, which some terminals read as ESC sequences) as \uNNNN,
// and a byte that is not UTF-8 as \xNN. The escaping is not reversible
// (a backslash is not escaped) and is idempotent: what it returns passes
// it unchanged.
func String(s string) string {
	if !needsEscaping(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 8)
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case r == '\n' || r == '\t':
			b.WriteRune(r)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, `\x%02x`, r)
		case r >= 0x80 && r <= 0x9f:
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

// needsEscaping says whether String would change s.
func needsEscaping(s string) bool {
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if (c < 0x20 && c != '\n' && c != '\t') || c == 0x7f {
				return true
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if (r == utf8.RuneError && size == 1) || r <= 0x9f {
			return true
		}
		i += size
	}
	return false
}

// Writer passes everything written to it through String on its way to
// the writer it wraps. A UTF-8 sequence cut at the end of one Write is
// kept until the next one (or Flush), so that a character split between
// two writes is not escaped as bytes that are not UTF-8.
type Writer struct {
	w io.Writer
	// pending is the start of a character the last Write ended in.
	pending []byte
}

// NewWriter returns a Writer writing to w.
func NewWriter(w io.Writer) *Writer {
	return &Writer{w: w}
}

// Write writes b through String, keeping a cut character at its end for
// the next Write. It reports b as written when the wrapped writer took
// what was passed on.
func (p *Writer) Write(b []byte) (int, error) {
	data := append(p.pending, b...)
	cut := cutCharacter(data)
	p.pending = append([]byte(nil), data[len(data)-cut:]...)
	if _, err := io.WriteString(p.w, String(string(data[:len(data)-cut]))); err != nil {
		return 0, err
	}
	return len(b), nil
}

// Flush writes a cut character that no Write completed, escaped.
func (p *Writer) Flush() error {
	if len(p.pending) == 0 {
		return nil
	}
	pending := p.pending
	p.pending = nil
	_, err := io.WriteString(p.w, String(string(pending)))
	return err
}

// cutCharacter returns how many bytes at the end of data are the start of
// a UTF-8 character that data does not complete.
func cutCharacter(data []byte) int {
	for n := 1; n < utf8.UTFMax && n <= len(data); n++ {
		tail := data[len(data)-n:]
		if utf8.RuneStart(tail[0]) {
			if utf8.FullRune(tail) {
				return 0
			}
			return n
		}
	}
	return 0
}

// JSON writes DEL and the C1 controls in b (JSON text), which
// encoding/json leaves as they are, as JSON escapes (\u007f), so that the
// JSON carries no control character and still decodes to the same
// strings. Outside strings JSON has printable ASCII only, so every such
// character is inside a string.
func JSON(b []byte) []byte {
	s := string(b)
	if !needsEscaping(s) {
		return b
	}
	var out strings.Builder
	out.Grow(len(s) + 16)
	for _, r := range s {
		if r == 0x7f || (r >= 0x80 && r <= 0x9f) {
			fmt.Fprintf(&out, `\u%04x`, r)
			continue
		}
		out.WriteRune(r)
	}
	return []byte(out.String())
}

// YAML returns v as YAML, as sigs.k8s.io/yaml's Marshal writes it (through
// its JSON form), with every control character escaped in double quotes:
// Marshal fails on DEL and the C1 controls ("control characters are not
// allowed"), which encoding/json leaves raw; JSON escapes them first.
func YAML(v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("encoding YAML: %w", err)
	}
	return yaml.JSONToYAML(JSON(b))
}
