package v1alpha1

import (
	"fmt"
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
}
