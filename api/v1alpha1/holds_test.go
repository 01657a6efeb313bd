package v1alpha1

import (
	"fmt"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
)

func TestHoldsAnnotationRoundTrip(t *testing.T) {
	g := NewWithT(t)
	g.Expect(EncodeHolds(nil)).To(BeEmpty())
	p, err := DecodeHolds("")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(p).To(Equal(PublishedHolds{}))

	holds := []Hold{
		{Policy: "fleet/web", Version: "2.1.0", RevertedIn: "bbb"},
		{Policy: "fleet/agent", Version: "1.1.0", RevertedIn: "aaa"},
	}
	value := EncodeHolds(holds)
	g.Expect(value).To(Equal(`{"holds":[{"policy":"fleet/agent","version":"1.1.0","revertedIn":"aaa"},{"policy":"fleet/web","version":"2.1.0","revertedIn":"bbb"}]}`))
	g.Expect(holds[0].Policy).To(Equal("fleet/web"), "the caller's slice is left as it was")
	p, err = DecodeHolds(value)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(p).To(Equal(PublishedHolds{Holds: []Hold{holds[1], holds[0]}}))

	// Refused downgrades go in the same value, sorted; with no hold, only
	// they are written.
	refused := []RefusedDowngrade{
		{Policy: "fleet/web", File: "apps/web.yaml", Current: "3.0.0", Selected: "2.9.0"},
		{Policy: "fleet/agent", File: "apps/agent.yaml", Current: "2.0.0", Selected: "1.5.0"},
	}
	value = EncodeHolds(holds, refused...)
	p, err = DecodeHolds(value)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(p).To(Equal(PublishedHolds{Holds: []Hold{holds[1], holds[0]}, RefusedDowngrades: []RefusedDowngrade{refused[1], refused[0]}}))
	g.Expect(refused[0].Policy).To(Equal("fleet/web"), "the caller's slice is left as it was")
	value = EncodeHolds(nil, refused[1])
	g.Expect(value).To(Equal(`{"refusedDowngrades":[{"policy":"fleet/agent","file":"apps/agent.yaml","current":"2.0.0","selected":"1.5.0"}]}`))
	p, err = DecodeHolds(value)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(p).To(Equal(PublishedHolds{RefusedDowngrades: refused[1:]}))

	// A value written before refused downgrades were published reads as
	// before.
	p, err = DecodeHolds(`{"holds":[{"policy":"fleet/agent","version":"1.1.0","revertedIn":"aaa"}],"omitted":2}`)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(p).To(Equal(PublishedHolds{Holds: holds[1:], Omitted: 2}))

	_, err = DecodeHolds("{not json")
	g.Expect(err).To(MatchError(ContainSubstring("reading annotation " + HoldsAnnotation)))
}

func TestHoldsAnnotationIsBounded(t *testing.T) {
	g := NewWithT(t)
	var holds []Hold
	for i := range MaxPublishedHolds + 7 {
		holds = append(holds, Hold{Policy: fmt.Sprintf("fleet/p%03d", i), Version: "1.0.0", RevertedIn: "abc"})
	}
	p, err := DecodeHolds(EncodeHolds(holds))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(p.Holds).To(Equal(holds[:MaxPublishedHolds]))
	g.Expect(p.Omitted).To(Equal(7))

	var refused []RefusedDowngrade
	for i := range MaxPublishedHolds + 3 {
		refused = append(refused, RefusedDowngrade{Policy: fmt.Sprintf("fleet/p%03d", i), File: "apps/p.yaml", Current: "2.0.0", Selected: "1.0.0"})
	}
	p, err = DecodeHolds(EncodeHolds(holds[:1], refused...))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(p).To(Equal(PublishedHolds{Holds: holds[:1], RefusedDowngrades: refused[:MaxPublishedHolds], RefusedOmitted: 3}))

	// Long file paths and versions cannot make it larger than its bound:
	// refused downgrades go first, then holds, and are counted.
	long := strings.Repeat("x", 2<<10)
	for i := range refused {
		refused[i].File = "apps/" + long + ".yaml"
	}
	for i := range holds {
		holds[i].Version = long
	}
	value := EncodeHolds(holds, refused...)
	g.Expect(len(value)).To(BeNumerically("<=", MaxHoldsAnnotationBytes))
	p, err = DecodeHolds(value)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(p.RefusedDowngrades).To(BeEmpty())
	g.Expect(p.RefusedOmitted).To(Equal(len(refused)))
	g.Expect(p.Holds).NotTo(BeEmpty())
	g.Expect(len(p.Holds) + p.Omitted).To(Equal(len(holds)))
}
