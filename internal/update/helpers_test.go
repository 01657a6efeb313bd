package update_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/uprev-dev/uprev/internal/update"
)

const (
	podinfoDigest = "sha256:6b4d9dd259b78175c0d35d0b01b9b19f96ace96c9b27e3ea599b97cc8fc04e86"
	chartDigest   = "sha256:5a694555f98a5c3754040e3277ee6651eaaaaca9f709ad5a0267bd33153b0a77"
)

// testPolicies are the policies the golden cases are rewritten with.
func testPolicies() map[update.PolicyKey]update.Ref {
	return map[update.PolicyKey]update.Ref{
		{Namespace: "flux-system", Name: "podinfo"}: {Image: "ghcr.io/stefanprodan/podinfo", Tag: "6.5.4", Digest: podinfoDigest},
		{Namespace: "flux-system", Name: "agent"}:   {Image: "ghcr.io/acme/agent", Tag: "1.4.2"},
		{Namespace: "flux-system", Name: "chart"}:   {Image: "ghcr.io/acme/charts/agent", Tag: "2.3.1", Digest: chartDigest},
		{Namespace: "apps", Name: "web"}:            {Image: "registry.example.com:5000/apps/web", Tag: "v2.0.0"},
	}
}

// refuseDowngrades is a Guard refusing a change whose document held a
// higher tag than the one written, comparing dotted numbers.
func refuseDowngrades(c update.Change) error {
	if c.Old.Tag != "" && c.New.Tag != "" && compareVersions(c.New.Tag, c.Old.Tag) < 0 {
		return errors.New("downgrade from " + c.Old.Tag + " to " + c.New.Tag)
	}
	return nil
}

// compareVersions compares v-prefixed dotted numeric versions.
func compareVersions(a, b string) int {
	as := strings.Split(strings.TrimPrefix(a, "v"), ".")
	bs := strings.Split(strings.TrimPrefix(b, "v"), ".")
	for i := 0; i < len(as) && i < len(bs); i++ {
		x, _ := strconv.Atoi(as[i])
		y, _ := strconv.Atoi(bs[i])
		if x != y {
			return x - y
		}
	}
	return len(as) - len(bs)
}

// copyTree copies the directory src into a new temporary directory and
// returns it.
func copyTree(t testing.TB, src string) string {
	t.Helper()
	dst := t.TempDir()
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), data, 0o644)
	})
	if err != nil {
		t.Fatalf("copying %s: %v", src, err)
	}
	return dst
}

// readTree returns every file under dir by slash-separated relative path.
func readTree(t testing.TB, dir string) map[string]string {
	t.Helper()
	files := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		files[filepath.ToSlash(rel)] = string(data)
		return err
	})
	if err != nil {
		t.Fatalf("reading %s: %v", dir, err)
	}
	return files
}

// expectTree fails unless the directories got and want hold the same files
// with the same content.
func expectTree(g *WithT, got, want map[string]string) {
	keys := func(m map[string]string) []string {
		var ks []string
		for k := range m {
			ks = append(ks, k)
		}
		return ks
	}
	g.Expect(keys(got)).To(ConsistOf(keys(want)))
	for name, content := range want {
		g.Expect(got[name]).To(Equal(content), "file %s", name)
	}
}
