package printable

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	. "github.com/onsi/gomega"
	"sigs.k8s.io/yaml"
)

// everyControl is every C0 control, DEL and two C1 controls (CSI and
// NEL).
var everyControl = func() string {
	var b strings.Builder
	for c := range 0x20 {
		b.WriteByte(byte(c))
	}
	return b.String() + "\x7f\u009b\u0085"
}()

// unprintable returns the control characters in out a terminal would act
// on: every byte below 0x20 but newline and tab, DEL, and the C1 controls
// (UTF-8 0xc2 0x80..0x9f), each with its offset.
func unprintable(out string) []string {
	var found []string
	for i := 0; i < len(out); i++ {
		c := out[i]
		switch {
		case c < 0x20 && c != '\n' && c != '\t', c == 0x7f:
			found = append(found, fmt.Sprintf("%#02x at %d", c, i))
		case c == 0xc2 && i+1 < len(out) && out[i+1] >= 0x80 && out[i+1] <= 0x9f:
			found = append(found, fmt.Sprintf("U+%04X at %d", out[i+1], i))
		}
	}
	return found
}

// TestString covers the one sanitizer: every control but newline and
// tab is shown escaped, other text (UTF-8 beyond the controls) is kept,
// and what it returns passes it unchanged.
func TestString(t *testing.T) {
	g := NewWithT(t)
	for in, want := range map[string]string{
		"plain 1.0.0":       "plain 1.0.0",
		"a\tb\nc":           "a\tb\nc",
		"\x1b[31mred\x07":   `\x1b[31mred\x07`,
		"\x00\r\x7f":        `\x00\x0d\x7f`,
		"\u009b31m \u0085":  `\u009b31m \u0085`,
		"bad \xff\xc2 byte": `bad \xff\xc2 byte`,
		"é ü 日本 \u00a0 ok":  "é ü 日本 \u00a0 ok",
	} {
		got := String(in)
		g.Expect(got).To(Equal(want), "%q", in)
		g.Expect(String(got)).To(Equal(got), "idempotent on %q", in)
		g.Expect(unprintable(got)).To(BeEmpty())
	}
	g.Expect(String(everyControl)).To(Equal(`\x00\x01\x02\x03\x04\x05\x06\x07\x08` + "\t\n" + `\x0b\x0c\x0d\x0e\x0f\x10\x11\x12\x13\x14\x15\x16\x17\x18\x19\x1a\x1b\x1c\x1d\x1e\x1f\x7f\u009b\u0085`))
}

// TestWriter: a character cut between two writes reaches the
// output whole; one never completed is escaped at Flush.
func TestWriter(t *testing.T) {
	g := NewWithT(t)
	var out bytes.Buffer
	w := NewWriter(&out)
	text := []byte("日本\x1b[2J\n")
	for i := range text {
		n, err := w.Write(text[i : i+1])
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(n).To(Equal(1))
	}
	g.Expect(w.Flush()).To(Succeed())
	g.Expect(out.String()).To(Equal("日本\\x1b[2J\n"))

	out.Reset()
	_, err := w.Write([]byte("end \xe6\x97"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(out.String()).To(Equal("end "))
	g.Expect(w.Flush()).To(Succeed())
	g.Expect(out.String()).To(Equal(`end \xe6\x97`))
	g.Expect(utf8.ValidString(out.String())).To(BeTrue())
}

// TestJSONAndYAML: JSON and YAML carry no control character, and decode
// to the strings encoded.
func TestJSONAndYAML(t *testing.T) {
	g := NewWithT(t)
	value := map[string]string{"v": everyControl + "é 日本"}
	b, err := json.Marshal(value)
	g.Expect(err).NotTo(HaveOccurred())
	b = JSON(b)
	g.Expect(unprintable(string(b))).To(BeEmpty(), "%q", b)
	var back map[string]string
	g.Expect(json.Unmarshal(b, &back)).To(Succeed())
	g.Expect(back).To(Equal(value))

	b, err = YAML(value)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(unprintable(string(b))).To(BeEmpty(), "%q", b)
	back = nil
	g.Expect(yaml.Unmarshal(b, &back)).To(Succeed())
	g.Expect(back).To(Equal(value))
}
