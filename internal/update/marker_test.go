package update

import (
	"errors"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
)

func TestParseMarker(t *testing.T) {
	agent := PolicyKey{Namespace: "flux-system", Name: "agent"}
	cases := []struct {
		comment, defaultNamespace string
		want                      Marker
		err                       string
	}{
		{comment: `# {"$imagepolicy": "flux-system:agent"}`, want: Marker{Policy: agent, Kind: KindImage}},
		{comment: `{"$imagepolicy":"flux-system:agent:name"}`, want: Marker{Policy: agent, Kind: KindName}},
		{comment: `#{"$imagepolicy": "flux-system:agent:tag"}`, want: Marker{Policy: agent, Kind: KindTag}},
		{comment: `##   {"$imagepolicy": "flux-system:agent:digest"}  `, want: Marker{Policy: agent, Kind: KindDigest}},
		{comment: `# {"$imagepolicy": "flux-system:agent", "x": 1}`, want: Marker{Policy: agent, Kind: KindImage}},
		{comment: `# {"$imagepolicy": "agent"}`, defaultNamespace: "flux-system", want: Marker{Policy: agent, Kind: KindImage}},
		{comment: `# {"$imagepolicy": "team-a:agent.v2"}`, want: Marker{Policy: PolicyKey{Namespace: "team-a", Name: "agent.v2"}, Kind: KindImage}},
		// As in Flux, one colon always separates namespace and name.
		{comment: `# {"$imagepolicy": "agent:tag"}`, defaultNamespace: "flux-system", want: Marker{Policy: PolicyKey{Namespace: "agent", Name: "tag"}, Kind: KindImage}},

		{comment: `# {"$imagepolicy": "agent"}`, err: "has no namespace"},
		{comment: `# {"$imagepolicy": flux-system:agent}`, err: "not a JSON object"},
		{comment: `# {"$imagepolicy": "flux-system:agent"`, err: "not a JSON object"},
		{comment: `# $imagepolicy: flux-system:agent`, err: "not a JSON object"},
		{comment: `# {"$imagepolicy": 3}`, err: "must be a string"},
		{comment: `# {"$imagepolicy ": "flux-system:agent"}`, err: `has no "$imagepolicy" member`},
		{comment: `# {"$imagepolicy": "flux-system:agent:version"}`, err: `unknown suffix "version"`},
		{comment: `# {"$imagepolicy": "flux-system:agent:tag:x"}`, err: "too many parts"},
		{comment: `# {"$imagepolicy": ":agent"}`, err: "not a valid namespace"},
		{comment: `# {"$imagepolicy": "Flux:agent"}`, err: "not a valid namespace"},
		{comment: `# {"$imagepolicy": "flux-system:"}`, err: "not a valid object name"},
		{comment: `# {"$imagepolicy": "flux-system:a b"}`, err: "not a valid object name"},
		{comment: `# {"$imagepolicy": "flux-system:-a"}`, err: "not a valid object name"},
		{comment: `# {"$imagepolicy": "flux-system:a..b"}`, err: "not a valid object name"},
		{comment: `# {"$imagepolicy": "` + strings.Repeat("n", 64) + `:agent"}`, err: "not a valid namespace"},
	}
	for _, tc := range cases {
		t.Run(tc.comment, func(t *testing.T) {
			g := NewWithT(t)
			m, err := ParseMarker(tc.comment, tc.defaultNamespace)
			if tc.err != "" {
				g.Expect(err).To(MatchError(ErrInvalidMarker))
				g.Expect(err).To(MatchError(ContainSubstring(tc.err)))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(m).To(Equal(tc.want))
		})
	}
}

func TestParseMarkerNotAMarker(t *testing.T) {
	g := NewWithT(t)
	_, err := ParseMarker("# just a comment", "")
	g.Expect(err).To(MatchError(ErrNoMarker))
	g.Expect(errors.Is(err, ErrInvalidMarker)).To(BeFalse())
}

func TestMarkerString(t *testing.T) {
	g := NewWithT(t)
	key := PolicyKey{Namespace: "ns", Name: "p"}
	g.Expect(Marker{Policy: key, Kind: KindImage}.String()).To(Equal("ns:p"))
	g.Expect(Marker{Policy: key, Kind: KindDigest}.String()).To(Equal("ns:p:digest"))
	g.Expect(key.String()).To(Equal("ns/p"))
}

func TestParseRef(t *testing.T) {
	cases := map[string]Ref{
		"ghcr.io/acme/agent:1.4.1":                  {Image: "ghcr.io/acme/agent", Tag: "1.4.1"},
		"ghcr.io/acme/agent:1.4.1@sha256:abc":       {Image: "ghcr.io/acme/agent", Tag: "1.4.1", Digest: "sha256:abc"},
		"ghcr.io/acme/agent@sha256:abc":             {Image: "ghcr.io/acme/agent", Digest: "sha256:abc"},
		"ghcr.io/acme/agent":                        {Image: "ghcr.io/acme/agent"},
		"localhost:5000/agent":                      {Image: "localhost:5000/agent"},
		"localhost:5000/agent:v1":                   {Image: "localhost:5000/agent", Tag: "v1"},
		"localhost:5000/agent:v1@sha256:0123456789": {Image: "localhost:5000/agent", Tag: "v1", Digest: "sha256:0123456789"},
		"nginx:1.25":                                {Image: "nginx", Tag: "1.25"},
	}
	for in, want := range cases {
		g := NewWithT(t)
		got := ParseRef(in)
		g.Expect(got).To(Equal(want), in)
		if want.Tag != "" {
			g.Expect(got.String()).To(Equal(in))
		}
	}
}

func TestRefValue(t *testing.T) {
	g := NewWithT(t)
	r := Ref{Image: "ghcr.io/acme/agent", Tag: "1.4.2", Digest: "sha256:abc"}
	g.Expect(r.Value(KindImage)).To(Equal("ghcr.io/acme/agent:1.4.2@sha256:abc"))
	g.Expect(r.Value(KindName)).To(Equal("ghcr.io/acme/agent"))
	g.Expect(r.Value(KindTag)).To(Equal("1.4.2"))
	g.Expect(r.Value(KindDigest)).To(Equal("sha256:abc"))
	g.Expect(Ref{Image: "a", Tag: "1"}.Value(KindImage)).To(Equal("a:1"))
}
