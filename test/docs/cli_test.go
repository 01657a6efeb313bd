package docs

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/uprev-dev/uprev/internal/cli"
)

// TestCLIHelpSamplesMatchTheCLI runs every help sample in docs/cli.md (a
// fenced block whose first line is `$ uprev … -h` or `--help`) against the
// real command and fails unless the sample is a run of whole lines of what
// the command prints, so that a command added, renamed or described anew
// shows in the docs.
func TestCLIHelpSamplesMatchTheCLI(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join(root, "docs", "cli.md"))
	if err != nil {
		t.Fatal(err)
	}
	samples := helpSamples(string(doc))
	if len(samples) == 0 {
		t.Fatal("docs/cli.md has no help sample (a fenced block starting with `$ uprev … -h`); the search is broken")
	}
	for _, s := range samples {
		var out bytes.Buffer
		streams := genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &out}
		if code := cli.Execute(context.Background(), s.args, cli.Options{IOStreams: streams}); code != 0 {
			t.Errorf("uprev %s: exit code %d: %s", strings.Join(s.args, " "), code, out.String())
			continue
		}
		if !isExcerpt(s.lines, strings.Split(strings.TrimRight(out.String(), "\n"), "\n")) {
			t.Errorf("docs/cli.md's sample of `uprev %s` is not what the command prints.\nThe sample:\n%s\nThe command prints:\n%s",
				strings.Join(s.args, " "), strings.Join(s.lines, "\n"), out.String())
		}
	}
}

// helpSample is one help sample of the docs: the command's arguments and
// the lines shown as its output.
type helpSample struct {
	args  []string
	lines []string
}

// helpSamples finds the help samples in a Markdown document.
func helpSamples(doc string) []helpSample {
	var samples []helpSample
	var cur *helpSample
	inBlock := false
	for _, line := range strings.Split(doc, "\n") {
		switch {
		case strings.HasPrefix(line, "```"):
			if cur != nil {
				samples = append(samples, *cur)
				cur = nil
			}
			inBlock = !inBlock
		case inBlock && cur == nil && strings.HasPrefix(line, "$ uprev "):
			args := strings.Fields(strings.TrimPrefix(line, "$ uprev "))
			if n := len(args); n > 0 && (args[n-1] == "-h" || args[n-1] == "--help") {
				cur = &helpSample{args: args}
			}
		case cur != nil:
			cur.lines = append(cur.lines, line)
		}
	}
	return samples
}

// isExcerpt tells whether want is a run of consecutive lines of got,
// trailing spaces aside.
func isExcerpt(want, got []string) bool {
	trim := func(lines []string) []string {
		out := make([]string, len(lines))
		for i, l := range lines {
			out[i] = strings.TrimRight(l, " ")
		}
		return out
	}
	want, got = trim(want), trim(got)
	for start := 0; start+len(want) <= len(got); start++ {
		match := true
		for i := range want {
			if got[start+i] != want[i] {
				match = false
				break
			}
		}
		if match {
			return true
		}
	}
	return false
}
