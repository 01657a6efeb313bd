package cli

import (
	"strings"
	"testing"

	"github.com/fluxcd/pkg/runtime/acl"
	"github.com/go-logr/logr/funcr"
	. "github.com/onsi/gomega"

	"github.com/uprev-dev/uprev/controllers"
)

// TestWarnWithoutLockdown shows that a manager started without Flux's
// lockdown flags says, once at start, that it is for one trusted team and
// which flags are missing; with both flags it says nothing.
func TestWarnWithoutLockdown(t *testing.T) {
	tests := []struct {
		name    string
		opts    controllers.Options
		missing []string
	}{
		{name: "no flags", missing: []string{"--default-service-account", "--no-cross-namespace-refs"}},
		{name: "service account only", opts: controllers.Options{DefaultServiceAccount: "default"}, missing: []string{"--no-cross-namespace-refs"}},
		{name: "cross-namespace refs only", opts: controllers.Options{ACL: acl.Options{NoCrossNamespaceRefs: true}}, missing: []string{"--default-service-account"}},
		{name: "locked down", opts: controllers.Options{DefaultServiceAccount: "default", ACL: acl.Options{NoCrossNamespaceRefs: true}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			var lines []string
			log := funcr.New(func(prefix, args string) { lines = append(lines, args) }, funcr.Options{})
			warnWithoutLockdown(log, tt.opts)
			if tt.missing == nil {
				g.Expect(lines).To(BeEmpty())
				return
			}
			g.Expect(lines).To(HaveLen(1))
			g.Expect(lines[0]).To(And(ContainSubstring("Warning"), ContainSubstring("one trusted team"),
				ContainSubstring(`"missing"=["`+strings.Join(tt.missing, `" "`)+`"]`)))
		})
	}
}
