package update_test

import (
	"errors"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/uprev-dev/uprev/internal/update"
)

func TestResultSummaries(t *testing.T) {
	g := NewWithT(t)
	agent := update.PolicyKey{Namespace: "flux-system", Name: "agent"}
	web := update.PolicyKey{Namespace: "apps", Name: "web"}
	res := update.Result{
		Changes: []update.Change{
			{File: "b.yaml", Line: 3, Policy: agent, Kind: update.KindTag, OldValue: "1.4.1", NewValue: "1.4.2",
				Old: update.Ref{Tag: "1.4.1", Digest: "sha256:a"}, New: update.Ref{Tag: "1.4.2", Digest: "sha256:b"}},
			{File: "b.yaml", Line: 4, Policy: agent, Kind: update.KindDigest, OldValue: "sha256:a", NewValue: "sha256:b",
				Old: update.Ref{Tag: "1.4.1", Digest: "sha256:a"}, New: update.Ref{Tag: "1.4.2", Digest: "sha256:b"}},
			{File: "a.yaml", Line: 1, Policy: agent, Kind: update.KindImage, OldValue: "x:1.4.0", NewValue: "x:1.4.2",
				Old: update.Ref{Image: "x", Tag: "1.4.0"}, New: update.Ref{Image: "x", Tag: "1.4.2"}},
			{File: "a.yaml", Line: 2, Policy: web, Kind: update.KindDigest, OldValue: "", NewValue: "sha256:c",
				Old: update.Ref{Tag: "v2"}, New: update.Ref{Tag: "v2", Digest: "sha256:c"}},
			{File: "c.yaml", Line: 2, Policy: web, Kind: update.KindName, OldValue: "old/web", NewValue: "new/web",
				Old: update.Ref{Image: "old/web"}, New: update.Ref{Image: "new/web"}},
		},
	}
	g.Expect(res.Changed()).To(BeTrue())
	g.Expect(res.Files()).To(Equal([]string{"a.yaml", "b.yaml", "c.yaml"}))
	g.Expect(res.Err()).NotTo(HaveOccurred())
	var lines []string
	for _, u := range res.Updates() {
		lines = append(lines, u.String())
	}
	g.Expect(lines).To(Equal([]string{
		"apps/web old/web --> new/web",
		"apps/web v2 --> v2@sha256:c",
		"flux-system/agent 1.4.0 --> 1.4.2",
		"flux-system/agent 1.4.1 --> 1.4.2",
	}))
	g.Expect(res.Changes[3].String()).To(Equal(`a.yaml:2 apps/web "" --> sha256:c`))
	g.Expect(update.Result{}.Changed()).To(BeFalse())
}

func TestResultErr(t *testing.T) {
	g := NewWithT(t)
	cause := errors.New("boom")
	res := update.Result{FileErrors: []*update.FileError{
		{File: "a.yaml", Line: 3, Err: update.ErrInvalidMarker},
		{File: "b.yaml", Err: cause},
	}}
	err := res.Err()
	g.Expect(err).To(MatchError(update.ErrInvalidMarker))
	g.Expect(err).To(MatchError(cause))
	g.Expect(err.Error()).To(Equal("a.yaml:3: invalid image policy marker\nb.yaml: boom"))
}
