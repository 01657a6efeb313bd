package update_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/uprev-dev/uprev/internal/update"
)

// benchManifest returns a Deployment of about 3 KB; marker, when not empty,
// is put on its image.
func benchManifest(i int, image, marker string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: app-%d\n  namespace: team-%d\n  labels:\n    app.kubernetes.io/name: app-%d\n    app.kubernetes.io/part-of: fleet\n", i, i%20, i)
	b.WriteString("spec:\n  replicas: 2\n  selector:\n    matchLabels:\n      app: app\n  template:\n    metadata:\n      labels:\n        app: app\n    spec:\n      containers:\n      - name: app\n")
	if marker != "" {
		fmt.Fprintf(&b, "        image: %s # {\"$imagepolicy\": \"%s\"}\n", image, marker)
	} else {
		fmt.Fprintf(&b, "        image: %s\n", image)
	}
	b.WriteString("        env:\n")
	for j := 0; b.Len() < 3000; j++ {
		fmt.Fprintf(&b, "        - name: SETTING_%d   # tuning knob %d\n          value: \"%d\"\n", j, j, j*7)
	}
	return b.String()
}

// BenchmarkRewrite5000Files rewrites a tree of 5,000 files of about 3 KB,
// 200 of them marked, in which 50 values change on every run (the moving
// policy has a new tag each run), as an automation's runs do: one scan
// cache for all of them.
func BenchmarkRewrite5000Files(b *testing.B) {
	root := b.TempDir()
	policies := map[update.PolicyKey]update.Ref{}
	for i := range 5000 {
		image, marker := "ghcr.io/acme/static:1.0.0", ""
		switch {
		case i%25 == 0 && i/25%4 == 0: // 50 files follow the moving policy
			image, marker = "ghcr.io/acme/moving:1.0.0", "bench:moving"
		case i%25 == 0: // 150 files are marked but already current
			name := fmt.Sprintf("stable-%d", i)
			image, marker = "ghcr.io/acme/"+name+":2.0.0", "bench:"+name
			policies[update.PolicyKey{Namespace: "bench", Name: name}] = update.Ref{Image: "ghcr.io/acme/" + name, Tag: "2.0.0"}
		}
		p := filepath.Join(root, "clusters", fmt.Sprintf("dir-%02d", i/100), fmt.Sprintf("app-%04d.yaml", i))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(benchManifest(i, image, marker)), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	moving := update.PolicyKey{Namespace: "bench", Name: "moving"}
	scans := update.NewScanCache(10000)
	run := 0
	for b.Loop() {
		run++
		policies[moving] = update.Ref{Image: "ghcr.io/acme/moving", Tag: fmt.Sprintf("1.0.%d", run)}
		res, err := update.RewriteMarkers(context.Background(), root, "clusters", update.Options{Policies: policies, Scans: scans})
		if err != nil {
			b.Fatal(err)
		}
		if len(res.Changes) != 50 || len(res.FileErrors) > 0 {
			b.Fatalf("%d changes, errors %v", len(res.Changes), res.Err())
		}
	}
}
