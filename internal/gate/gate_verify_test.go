package gate_test

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/uprev-dev/uprev/internal/gate"
	"github.com/uprev-dev/uprev/internal/registry"
)

func TestSelectSkipsRefusedVersions(t *testing.T) {
	g := NewWithT(t)
	recheck := now.Add(10 * time.Minute)
	refused := gate.Hold{Gate: "signed", Kind: gate.Verify, EligibleAt: recheck, Reason: "unsigned"}
	tags := []registry.SeenTag{seen("1.0.0", time.Hour), seen("1.1.0", time.Hour), seen("1.2.0", time.Hour)}
	gates := []gate.Gate{{Name: "signed", Refused: map[string]gate.Hold{"1.2.0": refused}}}

	sel, err := gate.Select(semver(">=1.0.0"), nil, "ghcr.io/acme/agent", tags, gates, now)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(sel.Tag).To(Equal("1.1.0"))
	g.Expect(sel.Waiting).To(Equal([]gate.Waiting{{Tag: "1.2.0", Holds: []gate.Hold{refused}}}))
	g.Expect(sel.NextEligibleAt).To(Equal(recheck), "the selection is made again when the refusal is due for a recheck")

	// Every version refused: nothing selected, all listed.
	gates[0].Refused["1.1.0"] = refused
	gates[0].Refused["1.0.0"] = refused
	sel, err = gate.Select(semver(">=1.0.0"), nil, "ghcr.io/acme/agent", tags, gates, now)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(sel.Tag).To(BeEmpty())
	g.Expect(sel.Waiting).To(HaveLen(3))
}
