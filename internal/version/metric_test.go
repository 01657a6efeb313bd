package version

import (
	"runtime"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestRegisterBuildInfo(t *testing.T) {
	r := prometheus.NewRegistry()
	for range 2 {
		if err := RegisterBuildInfo(r); err != nil {
			t.Fatalf("registering: %v", err)
		}
	}
	want := `# HELP uprev_build_info Always 1; its labels are the version of uprev that runs and the Go version it was built with.
# TYPE uprev_build_info gauge
uprev_build_info{goversion="` + runtime.Version() + `",version="` + Version() + `"} 1
`
	if err := testutil.GatherAndCompare(r, strings.NewReader(want), BuildInfoMetric); err != nil {
		t.Fatal(err)
	}
}
