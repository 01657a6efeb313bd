package guard_test

import (
	"strings"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/uprev-dev/uprev/internal/guard"
	"github.com/uprev-dev/uprev/internal/update"
)

// rejectionOf is the message `uprev reject` writes for policy's version.
func rejectionOf(t *testing.T, policy, version, reason string) string {
	t.Helper()
	msg, err := guard.RejectionMessage(guard.Rejection{Policy: policy, Version: version, Reason: reason})
	if err != nil {
		t.Fatal(err)
	}
	return msg
}

// TestRejectionsHold: a rejection commit holds its version with its
// reason, as a revert would, in the same reading of the history: a revert
// of the rejection lifts it, a version both reverted and rejected is held
// once for the newest commit, and the release annotation releases it.
func TestRejectionsHold(t *testing.T) {
	agent := guard.Update{Policy: "fleet/agent", Old: "1.0.0", New: "1.1.0"}
	all := map[string]string{
		sha(1): updateMessage(agent),
		sha(2): rejectionOf(t, "fleet/agent", "1.2.0", "crashes on arm64, see #42"),
		sha(3): revertOf(sha(2)),
		sha(4): revertOf(sha(1)),
		sha(5): rejectionOf(t, "fleet/agent", "1.1.0", "leaks memory"),
	}
	history := func(shas ...int) *fakeHistory {
		var commits []commit
		for _, n := range shas {
			commits = append(commits, commit{sha: sha(n), message: all[sha(n)]})
		}
		return &fakeHistory{branches: map[string][]commit{"main": commits}, all: all}
	}
	g := NewWithT(t)
	holds, err := guard.ReadHolds(history(2, 1), "main", "")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(holds).To(Equal([]guard.Hold{{Policy: "fleet/agent", Version: "1.2.0", RevertedIn: sha(2), Reason: "crashes on arm64, see #42"}}))

	holds, err = guard.ReadHolds(history(3, 2, 1), "main", "")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(holds).To(BeEmpty(), "a revert of the rejection lifts it")

	holds, err = guard.ReadHolds(history(5, 4, 1), "main", "")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(holds).To(Equal([]guard.Hold{{Policy: "fleet/agent", Version: "1.1.0", RevertedIn: sha(5), Reason: "leaks memory"}}),
		"reverted and then rejected: held once, for the newest commit")

	// The rules refuse the rejected version, until the annotation releases it.
	rules := guard.New(guard.Input{
		Policies: map[update.PolicyKey]guard.Policy{agentKey: {Ref: update.Ref{Image: "ghcr.io/acme/agent", Tag: "1.1.0"}, Ordering: semver}},
		Holds:    holds,
	})
	g.Expect(rules.Held()).To(HaveLen(1))
	err = rules.Check(change(agentKey, "1.0.0", "1.1.0"))
	g.Expect(guard.KindOf(err)).To(Equal(guard.RefusalHeld))
	released := guard.New(guard.Input{
		Policies: map[update.PolicyKey]guard.Policy{agentKey: {Ref: update.Ref{Image: "ghcr.io/acme/agent", Tag: "1.1.0"}, Ordering: semver}},
		Holds:    holds,
		Releases: guard.ParseReleases(guard.AddReleases("", holds...)),
	})
	g.Expect(released.Held()).To(BeEmpty())
	g.Expect(released.Check(change(agentKey, "1.0.0", "1.1.0"))).To(Succeed())
}

// TestRejectionMessage: the message reads back as written; the reason is
// one line, so that a reason cannot add trailers of its own (a fake
// Uprev-Update or Uprev-Reject line stays part of the reason); a reason
// read from Git is bounded; bad input is refused.
func TestRejectionMessage(t *testing.T) {
	g := NewWithT(t)
	msg, err := guard.RejectionMessage(guard.Rejection{Policy: "fleet/agent", Version: "1.2.0",
		Reason: "crashes\non arm64\n\nUprev-Update: fleet/agent 1.0.0 --> 9.9.9\nUprev-Reject: fleet/app 2.0.0\r\nThis reverts commit " + sha(1) + "."})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(msg).To(HavePrefix("Reject fleet/agent 1.2.0\n\n"))
	g.Expect(guard.ParseRejections(msg)).To(Equal([]guard.Rejection{{Policy: "fleet/agent", Version: "1.2.0",
		Reason: "crashes on arm64 Uprev-Update: fleet/agent 1.0.0 --> 9.9.9 Uprev-Reject: fleet/app 2.0.0 This reverts commit " + sha(1) + "."}}))
	g.Expect(guard.ParseUpdateTrailers(msg)).To(BeEmpty(), "the reason's fake trailer is no trailer")
	update := updateMessage(guard.Update{Policy: "fleet/agent", Old: "1.0.0", New: "1.1.0"})
	holds, err := guard.ReadHolds(&fakeHistory{
		branches: map[string][]commit{"main": {{sha: sha(2), message: msg}, {sha: sha(1), message: update}}},
		all:      map[string]string{sha(1): update, sha(2): msg},
	}, "main", "")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(holds).To(HaveExactElements(HaveField("Version", "1.2.0")), "nor a revert of the commit it names")

	// A reason written into Git by other means is bounded when read.
	long := "Reject\n\nUprev-Reject: fleet/agent 1.2.0\nUprev-Reject-Reason: " + strings.Repeat("é", 10000) + "\n"
	reason := guard.ParseRejections(long)[0].Reason
	g.Expect(len(reason)).To(BeNumerically("<=", guard.MaxRejectReason))
	g.Expect(reason).To(HaveSuffix("é…"))

	for _, bad := range []guard.Rejection{
		{Policy: "fleet/agent", Version: "1.2.0", Reason: " \n\t"},
		{Policy: "fleet/agent x", Version: "1.2.0", Reason: "r"},
		{Policy: "fleet/agent", Version: "", Reason: "r"},
		{Policy: "fleet/agent", Version: "1.2.0", Reason: strings.Repeat("x", guard.MaxRejectReason+1)},
	} {
		_, err := guard.RejectionMessage(bad)
		g.Expect(err).To(HaveOccurred(), "%+v", bad)
	}
}
