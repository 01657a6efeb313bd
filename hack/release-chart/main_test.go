package main

import (
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
)

// TestReleaseChart packages charts/uprev as make release does and loads
// the archive back: the release's versions, and config/'s files inside it
// rather than links to them.
func TestReleaseChart(t *testing.T) {
	g := NewWithT(t)
	for version, chartVersion := range map[string]string{"v1.2.3": "1.2.3", "1f8b521-dirty": "0.0.0-1f8b521-dirty"} {
		path, err := release(filepath.Join("..", "..", "charts", "uprev"), version, t.TempDir())
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(filepath.Base(path)).To(Equal("uprev-" + chartVersion + ".tgz"))
		ch, err := loader.Load(path)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(ch.Metadata.Version).To(Equal(chartVersion))
		g.Expect(ch.Metadata.AppVersion).To(Equal(version))
		var files []string
		for _, f := range ch.Files {
			files = append(files, f.Name)
		}
		g.Expect(files).To(ContainElements("files/crd/bases/uprev.dev_syncs.yaml", "files/rbac/role.yaml", "files/manager/manager.yaml"))
	}
	_, err := release(filepath.Join("..", "..", "charts", "uprev"), "", t.TempDir())
	g.Expect(err).To(MatchError(ContainSubstring("--version is required")))
}
