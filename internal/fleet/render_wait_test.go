package fleet

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	uprevv1 "github.com/uprev-dev/uprev/api/v1alpha1"
)

func TestWaitText(t *testing.T) {
	now := time.Date(2026, 11, 26, 0, 0, 0, 0, time.UTC)
	in := metav1.NewTime(now.Add(52 * time.Hour))
	for _, c := range []struct {
		w    uprevv1.WaitingVersion
		want string
	}{
		{uprevv1.WaitingVersion{Tag: "1.5.1", Gate: "minReleaseAge", EligibleAt: &in}, "age, 2d 4h"},
		{uprevv1.WaitingVersion{Tag: "1.5.1", Gate: "verify", Reason: "unsigned"}, "refused: unsigned"},
		{uprevv1.WaitingVersion{Tag: "1.5.1", Gate: "verify", Reason: "identity mismatch"}, "refused: identity mismatch"},
	} {
		NewWithT(t).Expect(WaitText(c.w, now)).To(Equal(c.want))
	}
}
