// Package examples checks that every example manifest is valid for the
// types uprev serves; the scenarios themselves run in test/demo and
// test/e2e.
package examples

import (
	"bufio"
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	imagev1 "github.com/fluxcd/image-reflector-controller/api/v1"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/yaml"
	sigsyaml "sigs.k8s.io/yaml"

	uprevv1 "github.com/uprev-dev/uprev/api/v1alpha1"
	"github.com/uprev-dev/uprev/internal/update"
)

// kinds maps the kinds of uprev's API to their Go types.
var kinds = map[string]func() runtime.Object{
	"ImageRepository":  func() runtime.Object { return &imagev1.ImageRepository{} },
	"ImagePolicy":      func() runtime.Object { return &imagev1.ImagePolicy{} },
	"UpdateAutomation": func() runtime.Object { return &uprevv1.UpdateAutomation{} },
	"Sync":             func() runtime.Object { return &uprevv1.Sync{} },
	"ReleaseSource":    func() runtime.Object { return &uprevv1.ReleaseSource{} },
	"ReleaseGate":      func() runtime.Object { return &uprevv1.ReleaseGate{} },
}

// TestExamplesDecodeStrictly reads every YAML document of the examples that
// is one of uprev's kinds, refusing unknown fields, so a typo in an example
// fails here.
func TestExamplesDecodeStrictly(t *testing.T) {
	g := NewWithT(t)
	seen := 0
	err := filepath.WalkDir(".", func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".yaml") {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		docs := yaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
		for {
			doc, err := docs.Read()
			if err == io.EOF {
				return nil
			}
			g.Expect(err).NotTo(HaveOccurred(), path)
			var meta struct{ Kind string }
			g.Expect(sigsyaml.Unmarshal(doc, &meta)).To(Succeed(), path)
			newObj, ok := kinds[meta.Kind]
			if !ok {
				continue
			}
			g.Expect(sigsyaml.UnmarshalStrict(doc, newObj())).To(Succeed(), path)
			seen++
		}
	})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(seen).To(BeNumerically(">=", 5))
}

// TestReviewBranchMessage renders the review-branch example's template as
// its README shows it.
func TestReviewBranchMessage(t *testing.T) {
	g := NewWithT(t)
	data, err := os.ReadFile("review-branch/updateautomation.yaml")
	g.Expect(err).NotTo(HaveOccurred())
	var auto uprevv1.UpdateAutomation
	g.Expect(sigsyaml.UnmarshalStrict(data, &auto)).To(Succeed())
	tmpl, err := update.ParseMessageTemplate(auto.Spec.Git.Commit.MessageTemplate)
	g.Expect(err).NotTo(HaveOccurred())
	agent := update.PolicyKey{Namespace: "fleet", Name: "agent"}
	msg, err := update.CommitMessage(tmpl, update.CommitData{
		Changes: []update.Change{{File: "clusters/prod/agent.yaml", Policy: agent,
			OldValue: "ghcr.io/acme/agent:1.4.1", NewValue: "ghcr.io/acme/agent:1.4.2@sha256:…"}},
		Updates: []update.PolicyUpdate{{Policy: agent, Old: update.Ref{Tag: "1.4.1"}, New: update.Ref{Tag: "1.4.2"}}},
	})
	g.Expect(err).NotTo(HaveOccurred())
	readme, err := os.ReadFile("review-branch/README.md")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(readme)).To(ContainSubstring(msg))
}

// TestReleaseSourceExamplesRewrite rewrites the fleets of the
// ReleaseSource examples (dry run) with a new version of each source, and
// of component-hashes a URL and hash of each asset: every marker resolves,
// none is invalid.
func TestReleaseSourceExamplesRewrite(t *testing.T) {
	source := func(ns, name string) update.PolicyKey {
		return update.PolicyKey{Namespace: ns, Name: name, Kind: update.SourceKind}
	}
	k8s := source("component-hashes", "kubernetes")
	assets := map[update.AssetKey]string{}
	for _, a := range []string{"kubeadm", "kubelet", "kubectl"} {
		assets[update.AssetKey{Source: k8s, Kind: update.KindAssetURL, Asset: a}] = "https://dl.k8s.io/release/v1.30.2/bin/linux/amd64/" + a
		assets[update.AssetKey{Source: k8s, Kind: update.KindAssetSHA256, Asset: a}] = "sha256:" + strings.Repeat("1", 64)
	}
	for dir, want := range map[string]int{"component-hashes": 7, "release-feed": 1, "helm-repository": 1} {
		t.Run(dir, func(t *testing.T) {
			g := NewWithT(t)
			res, err := update.RewriteMarkers(t.Context(), filepath.Join(dir, "fleet"), ".", update.Options{
				Policies: map[update.PolicyKey]update.Ref{
					k8s:                                    {Tag: "v1.30.2"},
					source("release-feed", "linkerd-edge"): {Tag: "edge-24.11.8"},
					source("helm-repository", "podinfo"):   {Tag: "6.7.1"},
				},
				Assets: assets,
				DryRun: true,
			})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(res.FileErrors).To(BeEmpty())
			g.Expect(res.Unresolved).To(BeEmpty())
			g.Expect(res.Changes).To(HaveLen(want))
		})
	}
}
