package cli

import (
	"testing"

	. "github.com/onsi/gomega"

	uprevv1 "github.com/uprev-dev/uprev/api/v1alpha1"
	"github.com/uprev-dev/uprev/internal/guard"
)

// TestReleaseHold shows that `uprev release-hold` adds the holds of the
// automation's status to its release annotation, one policy's or all,
// keeping the entries there, so that the controller's rules (guard)
// release them.
func TestReleaseHold(t *testing.T) {
	ns := newNamespace(t)
	holds := []uprevv1.Hold{
		{Policy: ns + "/agent", Version: "1.4.2", RevertedIn: agentRevert},
		{Policy: ns + "/app", Version: "2.1.0", RevertedIn: appRevert},
		{Policy: "images/kms", Version: "3.0.0", RevertedIn: pushCommit},
	}
	// newFleet creates an automation named name, holding holds, whose
	// annotation releases what annotation says.
	newFleet := func(t *testing.T, name, annotation string) *uprevv1.UpdateAutomation {
		auto := newAutomation(ns, name)
		if annotation != "" {
			auto.Annotations = map[string]string{uprevv1.HoldReleaseAnnotation: annotation}
		}
		auto.Status.Holds = holds
		createWithStatus(t, auto)
		return auto
	}

	t.Run("one policy", func(t *testing.T) {
		g := NewWithT(t)
		auto := newFleet(t, "one", "other/web 1.0.0")
		r := uprev(t, "release-hold", "one", "agent", "-n", ns, kubeconfigFlag)
		g.Expect(r).To(Equal(result{stdout: "updateautomation.uprev.dev/one released " + ns + "/agent 1.4.2\n"}))
		get(t, auto)
		annotation := auto.Annotations[uprevv1.HoldReleaseAnnotation]
		g.Expect(annotation).To(Equal("other/web 1.0.0, " + ns + "/agent 1.4.2"))
		releases := guard.ParseReleases(annotation)
		g.Expect(releases.Released(guardHold(holds[0]))).To(BeTrue())
		g.Expect(releases.Released(guardHold(holds[1]))).To(BeFalse())

		r = uprev(t, "get", "holds", "one", "-n", ns, kubeconfigFlag)
		g.Expect(r.stdout).To(MatchRegexp(`(?m)^one +UpdateAutomation +` + ns + `/agent +1.4.2 +9ab2c3d4e5 +True +\(reverted\)$`))
		g.Expect(r.stdout).To(MatchRegexp(`(?m)^one +UpdateAutomation +` + ns + `/app +2.1.0 +1234567890 +False +\(reverted\)$`))

		// Again: nothing to add, the same answer.
		r = uprev(t, "release-hold", "one", ns+"/agent", "-n", ns, kubeconfigFlag)
		g.Expect(r).To(Equal(result{stdout: "updateautomation.uprev.dev/one released " + ns + "/agent 1.4.2\n"}))
		get(t, auto)
		g.Expect(auto.Annotations[uprevv1.HoldReleaseAnnotation]).To(Equal(annotation))
	})

	t.Run("a policy of another namespace", func(t *testing.T) {
		g := NewWithT(t)
		auto := newFleet(t, "cross", "")
		r := uprev(t, "release-hold", "cross", "images/kms", "-n", ns, kubeconfigFlag)
		g.Expect(r).To(Equal(result{stdout: "updateautomation.uprev.dev/cross released images/kms 3.0.0\n"}))
		get(t, auto)
		g.Expect(auto.Annotations).To(HaveKeyWithValue(uprevv1.HoldReleaseAnnotation, "images/kms 3.0.0"))
	})

	t.Run("every hold", func(t *testing.T) {
		g := NewWithT(t)
		auto := newFleet(t, "all", ns+"/app 2.1.0")
		r := uprev(t, "release-hold", "all", "-n", ns, kubeconfigFlag)
		g.Expect(r).To(Equal(result{stdout: "updateautomation.uprev.dev/all released " + ns + "/agent 1.4.2\n" +
			"updateautomation.uprev.dev/all released " + ns + "/app 2.1.0\n" +
			"updateautomation.uprev.dev/all released images/kms 3.0.0\n"}))
		get(t, auto)
		g.Expect(auto.Annotations[uprevv1.HoldReleaseAnnotation]).To(Equal(ns+"/app 2.1.0, "+ns+"/agent 1.4.2, images/kms 3.0.0"),
			"the holds listed now, not `*`, which would release the holds of later reverts too")
	})

	t.Run("version", func(t *testing.T) {
		g := NewWithT(t)
		newFleet(t, "version", "")
		r := uprev(t, "release-hold", "version", "agent", "1.4.2", "-n", ns, kubeconfigFlag)
		g.Expect(r).To(Equal(result{stdout: "updateautomation.uprev.dev/version released " + ns + "/agent 1.4.2\n"}))
	})

	// Flux's ImageUpdateAutomation has no status field for holds: the
	// manager publishes them in an annotation, which release-hold reads as
	// it reads an UpdateAutomation's status; the same annotation releases
	// them.
	t.Run("Flux ImageUpdateAutomation", func(t *testing.T) {
		g := NewWithT(t)
		flux := newFluxAutomation(ns, "flux-system", holds[0], holds[1])
		flux.Annotations[uprevv1.HoldReleaseAnnotation] = ns + "/app 2.1.0"
		createWithStatus(t, flux)
		r := uprev(t, "release-hold", "flux-system", "agent", "-n", ns, kubeconfigFlag)
		g.Expect(r).To(Equal(result{stdout: "imageupdateautomation.image.toolkit.fluxcd.io/flux-system released " + ns + "/agent 1.4.2\n"}))
		get(t, flux)
		g.Expect(flux.Annotations).To(HaveKeyWithValue(uprevv1.HoldReleaseAnnotation, ns+"/app 2.1.0, "+ns+"/agent 1.4.2"))
		g.Expect(flux.Annotations).To(HaveKey(uprevv1.HoldsAnnotation), "the published holds stay until the next run")

		r = uprev(t, "get", "holds", "flux-system", "-n", ns, kubeconfigFlag)
		g.Expect(r.stdout).To(MatchRegexp(`(?m)^flux-system +ImageUpdateAutomation +` + ns + `/agent +1.4.2 +9ab2c3d4e5 +True +\(reverted\)$`))
		g.Expect(r.stdout).To(MatchRegexp(`(?m)^flux-system +ImageUpdateAutomation +` + ns + `/app +2.1.0 +1234567890 +True +\(reverted\)$`))

		r = uprev(t, "release-hold", "flux-system", "-n", ns, kubeconfigFlag)
		g.Expect(r).To(Equal(result{stdout: "imageupdateautomation.image.toolkit.fluxcd.io/flux-system released " + ns + "/agent 1.4.2\n" +
			"imageupdateautomation.image.toolkit.fluxcd.io/flux-system released " + ns + "/app 2.1.0\n"}))

		// A hold the annotation does not list (yet, or past its bound),
		// named with its version, is released all the same.
		r = uprev(t, "release-hold", "flux-system", "kms", "3.0.0", "-n", ns, kubeconfigFlag)
		g.Expect(r).To(Equal(result{stdout: "imageupdateautomation.image.toolkit.fluxcd.io/flux-system released " + ns + "/kms 3.0.0\n"}))
		get(t, flux)
		g.Expect(flux.Annotations).To(HaveKeyWithValue(uprevv1.HoldReleaseAnnotation, ns+"/app 2.1.0, "+ns+"/agent 1.4.2, "+ns+"/kms 3.0.0"))
		r = uprev(t, "release-hold", "flux-system", "kms", "-n", ns, kubeconfigFlag)
		g.Expect(r).To(Equal(result{code: 1, stderr: "uprev release-hold: ImageUpdateAutomation " + ns + "/flux-system holds nothing of policy " + ns + "/kms (it holds " + ns + "/agent 1.4.2, " + ns + "/app 2.1.0)\n"}))

		createWithStatus(t, newFluxAutomation(ns, "flux-empty"))
		r = uprev(t, "release-hold", "flux-empty", "-n", ns, kubeconfigFlag)
		g.Expect(r).To(Equal(result{code: 1, stderr: "uprev release-hold: ImageUpdateAutomation " + ns + "/flux-empty holds nothing\n"}))
	})

	t.Run("errors", func(t *testing.T) {
		newFleet(t, "errors", "")
		empty := newAutomation(ns, "empty")
		createWithStatus(t, empty)
		for _, tc := range []struct {
			args []string
			want string
		}{
			{[]string{"errors", "web"}, "uprev release-hold: UpdateAutomation " + ns + "/errors holds nothing of policy " + ns + "/web (it holds " + ns + "/agent 1.4.2, " + ns + "/app 2.1.0, images/kms 3.0.0)\n"},
			{[]string{"empty"}, "uprev release-hold: UpdateAutomation " + ns + "/empty holds nothing\n"},
			{[]string{"empty", "agent"}, "uprev release-hold: UpdateAutomation " + ns + "/empty holds nothing\n"},
			{[]string{"errors", "agent", "9.9.9"}, "uprev release-hold: UpdateAutomation " + ns + "/errors holds nothing of policy " + ns + "/agent 9.9.9 (it holds " + ns + "/agent 1.4.2, " + ns + "/app 2.1.0, images/kms 3.0.0)\n"},
			{[]string{"nope"}, `uprev release-hold: UpdateAutomation "nope" not found in namespace "` + ns + "\" (nor an ImageUpdateAutomation)\n"},
			{[]string{"a", "b", "c", "d"}, "uprev release-hold: accepts between 1 and 3 arg(s), received 4\n"},
		} {
			g := NewWithT(t)
			r := uprev(t, append(append([]string{"release-hold"}, tc.args...), "-n", ns, kubeconfigFlag)...)
			g.Expect(r).To(Equal(result{code: 1, stderr: tc.want}), "%v", tc.args)
		}
		get(t, empty)
		NewWithT(t).Expect(empty.Annotations).NotTo(HaveKey(uprevv1.HoldReleaseAnnotation))
	})
}
