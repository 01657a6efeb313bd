package update_test

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/uprev-dev/uprev/internal/update"
)

const agentLine = "image: ghcr.io/acme/agent:1.0.0 # {\"$imagepolicy\": \"flux-system:agent\"}\n"

// writeFiles creates the files under dir.
func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func TestRewriteMarkersRefusesPathsOutsideRoot(t *testing.T) {
	root := t.TempDir()
	outside := t.TempDir()
	writeFiles(t, outside, map[string]string{"a.yaml": agentLine})
	writeFiles(t, root, map[string]string{".git/hooks/a.yaml": agentLine})
	if err := os.Symlink(outside, filepath.Join(root, "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(".git/hooks", filepath.Join(root, "hooks")); err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{"../", "..", "a/../../b", outside, "link", "link/", ".git", ".git/hooks", "hooks"} {
		t.Run(dir, func(t *testing.T) {
			g := NewWithT(t)
			_, err := update.RewriteMarkers(context.Background(), root, dir, update.Options{Policies: testPolicies()})
			g.Expect(err).To(MatchError(update.ErrPathEscapesRoot))
			g.Expect(err.Error()).To(ContainSubstring(strings.TrimSuffix(dir, "/")), "the error names the path")
		})
	}
	g := NewWithT(t)
	g.Expect(readTree(t, outside)).To(Equal(map[string]string{"a.yaml": agentLine}))
	g.Expect(readTree(t, filepath.Join(root, ".git"))).To(Equal(map[string]string{"hooks/a.yaml": agentLine}))
}

func TestRewriteMarkersMissingPath(t *testing.T) {
	g := NewWithT(t)
	_, err := update.RewriteMarkers(context.Background(), t.TempDir(), "./clusters", update.Options{})
	g.Expect(err).To(MatchError(fs.ErrNotExist))
	g.Expect(err).NotTo(MatchError(update.ErrPathEscapesRoot))
}

func TestRewriteMarkersSubpath(t *testing.T) {
	g := NewWithT(t)
	root := t.TempDir()
	writeFiles(t, root, map[string]string{
		"clusters/prod/app.yaml":     agentLine,
		"clusters/.git/config.yaml":  agentLine,
		"clusters/prod/APP.YML":      agentLine,
		"clusters/prod/app.yaml.bak": agentLine,
		"other/app.yaml":             agentLine,
	})
	if err := os.Symlink("app.yaml", filepath.Join(root, "clusters/prod/linked.yaml")); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(root, "clusters/prod/app.yaml"), 0o600); err != nil {
		t.Fatal(err)
	}

	res, err := update.RewriteMarkers(context.Background(), root, "./clusters", update.Options{Policies: testPolicies()})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res.Files()).To(Equal([]string{"clusters/prod/APP.YML", "clusters/prod/app.yaml"}))

	changed := "image: ghcr.io/acme/agent:1.4.2 # {\"$imagepolicy\": \"flux-system:agent\"}\n"
	tree := readTree(t, root)
	g.Expect(tree["clusters/prod/app.yaml"]).To(Equal(changed))
	g.Expect(tree["clusters/prod/APP.YML"]).To(Equal(changed))
	g.Expect(tree["clusters/prod/app.yaml.bak"]).To(Equal(agentLine))
	g.Expect(tree["clusters/.git/config.yaml"]).To(Equal(agentLine))
	g.Expect(tree["other/app.yaml"]).To(Equal(agentLine))
	g.Expect(tree).To(HaveLen(6), "no temporary file is left behind")

	info, err := os.Stat(filepath.Join(root, "clusters/prod/app.yaml"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(info.Mode().Perm()).To(Equal(fs.FileMode(0o600)))
	link, err := os.Lstat(filepath.Join(root, "clusters/prod/linked.yaml"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(link.Mode() & fs.ModeSymlink).NotTo(BeZero())
}

// TestRewriteMarkersFollowsLinksInsidePath: a link with a YAML name is
// followed to its file when that file is under the update path (Flux
// follows any link); the file is rewritten once, under its own name, and
// nothing else is touched.
func TestRewriteMarkersFollowsLinksInsidePath(t *testing.T) {
	g := NewWithT(t)
	root := t.TempDir()
	outside := t.TempDir()
	writeFiles(t, root, map[string]string{
		"clusters/templates/agent.tpl": agentLine,
		"other/app.yaml":               agentLine,
	})
	writeFiles(t, outside, map[string]string{"app.yaml": agentLine})
	links := map[string]string{
		"clusters/prod/agent.yaml":    "../templates/agent.tpl",
		"clusters/prod/again.yml":     "agent.yaml",
		"clusters/prod/sibling.yaml":  "../../other/app.yaml",
		"clusters/prod/absolute.yaml": filepath.Join(outside, "app.yaml"),
		"clusters/prod/broken.yaml":   "missing.yaml",
		"clusters/prod/dir.yaml":      "../templates",
	}
	if err := os.MkdirAll(filepath.Join(root, "clusters/prod"), 0o755); err != nil {
		t.Fatal(err)
	}
	for link, target := range links {
		if err := os.Symlink(target, filepath.Join(root, link)); err != nil {
			t.Fatal(err)
		}
	}

	res, err := update.RewriteMarkers(context.Background(), root, "clusters", update.Options{Policies: testPolicies()})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res.FileErrors).To(BeEmpty())
	g.Expect(res.Changes).To(HaveLen(1), "two links to one file rewrite it once")
	g.Expect(res.Files()).To(Equal([]string{"clusters/templates/agent.tpl"}))

	changed := "image: ghcr.io/acme/agent:1.4.2 # {\"$imagepolicy\": \"flux-system:agent\"}\n"
	read := func(name string) string {
		data, err := os.ReadFile(filepath.Join(root, name))
		g.Expect(err).NotTo(HaveOccurred())
		return string(data)
	}
	g.Expect(read("clusters/templates/agent.tpl")).To(Equal(changed))
	g.Expect(read("other/app.yaml")).To(Equal(agentLine), "a link out of the update path is not followed")
	g.Expect(readTree(t, outside)).To(Equal(map[string]string{"app.yaml": agentLine}))
	for link, target := range links {
		got, err := os.Readlink(filepath.Join(root, link))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(got).To(Equal(target), "the link %s stays a link", link)
	}
}

func TestRewriteMarkersDryRun(t *testing.T) {
	g := NewWithT(t)
	root := t.TempDir()
	writeFiles(t, root, map[string]string{"app.yaml": agentLine})
	res, err := update.RewriteMarkers(context.Background(), root, "", update.Options{Policies: testPolicies(), DryRun: true})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res.Changes).To(HaveLen(1))
	g.Expect(readTree(t, root)).To(Equal(map[string]string{"app.yaml": agentLine}))
}

func TestRewriteMarkersCancelled(t *testing.T) {
	g := NewWithT(t)
	root := t.TempDir()
	writeFiles(t, root, map[string]string{"app.yaml": agentLine})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := update.RewriteMarkers(ctx, root, ".", update.Options{Policies: testPolicies()})
	g.Expect(err).To(MatchError(context.Canceled))
	g.Expect(readTree(t, root)).To(Equal(map[string]string{"app.yaml": agentLine}))
}

func TestRewriteMarkersReadsOnlyListedFiles(t *testing.T) {
	g := NewWithT(t)
	files := map[string]string{
		"a/x.yaml":   agentLine,
		"a-b/x.yaml": agentLine,
		"a.yaml":     agentLine,
		"b/c/d.yml":  agentLine,
		"notes.txt":  agentLine,
	}
	walked := t.TempDir()
	writeFiles(t, walked, files)
	all, err := update.RewriteMarkers(context.Background(), walked, ".", update.Options{Policies: testPolicies()})
	g.Expect(err).NotTo(HaveOccurred())

	listed := t.TempDir()
	writeFiles(t, listed, files)
	res, err := update.RewriteMarkers(context.Background(), listed, ".", update.Options{
		Policies: testPolicies(),
		Only:     []string{"notes.txt", "b/c/d.yml", "a/x.yaml", "a-b/x.yaml", "a.yaml"},
	})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res).To(Equal(all), "the same changes, in the walk's order, as reading every file")
	g.Expect(readTree(t, listed)).To(Equal(readTree(t, walked)))

	// A marked file the list leaves out is not read.
	some := t.TempDir()
	writeFiles(t, some, files)
	res, err = update.RewriteMarkers(context.Background(), some, ".", update.Options{Policies: testPolicies(), Only: []string{"b/c/d.yml"}})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res.Changes).To(HaveLen(1))
	g.Expect(res.Changes[0].File).To(Equal("b/c/d.yml"))
	g.Expect(readTree(t, some)["a.yaml"]).To(Equal(agentLine))

	// An empty list reads nothing; a listed file that is missing is a
	// file error, not a failed run.
	res, err = update.RewriteMarkers(context.Background(), some, ".", update.Options{Policies: testPolicies(), Only: []string{}})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res.Changes).To(BeEmpty())
	res, err = update.RewriteMarkers(context.Background(), some, ".", update.Options{Policies: testPolicies(), Only: []string{"gone.yaml"}})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res.FileErrors).To(HaveLen(1))
	g.Expect(res.FileErrors[0].File).To(Equal("gone.yaml"))
}
