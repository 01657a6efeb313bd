package update_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/uprev-dev/uprev/internal/update"
)

// changeLines returns "file:line" of each change, for compact expectations.
func changeLines(changes []update.Change) []string {
	var lines []string
	for _, c := range changes {
		lines = append(lines, fmt.Sprintf("%s:%d", c.File, c.Line))
	}
	return lines
}

func TestRewriteMarkersGolden(t *testing.T) {
	cases := []struct {
		name  string
		opts  update.Options
		check func(g *WithT, res update.Result)
	}{
		{
			name: "image",
			opts: update.Options{DefaultNamespace: "flux-system"},
			check: func(g *WithT, res update.Result) {
				g.Expect(res.Changes).To(HaveLen(9))
				g.Expect(res.FileErrors).To(BeEmpty())
				g.Expect(res.Refused).To(BeEmpty())
				g.Expect(res.Unresolved).To(ConsistOf(HaveField("Marker.Policy.Name", "other")))
				first := res.Changes[0]
				g.Expect(first).To(Equal(update.Change{
					File: "deployment.yaml", Line: 21,
					Object:   update.Object{APIVersion: "apps/v1", Kind: "Deployment", Name: "podinfo"},
					Policy:   update.PolicyKey{Namespace: "flux-system", Name: "podinfo"},
					Kind:     update.KindImage,
					OldValue: "ghcr.io/stefanprodan/podinfo:6.0.0",
					NewValue: "ghcr.io/stefanprodan/podinfo:6.5.4@" + podinfoDigest,
					Old:      update.Ref{Image: "ghcr.io/stefanprodan/podinfo", Tag: "6.0.0"},
					New:      update.Ref{Image: "ghcr.io/stefanprodan/podinfo", Tag: "6.5.4", Digest: podinfoDigest},
					Latest:   update.Ref{Image: "ghcr.io/stefanprodan/podinfo", Tag: "6.5.4", Digest: podinfoDigest},
				}))
				g.Expect(res.Files()).To(Equal([]string{"deployment.yaml", "nested/list.yml"}))
			},
		},
		{
			name: "parts",
			opts: update.Options{DefaultNamespace: "flux-system"},
			check: func(g *WithT, res update.Result) {
				g.Expect(res.FileErrors).To(BeEmpty())
				g.Expect(changeLines(res.Changes)).To(Equal([]string{
					"helmrelease.yaml:9", "helmrelease.yaml:14", "helmrelease.yaml:15",
					"ocirepository.yaml:8",
					"values.yaml:3", "values.yaml:5", "values.yaml:9",
				}))
				g.Expect(res.Unresolved).To(ConsistOf(And(
					HaveField("File", "values.yaml"), HaveField("Line", 10),
					HaveField("Reason", "policy flux-system/agent reports no digest"))))
				// The digest change knows the tag from its document.
				digest := res.Changes[2]
				g.Expect(digest.Kind).To(Equal(update.KindDigest))
				g.Expect(digest.Old.Tag).To(Equal("6.4.0"))
				g.Expect(digest.New).To(Equal(update.Ref{Image: "ghcr.io/stefanprodan/podinfo", Tag: "6.5.4", Digest: podinfoDigest}))
			},
		},
		{
			name: "kustomization",
			opts: update.Options{DefaultNamespace: "flux-system"},
			check: func(g *WithT, res update.Result) {
				g.Expect(res.FileErrors).To(BeEmpty())
				g.Expect(res.Changes).To(HaveLen(6))
				g.Expect(res.Files()).To(Equal([]string{"base/kustomization.yaml", "overlays/Kustomization"}))
			},
		},
		{
			name: "multidoc",
			opts: update.Options{DefaultNamespace: "flux-system"},
			check: func(g *WithT, res update.Result) {
				g.Expect(res.FileErrors).To(BeEmpty())
				g.Expect(changeLines(res.Changes)).To(Equal([]string{"all.yaml:7", "all.yaml:20", "all.yaml:28"}))
			},
		},
		{
			name: "broken",
			opts: update.Options{DefaultNamespace: "flux-system"},
			check: func(g *WithT, res update.Result) {
				g.Expect(res.Changes).To(ConsistOf(HaveField("File", "good.yaml")))
				g.Expect(res.FileErrors).To(ConsistOf(HaveField("File", "broken.yaml")))
				g.Expect(res.Err()).To(MatchError(ContainSubstring("broken.yaml: parsing YAML")))
			},
		},
		{
			name: "nomarker",
			opts: update.Options{DefaultNamespace: "flux-system"},
			check: func(g *WithT, res update.Result) {
				g.Expect(res).To(Equal(update.Result{}))
			},
		},
		{
			name: "downgrade",
			opts: update.Options{DefaultNamespace: "flux-system", Guard: refuseDowngrades},
			check: func(g *WithT, res update.Result) {
				g.Expect(changeLines(res.Changes)).To(Equal([]string{"deployment.yaml:8"}))
				g.Expect(res.Refused).To(HaveLen(3))
				g.Expect(res.Refused[0].Reason).To(MatchError("downgrade from 1.5.0 to 1.4.2"))
				g.Expect(res.Refused[1].Reason).To(MatchError("downgrade from 7.0.0 to 6.5.4"))
				g.Expect(res.Refused[2].Change.Kind).To(Equal(update.KindDigest))
			},
		},
		{
			name: "invalid",
			opts: update.Options{}, // without default namespace, "agent" is invalid
			check: func(g *WithT, res update.Result) {
				g.Expect(res.Changes).To(BeEmpty())
				g.Expect(res.FileErrors).To(HaveLen(5))
				for _, e := range res.FileErrors {
					g.Expect(e.Line).To(Equal(2), e.Error())
					g.Expect(e).To(MatchError(update.ErrInvalidMarker))
				}
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			dir := copyTree(t, filepath.Join("testdata", tc.name, "original"))
			opts := tc.opts
			opts.Policies = testPolicies()
			res, err := update.RewriteMarkers(context.Background(), dir, ".", opts)
			g.Expect(err).NotTo(HaveOccurred())
			expectTree(g, readTree(t, dir), readTree(t, filepath.Join("testdata", tc.name, "expected")))
			tc.check(g, res)
		})
	}
}
