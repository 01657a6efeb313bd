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

func TestAddReleases(t *testing.T) {
	agent := guard.Hold{Policy: "fleet/agent", Version: "1.4.2", RevertedIn: "9ab2c3d4e5"}
	web := guard.Hold{Policy: "fleet/web", Version: "2.0.0"}
	for _, tc := range []struct {
		name       string
		annotation string
		holds      []guard.Hold
		want       string
	}{
		{"none yet", "", []guard.Hold{agent}, "fleet/agent 1.4.2"},
		{"two", " ", []guard.Hold{agent, web}, "fleet/agent 1.4.2, fleet/web 2.0.0"},
		{"kept entries", "fleet/app 1.0.0", []guard.Hold{agent}, "fleet/app 1.0.0, fleet/agent 1.4.2"},
		{"released already", "fleet/agent   1.4.2", []guard.Hold{agent, agent}, "fleet/agent   1.4.2"},
		{"every hold released", "*", []guard.Hold{agent}, "*"},
		{"the same hold twice", "", []guard.Hold{web, web}, "fleet/web 2.0.0"},
		{"nothing to add", "fleet/app 1.0.0", nil, "fleet/app 1.0.0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			got := guard.AddReleases(tc.annotation, tc.holds...)
			g.Expect(got).To(Equal(tc.want))
			releases := guard.ParseReleases(got)
			for _, h := range tc.holds {
				g.Expect(releases.Released(h)).To(BeTrue(), "%v released", h)
			}
		})
	}
}
