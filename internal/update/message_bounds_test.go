package update

import (
	"runtime"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

// hostileTemplates are message templates a tenant could write to make the
// manager allocate or loop without end, each with the uprev kinds it
// applies to (Flux's templates have sprig's functions, uprev's do not).
var hostileTemplates = []struct {
	name, text string
	flux, own  bool
}{
	{"repeat", `{{ repeat 300000000 "a" }}`, true, false},
	{"until", `{{ range until 300000000 }}{{ end }}`, true, false},
	{"untilStep", `{{ range untilStep 0 300000000 1 }}{{ end }}`, true, false},
	{"seq", `{{ seq 300000000 }}`, true, false},
	{"indent", `{{ indent 300000000 "a" }}`, true, false},
	{"nindent", `{{ nindent 300000000 "a" }}`, true, false},
	{"printf width", `{{ printf "%300000000d" 1 }}`, true, true},
	{"printf star width", `{{ printf "%*d" 300000000 1 }}`, true, true},
	{"doubling", `{{ $s := "aaaaaaaaaaaaaaaa" }}{{ range 30 }}{{ $s = print $s $s }}{{ end }}{{ len $s }}`, true, true},
	{"sprig doubling", `{{ $s := "aaaaaaaaaaaaaaaa" }}{{ range 30 }}{{ $s = cat $s $s }}{{ end }}{{ len $s }}`, true, false},
	{"list doubling", `{{ $l := list 1 2 3 4 }}{{ range 30 }}{{ $l = concat $l $l }}{{ end }}{{ len $l }}`, true, false},
	{"endless loop", `{{ range 2000000000 }}{{ end }}`, true, true},
	{"nested loops", `{{ range 100000 }}{{ range 100000 }}{{ end }}{{ end }}`, true, true},
	{"long output", `{{ range 100000 }}aaaaaaaaaa{{ end }}`, true, true},
}

// TestHostileMessageTemplatesAreBounded: every hostile template fails fast
// with an error naming the bound, having allocated a few MiB at most.
func TestHostileMessageTemplatesAreBounded(t *testing.T) {
	for _, tc := range hostileTemplates {
		for _, kind := range []string{"flux", "own"} {
			if (kind == "flux" && !tc.flux) || (kind == "own" && !tc.own) {
				continue
			}
			t.Run(kind+" "+tc.name, func(t *testing.T) {
				g := NewWithT(t)
				var execute func() error
				if kind == "flux" {
					tmpl, err := ParseFluxMessageTemplate(tc.text)
					g.Expect(err).NotTo(HaveOccurred())
					execute = func() error { _, err := FluxCommitMessage(tmpl, FluxMessageData{}); return err }
				} else {
					tmpl, err := ParseMessageTemplate(tc.text)
					g.Expect(err).NotTo(HaveOccurred())
					execute = func() error { _, err := CommitMessage(tmpl, CommitData{}); return err }
				}
				runtime.GC()
				var before, after runtime.MemStats
				runtime.ReadMemStats(&before)
				start := time.Now()
				err := execute()
				took := time.Since(start)
				runtime.ReadMemStats(&after)
				allocated := after.TotalAlloc - before.TotalAlloc
				g.Expect(err).To(MatchError(ErrTemplateBound), "the template is refused")
				g.Expect(err).To(MatchError(ContainSubstring("commit message template exceeds a bound")))
				g.Expect(allocated).To(BeNumerically("<", 16<<20), "bytes allocated (garbage included)")
				g.Expect(took).To(BeNumerically("<", 3*time.Second), "time taken")
			})
		}
	}
}

// TestMessageTemplatesWithinBoundsWork: a message up to MaxMessageBytes
// is written, and sprig's capped functions still work within their caps.
func TestMessageTemplatesWithinBoundsWork(t *testing.T) {
	g := NewWithT(t)
	tmpl, err := ParseFluxMessageTemplate(`{{ repeat 3 "ab" }} {{ range until 3 }}{{ . }}{{ end }} {{ seq 3 }} {{ printf "%5d" 7 }}|{{ indent 2 "x" }}`)
	g.Expect(err).NotTo(HaveOccurred())
	msg, err := FluxCommitMessage(tmpl, FluxMessageData{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(msg).To(Equal("ababab 012 1 2 3     7|  x"))

	tmpl, err = ParseMessageTemplate(`{{ range 4096 }}0123456789abcde{{ end }}`)
	g.Expect(err).NotTo(HaveOccurred())
	msg, err = CommitMessage(tmpl, CommitData{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(len(msg)).To(Equal(4096*15+1), "a message just under the bound")
	g.Expect(strings.Count(msg, "0123456789abcde")).To(Equal(4096))
}
