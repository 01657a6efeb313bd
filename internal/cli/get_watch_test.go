package cli

import (
	"bytes"
	"context"
	"strings"
	"testing"

	imagev1 "github.com/fluxcd/image-reflector-controller/api/v1"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	clocktesting "k8s.io/utils/clock/testing"

	uprevv1 "github.com/uprev-dev/uprev/api/v1alpha1"
	"github.com/uprev-dev/uprev/internal/testenv/syncbuf"
)

// watchGet runs `uprev get ... -w` until the test cancels it; it returns
// what it prints and, once cancelled, its exit code.
func watchGet(t *testing.T, ctx context.Context, args ...string) (stdout, stderr *syncbuf.Buffer, done chan int) {
	t.Helper()
	stdout, stderr, done = &syncbuf.Buffer{}, &syncbuf.Buffer{}, make(chan int)
	go func() {
		done <- Execute(ctx, append(args, "-w", kubeconfigFlag), Options{
			IOStreams: genericiooptions.IOStreams{In: &bytes.Buffer{}, Out: stdout, ErrOut: stderr},
			Clock:     clocktesting.NewFakeClock(now),
		})
	}()
	return stdout, stderr, done
}

// TestWatchRowsAlignAndDoNotRepeat shows that the rows --watch prints line
// up with the table's columns, as kubectl's do, and that a change that
// leaves an object's row as it was printed (here an annotation) prints
// nothing.
func TestWatchRowsAlignAndDoNotRepeat(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	createFleet(t, ns)
	ctx, cancel := context.WithCancel(t.Context())
	stdout, stderr, done := watchGet(t, ctx, "get", "syncs", "-n", ns)
	g.Eventually(stdout.String).Should(MatchRegexp(`^NAME +READY .*\nprod +False .*\nstaging .*\n$`))

	prod := &uprevv1.Sync{}
	prod.Namespace, prod.Name = ns, "prod"
	get(t, prod)
	metav1.SetMetaDataAnnotation(&prod.ObjectMeta, "example.com/note", "nothing shown changes")
	g.Expect(k8s.Update(t.Context(), prod)).To(Succeed())
	staging := &uprevv1.Sync{}
	staging.Namespace, staging.Name = ns, "staging"
	get(t, staging)
	staging.Spec.Suspend = false
	g.Expect(k8s.Update(t.Context(), staging)).To(Succeed())

	// The events come in order: once staging's row is printed, prod's
	// annotation was seen and left out.
	g.Eventually(stdout.String).Should(MatchRegexp(`\nstaging +\S+ +False .*\n$`), "the changed Sync's row, now not suspended")
	lines := strings.Split(strings.TrimSuffix(stdout.String(), "\n"), "\n")
	g.Expect(lines).To(HaveLen(4), "the table and the one changed row:\n%s", stdout.String())
	header, row := lines[0], lines[3]
	for _, column := range []string{"READY", "SUSPENDED", "APPLIED", "AGE"} {
		at := strings.Index(header, column)
		g.Expect(row[at-3:at]).To(Equal("   "), "column %s starts at %d in:\n%s", column, at, stdout.String())
		g.Expect(row[at:at+1]).NotTo(Equal(" "), "column %s starts at %d in:\n%s", column, at, stdout.String())
	}
	g.Expect(row).To(Equal("staging   Unknown   False                              -                                          3d"))

	cancel()
	g.Eventually(done).Should(Receive(Equal(0)))
	g.Expect(stderr.String()).To(BeEmpty())
}

// TestWatchFromEmpty shows --watch where nothing is listed at first: the
// first row that comes has the header above it.
func TestWatchFromEmpty(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	ctx, cancel := context.WithCancel(t.Context())
	stdout, stderr, done := watchGet(t, ctx, "get", "repositories", "-n", ns)
	g.Eventually(stderr.String).Should(Equal("No repositories found in namespace " + ns + ".\n"))

	createRepositoriesAndTargets(t, ns)
	g.Eventually(stdout.String).Should(MatchRegexp(`^NAME +IMAGE +TAGS +LAST SCAN +READY +STATUS +AGE\n(agent|kms) .*\n`))
	g.Eventually(stdout.String).Should(MatchRegexp(`\nkms +registry.example.com/kms .*\n`))
	g.Expect(strings.Count(stdout.String(), "NAME")).To(Equal(1), "one header:\n%s", stdout.String())

	cancel()
	g.Eventually(done).Should(Receive(Equal(0)))
}

// TestWatchCustomColumns shows --watch with -o custom-columns: the lines of
// changed objects line up with the first ones, and a change that leaves
// the columns as they were prints nothing.
func TestWatchCustomColumns(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	createFleet(t, ns)
	ctx, cancel := context.WithCancel(t.Context())
	stdout, stderr, done := watchGet(t, ctx, "get", "policies", "-n", ns, "-o", "custom-columns=NAME:.metadata.name,TAG:.status.latestRef.tag")
	g.Eventually(stdout.String).Should(Equal(table("NAME    TAG", "agent   1.4.2", "kms     <none>")))

	agent := &imagev1.ImagePolicy{}
	agent.Namespace, agent.Name = ns, "agent"
	get(t, agent)
	metav1.SetMetaDataAnnotation(&agent.ObjectMeta, "example.com/note", "nothing shown changes")
	g.Expect(k8s.Update(t.Context(), agent)).To(Succeed())
	kms := &imagev1.ImagePolicy{}
	kms.Namespace, kms.Name = ns, "kms"
	get(t, kms)
	kms.Status.LatestRef = &imagev1.ImageRef{Name: "registry.example.com/kms", Tag: "2.0.1"}
	g.Expect(k8s.Status().Update(t.Context(), kms)).To(Succeed())

	g.Eventually(stdout.String).Should(Equal(table("NAME    TAG", "agent   1.4.2", "kms     <none>", "kms     2.0.1")))

	cancel()
	g.Eventually(done).Should(Receive(Equal(0)))
	g.Expect(stderr.String()).To(BeEmpty())
}
