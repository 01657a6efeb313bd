package update_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/uprev-dev/uprev/internal/guard"
	"github.com/uprev-dev/uprev/internal/update"
)

var (
	kubernetesSource = update.PolicyKey{Namespace: "platform", Name: "kubernetes", Kind: update.SourceKind}
	podinfoChart     = update.PolicyKey{Namespace: "flux-system", Name: "podinfo", Kind: update.SourceKind}
)

// sourceOptions are the ReleaseSources of the sources golden case: the
// Kubernetes release with pinned assets, and a chart named like an
// ImagePolicy of the same namespace (they do not mix).
func sourceOptions() update.Options {
	policies := testPolicies()
	policies[kubernetesSource] = update.Ref{Tag: "v1.30.3"}
	policies[podinfoChart] = update.Ref{Tag: "6.5.4"}
	asset := func(kind update.MarkerKind, name string) update.AssetKey {
		return update.AssetKey{Source: kubernetesSource, Kind: kind, Asset: name}
	}
	return update.Options{
		DefaultNamespace: "flux-system",
		Policies:         policies,
		Assets: map[update.AssetKey]string{
			asset(update.KindAssetURL, "kubeadm"):    "https://dl.k8s.io/release/v1.30.3/bin/linux/amd64/kubeadm",
			asset(update.KindAssetSHA256, "kubeadm"): "sha256:" + strings.Repeat("a", 64),
			asset(update.KindAssetURL, "kubelet"):    "https://dl.k8s.io/release/v1.30.3/bin/linux/amd64/kubelet",
			asset(update.KindAssetSHA256, "kubelet"): "sha256:" + strings.Repeat("b", 64),
			asset(update.KindAssetURL, "crictl"):     "https://github.com/kubernetes-sigs/cri-tools/releases/download/v1.30.1/crictl.tar.gz",
			asset(update.KindAssetSHA256, "crictl"):  "sha256:" + strings.Repeat("c", 64),
		},
	}
}

// ReleaseSource markers are rewritten like image markers: the values
// only, byte for byte around them, quoting kept.
func TestRewriteSourceMarkersGolden(t *testing.T) {
	g := NewWithT(t)
	dir := copyTree(t, filepath.Join("testdata", "sources", "original"))
	res, err := update.RewriteMarkers(context.Background(), dir, ".", sourceOptions())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res.FileErrors).To(BeEmpty())
	g.Expect(res.Unresolved).To(BeEmpty())
	expectTree(g, readTree(t, dir), readTree(t, filepath.Join("testdata", "sources", "expected")))

	var lines []string
	for _, u := range res.Updates() {
		lines = append(lines, u.String())
	}
	g.Expect(lines).To(Equal([]string{
		"flux-system/podinfo 6.0.0 --> 6.5.4",
		"ReleaseSource/flux-system/podinfo 6.5.0 --> 6.5.4",
		"ReleaseSource/platform/kubernetes  --> v1.30.3",
		"ReleaseSource/platform/kubernetes v1.30.2 --> v1.30.3",
	}))
	// The trailers read back to the keys written.
	for _, u := range res.Updates() {
		g.Expect(update.ParsePolicyKey(u.Policy.String())).To(Equal(u.Policy))
	}
}

// A source's values move together: the guard refusing the version (a
// downgrade) refuses its assets in the same document too.
func TestRewriteSourceMarkersRefusedTogether(t *testing.T) {
	g := NewWithT(t)
	dir := copyTree(t, filepath.Join("testdata", "sources", "original"))
	opts := sourceOptions()
	opts.Policies[kubernetesSource] = update.Ref{Tag: "v1.29.9"}
	opts.Guard = refuseDowngrades
	res, err := update.RewriteMarkers(context.Background(), dir, ".", opts)
	g.Expect(err).NotTo(HaveOccurred())
	var refused []string
	for _, r := range res.Refused {
		if r.Change.File == "components.yaml" {
			refused = append(refused, r.Change.NewValue)
		}
	}
	g.Expect(refused).To(HaveLen(5))
	components := readTree(t, dir)["components.yaml"]
	g.Expect(components).To(ContainSubstring("v1.30.2/bin/linux/amd64/kubeadm"))
	g.Expect(components).To(ContainSubstring("sha256:1111"))
}

func TestParseSourceMarker(t *testing.T) {
	for comment, want := range map[string]update.Marker{
		`# {"$uprev": "platform:kubernetes"}`:                {Policy: kubernetesSource, Kind: update.KindVersion},
		`# {"$uprev": "kubernetes"}`:                         {Policy: kubernetesSource, Kind: update.KindVersion},
		`# {"$uprev": "platform:kubernetes:url:kubeadm"}`:    {Policy: kubernetesSource, Kind: update.KindAssetURL, Asset: "kubeadm"},
		`# {"$uprev": "platform:kubernetes:sha256:cni.tgz"}`: {Policy: kubernetesSource, Kind: update.KindAssetSHA256, Asset: "cni.tgz"},
	} {
		got, err := update.ParseMarker(comment, "platform")
		if err != nil || got != want {
			t.Errorf("ParseMarker(%s) = %+v, %v; want %+v", comment, got, err, want)
		}
		if err == nil && !strings.Contains(comment, got.String()) && got.Policy.Name != "kubernetes" {
			t.Errorf("String() = %q", got.String())
		}
	}
	for _, bad := range []string{
		`# {"$uprev": "platform:kubernetes:tag"}`,
		`# {"$uprev": "platform:kubernetes:digest:kubeadm"}`,
		`# {"$uprev": "platform:kubernetes:url:../x"}`,
		`# {"$uprev": "platform:kubernetes:url:"}`,
		`# {"$uprev": "a:b:c:d:e"}`,
		`# {"$uprev": "platform:kubernetes", "$imagepolicy": "platform:app"}`,
		`# {"$uprev": 3}`,
	} {
		if _, err := update.ParseMarker(bad, "platform"); !errors.Is(err, update.ErrInvalidMarker) {
			t.Errorf("ParseMarker(%s) = %v; want ErrInvalidMarker", bad, err)
		}
	}
}

// A hold read from a trailer of a source's update holds that source, and
// not an ImagePolicy of the same name.
func TestParsePolicyKeyOfSources(t *testing.T) {
	g := NewWithT(t)
	g.Expect(update.ParsePolicyKey("ReleaseSource/platform/kubernetes")).To(Equal(kubernetesSource))
	g.Expect(update.ParsePolicyKey("platform/kubernetes")).To(Equal(update.PolicyKey{Namespace: "platform", Name: "kubernetes"}))
	g.Expect(guard.ParseUpdateTrailers("Uprev-Update: ReleaseSource/platform/kubernetes v1.30.2 --> v1.30.3\n")).To(Equal(
		[]guard.Update{{Policy: "ReleaseSource/platform/kubernetes", Old: "v1.30.2", New: "v1.30.3"}}))
}
