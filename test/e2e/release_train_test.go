package e2e

import (
	"fmt"
	"strings"
	"testing"

	imagev1 "github.com/fluxcd/image-reflector-controller/api/v1"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"

	uprevv1 "github.com/uprev-dev/uprev/api/v1alpha1"
)

// TestReleaseTrainNeverGoesBackwards runs examples/release-train: weekly
// releases with release candidates in between are followed, candidates
// never selected; a version pinned higher by hand is not lowered; a
// release rolled back by git revert stays rolled back.
func TestReleaseTrainNeverGoesBackwards(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	const example = "release-train"
	s := newScenario(t, example)
	s.rename(example, s.ns)
	apps := s.ns + "-cp"
	s.rename("control-plane-system", apps)
	image := s.reg.Image("acme/control-plane")
	const manifest = "clusters/control-plane/control-plane.yaml"

	digests := map[string]string{}
	push := func(tags ...string) {
		for _, tag := range tags {
			digests[tag] = s.reg.PushImage(t, "acme/control-plane", tag)
		}
	}
	push("2.13.0", "2.14.0", "2.14.1", "2.15.0-rc.1", "2.15.0-rc.2", "latest", "edge-24.1.1")
	s.initRepo(s.exampleFleet(example))
	objs := s.exampleObjects(example)
	repo := object[*imagev1.ImageRepository](t, objs, "control-plane")
	pol := object[*imagev1.ImagePolicy](t, objs, "control-plane")
	auto := object[*uprevv1.UpdateAutomation](t, objs, "control-plane")
	sync := object[*uprevv1.Sync](t, objs, "control-plane")
	create(t, repo, pol)
	waitForTag(t, pol, "2.14.1")
	create(t, auto, sync)

	// The latest release, not a candidate, goes out.
	first := waitForPush(t, auto, "")
	g.Expect(s.subjects("main")).To(Equal([]string{"Update control-plane to 2.14.1", "Initial commit"}))
	waitApplied(t, sync, first, "local")
	waitForImage(t, apps, "control-plane", image+":2.14.1@"+digests["2.14.1"], k8s)

	// Someone pins a release candidate by hand to try it. The policy still
	// selects 2.14.1, which uprev refuses to write over the higher version.
	tryRC := s.git.CommitFile(t, fleetRepo, "main", manifest,
		strings.Replace(s.readFile("main", manifest), "2.14.1@"+digests["2.14.1"], "2.15.0-rc.2", 1), "Try 2.15.0-rc.2")
	refused := []uprevv1.RefusedDowngrade{{Policy: s.ns + "/control-plane", File: manifest, Current: "2.15.0-rc.2", Selected: "2.14.1"}}
	for range 2 {
		st := runAutomation(t, auto)
		g.Expect(st.RefusedDowngrades).To(Equal(refused))
		g.Expect(s.tip("main")).To(Equal(tryRC), "no downgrade")
	}
	g.Eventually(func(g Gomega) {
		g.Expect(eventNotes(g, s.ns, auto.Name)).To(ContainElement(fmt.Sprintf(
			"%s DowngradeRefused: %s: %s/control-plane stays at 2.15.0-rc.2; the policy selects the lower 2.14.1 (set spec.allowDowngrade to allow it)",
			corev1.EventTypeWarning, manifest, s.ns)))
	}).Should(Succeed())
	requestReconcile(t, sync)
	waitApplied(t, sync, tryRC, "local")
	waitForImage(t, apps, "control-plane", image+":2.15.0-rc.2", k8s)

	// The weekly release is out, with the next candidate: the release is
	// higher than the hand-pinned candidate, so it goes out.
	push("2.15.0", "2.16.0-rc.1")
	requestReconcile(t, repo)
	release := waitForPush(t, auto, first)
	g.Expect(s.message(release)).To(Equal(fmt.Sprintf("Update control-plane to 2.15.0\n\n%s: %s:2.15.0-rc.2 --> %s:2.15.0@%s\n\nUprev-Update: %s/control-plane 2.15.0-rc.2 --> 2.15.0",
		manifest, image, image, digests["2.15.0"], s.ns)))
	g.Eventually(func(g Gomega) {
		get(g, auto)
		g.Expect(auto.Status.RefusedDowngrades).To(BeEmpty())
	}).Should(Succeed())
	waitApplied(t, sync, release, "local")
	waitForImage(t, apps, "control-plane", image+":2.15.0@"+digests["2.15.0"], k8s)

	// 2.15.0 is bad: a person reverts uprev's commit, and the cluster goes
	// back to what ran before.
	revert := s.git.Revert(t, fleetRepo, "main", release)
	requestReconcile(t, sync)
	waitApplied(t, sync, revert, "local")
	waitForImage(t, apps, "control-plane", image+":2.15.0-rc.2", k8s)

	// It stays rolled back: more candidates and more runs change nothing.
	push("2.16.0-rc.2")
	requestReconcile(t, repo)
	waitForScan(t, repo, len(digests))
	g.Expect(waitForTag(t, pol, "2.15.0")).To(Equal(image + ":2.15.0@" + digests["2.15.0"]))
	for range 2 {
		st := runAutomation(t, auto)
		g.Expect(st.Holds).To(Equal([]uprevv1.Hold{{Policy: s.ns + "/control-plane", Version: "2.15.0", RevertedIn: revert}}))
		g.Expect(s.tip("main")).To(Equal(revert))
	}
	g.Expect(s.subjects("main")).To(Equal([]string{
		`Revert "Update control-plane to 2.15.0"`,
		"Update control-plane to 2.15.0",
		"Try 2.15.0-rc.2",
		"Update control-plane to 2.14.1",
		"Initial commit",
	}))
	requestReconcile(t, sync)
	waitApplied(t, sync, revert, "local")
	waitForImage(t, apps, "control-plane", image+":2.15.0-rc.2", k8s)
}
