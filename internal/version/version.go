// Package version says which uprev this is: the version that `make release`
// stamps into the binary, or else what the Go toolchain recorded.
package version

import "runtime/debug"

// stamped is set at build time, as `make release` does:
//
//	go build -ldflags "-X github.com/uprev-dev/uprev/internal/version.stamped=v1.2.3"
var stamped string

// Version returns the version stamped at build time; without one, the
// module version the Go toolchain recorded (set by `go install
// …@v1.2.3`, or derived from the Git checkout), or "(devel)".
func Version() string {
	if stamped != "" {
		return stamped
	}
	if info, ok := debug.ReadBuildInfo(); ok && info.Main.Version != "" {
		return info.Main.Version
	}
	return "(devel)"
}
