package registry

import (
	"testing"

	. "github.com/onsi/gomega"
)

func TestExclude(t *testing.T) {
	tags := []string{"1.0.0", "sha256-abc.sig", "1.1.0-rc.1", "latest", "sha256-abc.att", "2.0.0"}
	for name, tc := range map[string]struct {
		patterns []string
		want     []string
	}{
		"nothing excluded":      {patterns: nil, want: tags},
		"flux default":          {patterns: []string{`^.*\.sig$`}, want: []string{"1.0.0", "1.1.0-rc.1", "latest", "sha256-abc.att", "2.0.0"}},
		"several patterns":      {patterns: []string{`^.*\.sig$`, `^.*\.att$`, `^latest$`}, want: []string{"1.0.0", "1.1.0-rc.1", "2.0.0"}},
		"unanchored match":      {patterns: []string{`rc`}, want: []string{"1.0.0", "sha256-abc.sig", "latest", "sha256-abc.att", "2.0.0"}},
		"everything excluded":   {patterns: []string{`.*`}, want: []string{}},
		"matching nothing kept": {patterns: []string{`^v`}, want: tags},
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			got, err := Exclude(tags, tc.patterns)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(got).To(Equal(tc.want))
		})
	}
}

func TestExcludeInvalidPatternIsConfigError(t *testing.T) {
	g := NewWithT(t)
	_, err := Exclude([]string{"1.0.0"}, []string{`^.*\.sig$`, `(unclosed`})
	g.Expect(err).To(MatchError(ErrInvalidConfig))
	g.Expect(err.Error()).To(ContainSubstring("(unclosed"))
}
