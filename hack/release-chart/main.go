// Command release-chart packages charts/uprev for a release, as `helm
// package --version <semver> --app-version <version>` does, with Helm's own
// library: the chart's links into config/ are resolved into the archive.
// `make release` runs it; the release workflow pushes the same package.
//
//	go run ./hack/release-chart --version v1.2.3 --output dist
package main

import (
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"

	"github.com/Masterminds/semver/v3"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	chartutil "helm.sh/helm/v4/pkg/chart/v2/util"
)

func main() {
	version := flag.String("version", "", "The release version (required), such as v1.2.3: the chart's appVersion, and without its v the chart's version.")
	chart := flag.String("chart", "charts/uprev", "The chart's directory.")
	output := flag.String("output", "dist", "The directory to write uprev-<version>.tgz into.")
	flag.Parse()
	path, err := release(*chart, *version, *output)
	if err != nil {
		fmt.Fprintln(os.Stderr, "release-chart:", err)
		os.Exit(1)
	}
	fmt.Println(path)
}

// release packages the chart at dir as version into output and returns
// the archive's path.
func release(dir, version, output string) (string, error) {
	if version == "" {
		return "", fmt.Errorf("--version is required")
	}
	// Helm logs each link it follows into config/: by design here.
	slog.SetDefault(slog.New(slog.NewTextHandler(io.Discard, nil)))
	ch, err := loader.Load(dir)
	if err != nil {
		return "", fmt.Errorf("loading %s: %w", dir, err)
	}
	ch.Metadata.Version = chartVersion(version)
	ch.Metadata.AppVersion = version
	if err := ch.Validate(); err != nil {
		return "", fmt.Errorf("the chart at version %s: %w", version, err)
	}
	if err := os.MkdirAll(output, 0o755); err != nil {
		return "", err
	}
	return chartutil.Save(ch, output)
}

// chartVersion is the chart's version for a release version: v1.2.3 gives
// 1.2.3; what is no semantic version (`git describe` of a commit with no
// tag) gives the pre-release 0.0.0-<version>, which Helm accepts.
func chartVersion(version string) string {
	if v, err := semver.StrictNewVersion(strings.TrimPrefix(version, "v")); err == nil {
		return v.String()
	}
	return "0.0.0-" + strings.Map(func(r rune) rune {
		if r == '.' || r == '-' || ('0' <= r && r <= '9') || ('a' <= r && r <= 'z') || ('A' <= r && r <= 'Z') {
			return r
		}
		return '-'
	}, version)
}
