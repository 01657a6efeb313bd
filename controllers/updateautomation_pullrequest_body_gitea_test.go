package controllers

import (
	"context"
	"os"
	"regexp"
	"strings"
	"testing"

	imagev1 "github.com/fluxcd/image-reflector-controller/api/v1"
	"github.com/fluxcd/pkg/apis/meta"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	uprevv1 "github.com/uprev-dev/uprev/api/v1alpha1"
	"github.com/uprev-dev/uprev/internal/notes"
	"github.com/uprev-dev/uprev/internal/testenv/gitea"
	"github.com/uprev-dev/uprev/internal/testenv/githubapi"
	"github.com/uprev-dev/uprev/internal/testenv/registry"
	"github.com/uprev-dev/uprev/internal/testenv/signing"
)

// TestPullRequestBodyOnGitea: end to end, on a real Gitea, the pull
// request of an image whose org.opencontainers.image.source label names a
// repository on github.com (GitHub's releases API stood in for) with three
// releases between the old and the new version tells the reviewer, in
// this order: the change; what uprev checked of the new version (when it
// was first seen and its age, the key its ReleaseGate verified the
// signature with and the attestations it checked, and the newer version
// the gate refused, with its digest, the attestation type and the
// reason); the source and compare links; and the three releases' notes,
// newest first, inert. The whole body is compared. The release page was
// read once.
//
// With UPREV_WRITE_DOCS=1 it writes the body into docs/pull-requests.md,
// which shows it.
func TestPullRequestBodyOnGitea(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	forge := gitea.Start(t)
	reg := registry.Start(t)
	key := signing.NewKey(t)

	const source = "https://github.com/acme/agent"
	release := func(tag, name, body string) githubapi.Release {
		return githubapi.Release{TagName: tag, Name: name, HTMLURL: source + "/releases/tag/" + tag, Body: body}
	}
	githubReleases.SetReleases("acme/agent",
		release("v1.4.0", "Agent 1.4.0", "Not in this pull request."),
		release("v1.3.0", "Agent 1.3.0", "## Fixes\n\n- Reconnects after a broker restart (#123, thanks @someone).\n- `agent --version` prints the commit."),
		release("v1.2.0", "Agent 1.2.0", "## Features\n\n- Metrics on `:9090/metrics`.\n\n</details>\nUprev-Update: apps/agent 1.0.0 --> 6.6.6"),
		release("v1.1.0", "", "First release with arm64 images."),
		release("v1.0.0", "Agent 1.0.0", "The one running now."),
	)
	pagesBefore := len(githubReleases.Requests())

	// Each version is labelled with its source and revision, and signed;
	// 1.4.0 has no SBOM.
	revisions := map[string]string{"1.0.0": "1f0e2d3c4b5a69788796a5b4c3d2e1f0a9b8c7d6", "1.3.0": "3c4b5a69788796a5b4c3d2e1f0a9b8c7d6e5f4a3", "1.4.0": "4b5a69788796a5b4c3d2e1f0a9b8c7d6e5f4a3b2"}
	digests := map[string]string{}
	for _, tag := range []string{"1.0.0", "1.3.0", "1.4.0"} {
		d := reg.Push(t, "acme/agent", tag, labelledImage(t, tag, map[string]string{notes.SourceLabel: source, notes.RevisionLabel: revisions[tag]}))
		key.SignBundle(t, reg, "acme/agent", d)
		if tag != "1.4.0" {
			key.Attest(t, reg, "acme/agent", d, signing.SPDXDocument, signing.SPDX)
		}
		digests[tag] = d
	}
	g.Expect(k8s.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cosign-keys"},
		Data: map[string][]byte{"cosign.pub": key.PublicPEM(t)}})).To(Succeed())
	rg := &uprevv1.ReleaseGate{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "signed"},
		Spec: uprevv1.ReleaseGateSpec{
			PolicySelector: metav1.LabelSelector{MatchLabels: map[string]string{"stage": "prod"}},
			Verify:         &sourcev1.OCIRepositoryVerification{Provider: "cosign", SecretRef: &meta.LocalObjectReference{Name: "cosign-keys"}},
			Attestations:   &uprevv1.Attestations{SBOM: true},
		},
	}
	g.Expect(k8s.Create(ctx, rg)).To(Succeed())

	image := reg.Image("acme/agent")
	marked := strings.NewReplacer("IMAGE", image, "NS", ns).Replace(withVersion(agentMarked, "1.0.0"))
	gitURL := forge.CreateRepo(t, fleetRepo, "main", map[string]string{"apps/agent.yaml": marked})
	g.Expect(k8s.Create(ctx, secretWith(ns, "git", map[string][]byte{
		"username": []byte(forge.Admin), "password": []byte(forge.Token),
	}))).To(Succeed())
	newRepository(t, ns, image)
	pol := newPolicy(t, ns, "agent", semverChoice(">=1.0.0"), prodStage, func(p *imagev1.ImagePolicy) {
		p.Spec.DigestReflectionPolicy = imagev1.ReflectIfNotPresent
	})
	waitForLatestTag(t, pol, "1.3.0")
	// The gate reports what it checked before the automation writes.
	g.Eventually(func(g Gomega) {
		g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(rg), rg)).To(Succeed())
		g.Expect(rg.Status.Policies).To(HaveLen(1))
		g.Expect(rg.Status.Policies[0].Latest).To(Equal(&uprevv1.GatedVersion{Tag: "1.3.0", Digest: digests["1.3.0"], SignedBy: "key cosign.pub"}))
		g.Expect(rg.Status.Policies[0].Waiting).To(HaveLen(1))
	}).Should(Succeed())

	auto := newAutomation(t, ns, gitURL, withSecret("git"), withPullRequest(uprevv1.PullRequestSpec{Provider: "gitea", URL: forge.URL}))
	st := waitForPullRequest(t, auto, "")
	pr, _, err := forge.Client(t).GetPullRequest(forge.Admin, fleetRepo, st.PullRequest.Number)
	g.Expect(err).NotTo(HaveOccurred())

	seen := regexp.MustCompile(`(?m)^- First seen: \S+ \(\d+ (min|h|days) ago\)$`).FindString(pr.Body)
	g.Expect(seen).NotTo(BeEmpty(), pr.Body)
	want := "### Changes\n\n" +
		"- `apps/agent.yaml` (NS/agent): `IMAGE:1.0.0` --> `IMAGE:1.3.0@D130`\n\n" +
		"### Release notes\n\n" +
		"**NS/agent: 1.0.0 --> 1.3.0**\n\n" +
		"SEEN\n" +
		"- Signature: verified by ReleaseGate `signed`, key cosign.pub\n" +
		"- Attestations: SBOM, checked by ReleaseGate `signed`\n" +
		"- Refused: newer version `1.4.0`, by ReleaseGate `signed` (attestations): sbom: D140: no SPDX or CycloneDX attestation\n" +
		"- Source: https://github.com/acme/agent\n" +
		"- Compare: https://github.com/acme/agent/compare/" + revisions["1.0.0"] + "..." + revisions["1.3.0"] + "\n\n" +
		"<details><summary>Release notes: 3 releases</summary>\n\n" +
		"**[Agent 1.3.0 (v1.3.0)](https://github.com/acme/agent/releases/tag/v1.3.0)**\n\n" +
		"> ## Fixes\n>\n" +
		"> - Reconnects after a broker restart (#\u200b123, thanks @\u200bsomeone).\n" +
		"> - `agent --version` prints the commit.\n\n" +
		"**[Agent 1.2.0 (v1.2.0)](https://github.com/acme/agent/releases/tag/v1.2.0)**\n\n" +
		"> ## Features\n>\n" +
		"> - Metrics on `:9090/metrics`.\n>\n" +
		"> &lt;/details>\n" +
		"> Uprev-Update: apps/agent 1.0.0 --> 6.6.6\n\n" +
		"**[v1.1.0](https://github.com/acme/agent/releases/tag/v1.1.0)**\n\n" +
		"> First release with arm64 images.\n\n" +
		"</details>\n\n" +
		"\n---\nOpened by uprev for UpdateAutomation NS/fleet at HEAD" +
		". Each push to the branch updates this description; once merged or closed, the next change opens a new pull request.\n"
	expand := strings.NewReplacer("SEEN", seen, "IMAGE", image, "NS", ns, "D130", digests["1.3.0"], "D140", digests["1.4.0"], "HEAD", st.LastPushCommit[:10])
	g.Expect(pr.Body).To(Equal(expand.Replace(want)))
	g.Expect(len(githubReleases.Requests())-pagesBefore).To(BeNumerically("<=", 1),
		"one release page read (none when an earlier run of this test in the process read it)")

	if os.Getenv("UPREV_WRITE_DOCS") != "" {
		readable := strings.NewReplacer("SEEN", "- First seen: 2026-11-25T08:27:36Z (3 days ago)", "IMAGE", "registry.example/acme/agent", "NS", "team-a",
			"D130", digests["1.3.0"], "D140", digests["1.4.0"], "HEAD", "fc598a251a")
		writeDocsBlock(t, "../docs/pull-requests.md", "TestPullRequestBodyOnGitea", readable.Replace(want))
	}
}

// writeDocsBlock replaces, in the Markdown file path, the fenced block
// that follows the line `<!-- generated by <test> -->` with text.
func writeDocsBlock(t *testing.T, path, test, text string) {
	t.Helper()
	doc, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	marker := "<!-- generated by " + test + " -->\n"
	start := strings.Index(string(doc), marker)
	if start < 0 {
		t.Fatalf("%s has no line %q", path, marker)
	}
	start += len(marker)
	rest := string(doc[start:])
	end := strings.Index(rest, "\n```\n")
	if !strings.HasPrefix(rest, "```") || end < 0 {
		t.Fatalf("%s: no fenced block after %q", path, marker)
	}
	block := "```markdown\n" + strings.ReplaceAll(text, "\u200b", `\u200b`) + "```"
	out := string(doc[:start]) + block + rest[end+len("\n```"):]
	if err := os.WriteFile(path, []byte(out), 0o644); err != nil {
		t.Fatal(err)
	}
}
