package version

import (
	"errors"
	"fmt"
	"runtime"

	"github.com/prometheus/client_golang/prometheus"
)

// BuildInfoMetric is the name of the gauge RegisterBuildInfo registers.
const BuildInfoMetric = "uprev_build_info"

// RegisterBuildInfo registers on r the gauge uprev_build_info: 1, labelled
// with this binary's version and Go version, as Prometheus' own
// *_build_info metrics are. Registering it twice is no error.
func RegisterBuildInfo(r prometheus.Registerer) error {
	info := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: BuildInfoMetric,
		Help: "Always 1; its labels are the version of uprev that runs and the Go version it was built with.",
	}, []string{"version", "goversion"})
	info.WithLabelValues(Version(), runtime.Version()).Set(1)
	if err := r.Register(info); err != nil {
		var already prometheus.AlreadyRegisteredError
		if errors.As(err, &already) {
			return nil
		}
		return fmt.Errorf("registering %s: %w", BuildInfoMetric, err)
	}
	return nil
}
