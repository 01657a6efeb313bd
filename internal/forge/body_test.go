package forge

import (
	"strings"
	"testing"

	. "github.com/onsi/gomega"
)

func TestBody(t *testing.T) {
	const digestOld = "sha256:1111111111111111111111111111111111111111111111111111111111111111"
	const digestNew = "sha256:2222222222222222222222222222222222222222222222222222222222222222"
	tests := []struct {
		name    string
		in      Description
		want    []string
		notWant []string
	}{{
		name: "changes with digests",
		in: Description{Automation: "UpdateAutomation fleet/prod", Head: "0123456789abcdef", Changes: []Change{
			{File: "apps/agent.yaml", Policy: "fleet/agent", Old: "ghcr.io/acme/agent:1.0.0@" + digestOld, New: "ghcr.io/acme/agent:1.1.0@" + digestNew},
			{File: "apps/values.yaml", Policy: "fleet/agent", Old: "1.0.0", New: "1.1.0"},
		}},
		want: []string{
			"### Changes\n\n- `apps/agent.yaml` (fleet/agent): `ghcr.io/acme/agent:1.0.0@" + digestOld + "` --> `ghcr.io/acme/agent:1.1.0@" + digestNew + "`\n",
			"- `apps/values.yaml` (fleet/agent): `1.0.0` --> `1.1.0`\n",
			"UpdateAutomation fleet/prod at 0123456789.",
		},
		notWant: []string{"### Held", "### Refused", "### CRDs", "No changes"},
	}, {
		name: "a value set where there was none",
		in:   Description{Changes: []Change{{File: "a.yaml", Policy: "ns/p", Old: "", New: "1.0.0"}}},
		want: []string{"`a.yaml` (ns/p): `\"\"` --> `1.0.0`"},
	}, {
		name: "updates from trailers when the changes are not known",
		in:   Description{Updates: []Update{{Policy: "fleet/agent", Old: "1.0.0", New: "1.1.0"}}},
		want: []string{"### Changes\n\n- fleet/agent: `1.0.0` --> `1.1.0`\n"},
	}, {
		name: "changes win over updates",
		in: Description{Changes: []Change{{File: "a.yaml", Policy: "ns/p", Old: "1", New: "2"}},
			Updates: []Update{{Policy: "ns/p", Old: "1", New: "2"}}},
		want:    []string{"`a.yaml` (ns/p)"},
		notWant: []string{"- ns/p:"},
	}, {
		name: "a pull request of several commits: the last push by file, all updates by policy",
		in: Description{Commits: 2, Changes: []Change{{File: "a.yaml", Policy: "ns/p", Old: "img:1.1.0", New: "img:1.2.0"}},
			Updates: []Update{{Policy: "ns/p", Old: "1.0.0", New: "1.2.0"}}},
		want: []string{
			"### Changes in the last push\n\n- `a.yaml` (ns/p): `img:1.1.0` --> `img:1.2.0`\n",
			"### All updates in this pull request (2 commits)\n\n- ns/p: `1.0.0` --> `1.2.0`\n",
		},
		notWant: []string{"### Changes\n"},
	}, {
		name: "CRDs, holds and refused downgrades",
		in: Description{
			CRDs: []string{"crds: agents.example.com 1.0.0 --> 1.1.0"},
			Held: []Held{{Policy: "fleet/agent", Version: "1.2.0", RevertedIn: "abcdef0123456789"},
				{Policy: "fleet/ctl", Version: "2.1.0", RevertedIn: "0123456789abcdef", RejectedBy: "`Alice`", Reason: "`crashes on arm64`"}},
			RefusedDowngrades: []RefusedDowngrade{{Policy: "fleet/ctl", File: "apps/ctl.yaml", Current: "2.0.0", Selected: "1.9.0"}},
		},
		want: []string{
			"### CRDs\n\n- crds: agents.example.com 1.0.0 --> 1.1.0\n",
			"### Held versions\n",
			"- fleet/agent `1.2.0`, reverted in abcdef0123\n",
			"- fleet/ctl `2.1.0`, rejected by `Alice` in 0123456789, reason: `crashes on arm64`\n",
			"### Refused downgrades\n",
			"- `apps/ctl.yaml` (fleet/ctl): stays at `2.0.0`, the policy selects `1.9.0`\n",
		},
		notWant: []string{"### Changes"},
	}, {
		name: "nothing to list",
		in:   Description{Automation: "UpdateAutomation ns/a"},
		want: []string{"No changes to list.\n"},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			body := Body(tt.in)
			for _, w := range tt.want {
				g.Expect(body).To(ContainSubstring(w))
			}
			for _, w := range tt.notWant {
				g.Expect(body).NotTo(ContainSubstring(w))
			}
			g.Expect(strings.Count(body, "\n---\n")).To(Equal(1), "one footer")
		})
	}
}

func TestFoldUpdates(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   []Update
		want []Update
	}{
		{name: "none", want: []Update{}},
		{name: "one", in: []Update{{"ns/a", "1", "2"}}, want: []Update{{"ns/a", "1", "2"}}},
		{name: "first old to last new", in: []Update{{"ns/a", "1", "2"}, {"ns/b", "5", "6"}, {"ns/a", "2", "3"}},
			want: []Update{{"ns/a", "1", "3"}, {"ns/b", "5", "6"}}},
		{name: "back where it started", in: []Update{{"ns/a", "1", "2"}, {"ns/a", "2", "1"}}, want: []Update{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			NewWithT(t).Expect(FoldUpdates(tc.in)).To(Equal(tc.want))
		})
	}
}
