package cli

import (
	"bytes"
	"context"
	"strings"
	"testing"

	iacv1 "github.com/fluxcd/image-automation-controller/api/v1"
	. "github.com/onsi/gomega"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	clocktesting "k8s.io/utils/clock/testing"

	uprevv1 "github.com/uprev-dev/uprev/api/v1alpha1"
	"github.com/uprev-dev/uprev/internal/testenv/syncbuf"
)

// TestGetWatch shows --watch: the table, then the row of each object that
// changes, until interrupted.
func TestGetWatch(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	createFleet(t, ns)
	ctx, cancel := context.WithCancel(t.Context())
	var stdout, stderr syncbuf.Buffer
	done := make(chan int)
	go func() {
		done <- Execute(ctx, []string{"get", "syncs", "-w", "-n", ns, kubeconfigFlag}, Options{
			IOStreams: genericiooptions.IOStreams{In: &bytes.Buffer{}, Out: &stdout, ErrOut: &stderr},
			Clock:     clocktesting.NewFakeClock(now),
		})
	}()
	g.Eventually(stdout.String).Should(MatchRegexp(`^NAME +READY .*\nprod +False .*\nstaging .*\n$`))

	staging := &uprevv1.Sync{}
	staging.Namespace, staging.Name = ns, "staging"
	get(t, staging)
	staging.Spec.Suspend = false
	g.Expect(k8s.Update(t.Context(), staging)).To(Succeed())
	g.Eventually(stdout.String).Should(MatchRegexp(`\nstaging +\S+ +False .*\n$`), "the changed Sync's row, now not suspended")
	g.Expect(strings.Count(stdout.String(), "\n")).To(Equal(4), "the table and the one changed row:\n%s", stdout.String())

	cancel()
	g.Eventually(done).Should(Receive(Equal(0)))
	g.Expect(stderr.String()).To(BeEmpty())
}

// TestGetWatchHolds shows --watch on holds, which come from both kinds: a
// hold the manager publishes on an ImageUpdateAutomation is printed as it
// appears.
func TestGetWatchHolds(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	createFleet(t, ns)
	ctx, cancel := context.WithCancel(t.Context())
	var stdout, stderr syncbuf.Buffer
	done := make(chan int)
	go func() {
		done <- Execute(ctx, []string{"get", "holds", "-w", "-n", ns, kubeconfigFlag}, Options{
			IOStreams: genericiooptions.IOStreams{In: &bytes.Buffer{}, Out: &stdout, ErrOut: &stderr},
			Clock:     clocktesting.NewFakeClock(now),
		})
	}()
	g.Eventually(stdout.String).Should(MatchRegexp(`^AUTOMATION .*\n(fleet .*\n){2}flux-system .*\n$`))

	flux := &iacv1.ImageUpdateAutomation{}
	flux.Namespace, flux.Name = ns, "flux-system"
	get(t, flux)
	flux.Annotations[uprevv1.HoldsAnnotation] = uprevv1.EncodeHolds([]uprevv1.Hold{
		{Policy: ns + "/web", Version: "3.0.0", RevertedIn: webRevert},
		{Policy: ns + "/kms", Version: "2.0.0", RevertedIn: agentRevert},
	})
	g.Expect(k8s.Update(t.Context(), flux)).To(Succeed())
	g.Eventually(stdout.String).Should(MatchRegexp(`\nflux-system +ImageUpdateAutomation +`+ns+`/kms +2\.0\.0 +9ab2c3d4e5 +False +\(reverted\)\nflux-system +ImageUpdateAutomation +`+ns+`/web .*\n$`),
		"the ImageUpdateAutomation's rows, now two")

	cancel()
	g.Eventually(done).Should(Receive(Equal(0)))
	g.Expect(stderr.String()).To(BeEmpty())
}
