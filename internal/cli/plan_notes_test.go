package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	. "github.com/onsi/gomega"

	"github.com/uprev-dev/uprev/internal/notes"
	"github.com/uprev-dev/uprev/internal/testenv/githubapi"
	"github.com/uprev-dev/uprev/internal/testenv/gitserver"
	"github.com/uprev-dev/uprev/internal/testenv/registry"
)

// TestPlanCommandNotes: `uprev plan --notes` prints, after the plan, what
// the pull request body would say of the image update: its source and
// compare links from the image's labels and the releases between the two
// versions, read from the registry and from GitHub's API (stood in for);
// without --notes, nothing of it.
func TestPlanCommandNotes(t *testing.T) {
	g := NewWithT(t)
	reg := registry.Start(t)
	const source = "https://github.com/acme/agent"
	for tag, revision := range map[string]string{"1.0.0": "1111111aaaaaaa", "1.1.0": "2222222bbbbbbb"} {
		img, err := mutate.Config(registry.ImageOf(t, registry.Layer(t, registry.Tar(t, map[string]string{"v": tag}))),
			v1.Config{Labels: map[string]string{notes.SourceLabel: source, notes.RevisionLabel: revision}})
		g.Expect(err).NotTo(HaveOccurred())
		reg.Push(t, "acme/agent", tag, img)
	}
	image := reg.Image("acme/agent")
	gh := githubapi.StartReleases(t)
	gh.SetReleases("acme/agent", githubapi.Release{TagName: "v1.1.0", HTMLURL: source + "/releases/tag/v1.1.0", Body: "Faster, thanks @dev."})
	dir := t.TempDir()
	gitserver.RunGit(t, dir, "init", "-q", "-b", "main")
	planCommit(t, dir, "Add agent", map[string]string{"apps/agent.yaml": "image: " + image + ":1.0.0 # {\"$imagepolicy\": \"fleet:agent\"}\n"})
	refs := filepath.Join(t.TempDir(), "refs.yaml")
	g.Expect(os.WriteFile(refs, []byte("fleet/agent: {name: "+image+", tag: 1.1.0}\n"), 0o644)).To(Succeed())

	var stdout, stderr bytes.Buffer
	args := []string{"--checkout", dir, "--refs", refs, "--namespace", "fleet", "--github-api", gh.URL}
	g.Expect(runPlan(context.Background(), append(args, "--notes"), &stdout, &stderr)).To(Equal(2), stderr.String())
	g.Expect(stdout.String()).To(Equal("apps/agent.yaml: " + image + " 1.0.0 --> 1.1.0\n\n" +
		"**fleet/agent: 1.0.0 --> 1.1.0**\n\n" +
		"- Source: https://github.com/acme/agent\n" +
		"- Compare: https://github.com/acme/agent/compare/1111111aaaaaaa...2222222bbbbbbb\n\n" +
		"<details><summary>Release notes: 1 release</summary>\n\n" +
		"**[v1.1.0](https://github.com/acme/agent/releases/tag/v1.1.0)**\n\n" +
		"> Faster, thanks @\u200bdev.\n\n" +
		"</details>\n\n"))
	g.Expect(stderr.String()).To(BeEmpty())

	stdout.Reset()
	g.Expect(runPlan(context.Background(), args, &stdout, &stderr)).To(Equal(2))
	g.Expect(stdout.String()).To(Equal("apps/agent.yaml: " + image + " 1.0.0 --> 1.1.0\n"))
	g.Expect(gh.Requests()).To(HaveLen(1), "without --notes, no notes are read")
}
