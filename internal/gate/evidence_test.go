package gate_test

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/uprev-dev/uprev/internal/gate"
)

func TestPromotedBy(t *testing.T) {
	g := NewWithT(t)
	g.Expect(gate.PromotedBy(gate.Gate{Name: "age", MinReleaseAge: time.Hour}, image, "1.5.1", "")).To(BeNil())

	prod := promotion(time.Hour, runs("eu-staging", 2*time.Hour, "1.5.1"), runs("us-staging", -1, "1.5.1"), runs("ap-staging", time.Hour, "1.5.0"))
	g.Expect(gate.PromotedBy(prod, image, "1.5.1", "")).To(Equal([]gate.Promoted{
		{Sync: "staging", Target: "eu-staging", HealthySince: now.Add(-2 * time.Hour)},
	}), "the unhealthy target and the one running another version are no evidence")
	g.Expect(gate.PromotedBy(prod, image, "1.5.1", "sha256:1.5.1")).To(HaveLen(1))
	g.Expect(gate.PromotedBy(prod, image, "1.5.1", "sha256:moved")).To(BeEmpty(), "a target that ran the tag at another digest did not run this one")
}
