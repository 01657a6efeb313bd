package guard_test

import (
	"testing"

	. "github.com/onsi/gomega"

	"github.com/uprev-dev/uprev/internal/guard"
)

func TestReleases(t *testing.T) {
	agent := guard.Hold{Policy: "fleet/agent", Version: "1.4.2"}
	web := guard.Hold{Policy: "fleet/web", Version: "2.0.0"}
	for _, tc := range []struct {
		name       string
		annotation string
		hold       guard.Hold
		want       bool
	}{
		{"no annotation", "", agent, false},
		{"the hold", "fleet/agent 1.4.2", agent, true},
		{"another policy", "fleet/agent 1.4.2", web, false},
		{"one of several, spaced freely", " fleet/web   2.0.0 , fleet/agent 1.4.1", web, true},
		{"another version of the policy", "fleet/agent 1.4.1", agent, false},
		{"every hold", "*", agent, true},
		{"every hold among entries", "fleet/web 2.0.0, *", agent, true},
		{"a policy without version", "fleet/agent", agent, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			NewWithT(t).Expect(guard.ParseReleases(tc.annotation).Released(tc.hold)).To(Equal(tc.want))
		})
	}
}
