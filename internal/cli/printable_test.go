package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	iacv1 "github.com/fluxcd/image-automation-controller/api/v1"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/yaml"

	uprevv1 "github.com/uprev-dev/uprev/api/v1alpha1"
	"github.com/uprev-dev/uprev/internal/testenv/syncbuf"
)

// everyControl is every C0 control, DEL and two C1 controls (CSI and
// NEL), as a tenant can write them into an annotation.
var everyControl = func() string {
	var b strings.Builder
	for c := range 0x20 {
		b.WriteByte(byte(c))
	}
	return b.String() + "\x7f\u009b\u0085"
}()

// Values a tenant writes into the holds annotation of its
// ImageUpdateAutomation: an OSC sequence that retitles the window and
// rings the bell, one that clears the screen, and every control.
var (
	hostilePolicy  = "/web\x1b]0;owned\x07"
	hostileVersion = "1.0.0\x1b[2J\x1b[H"
	hostileCommit  = everyControl + "9ab2c3d4"
	hostileReason  = "crashes\x1b[2J\non\tarm64\x07 see #1"
)

// unprintable returns the control characters in out a terminal would act
// on: every byte below 0x20 but newline and tab, DEL, and the C1 controls
// (UTF-8 0xc2 0x80..0x9f), each with its offset.
func unprintable(out string) []string {
	var found []string
	for i := 0; i < len(out); i++ {
		c := out[i]
		switch {
		case c < 0x20 && c != '\n' && c != '\t', c == 0x7f:
			found = append(found, fmt.Sprintf("%#02x at %d", c, i))
		case c == 0xc2 && i+1 < len(out) && out[i+1] >= 0x80 && out[i+1] <= 0x9f:
			found = append(found, fmt.Sprintf("U+%04X at %d", out[i+1], i))
		}
	}
	return found
}

// TestTerminalGetsNoControlCharacters: what a tenant writes into the holds
// annotation of its ImageUpdateAutomation, or what a status message
// carries, reaches the terminal with every control character shown
// escaped, in tables, -o wide and --watch; -o yaml and -o json carry no
// control character either and still decode to the values written.
func TestTerminalGetsNoControlCharacters(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	hold := uprevv1.Hold{Policy: ns + hostilePolicy, Version: hostileVersion, RevertedIn: hostileCommit, Reason: hostileReason}
	flux := newFluxAutomation(ns, "tenant", hold)
	flux.Status.Conditions = []metav1.Condition{ready(metav1.ConditionFalse, "Failed", "registry said: \x1b[31mdenied\x1b[0m\x07")}
	createWithStatus(t, flux)

	for _, args := range [][]string{
		{"get", "holds"},
		{"get", "holds", "tenant"},
		{"get", "holds", "-o", "wide"},
		{"get", "iua", "-o", "wide"},
	} {
		r := uprev(t, append(args, "-n", ns, kubeconfigFlag)...)
		g.Expect(r.code).To(Equal(0), "%v: %s", args, r.stderr)
		g.Expect(unprintable(r.stdout)).To(BeEmpty(), "%v printed control characters:\n%q", args, r.stdout)
		g.Expect(unprintable(r.stderr)).To(BeEmpty(), "%v printed control characters:\n%q", args, r.stderr)
	}
	r := uprev(t, "get", "holds", "-n", ns, kubeconfigFlag)
	g.Expect(r.stdout).To(ContainSubstring(`/web\x1b]0;owned\x07`), "shown, escaped")
	g.Expect(r.stdout).To(ContainSubstring(`1.0.0\x1b[2J\x1b[H`))
	g.Expect(r.stdout).To(MatchRegexp(`\n\S+ +ImageUpdateAutomation +\S+ +\S+ +\S+ +False +crashes\S+ on arm64\S+ see #1\n$`), "one line, in its columns:\n%s", r.stdout)
	g.Expect(r.stdout).To(ContainSubstring(`crashes\x1b[2J on arm64\x07 see #1`), "the reason of a rejection, escaped, its white space folded")
	r = uprev(t, "get", "iua", "-n", ns, kubeconfigFlag)
	g.Expect(r.stdout).To(ContainSubstring(`registry said: \x1b[31mdenied\x1b[0m\x07`))

	for _, format := range []string{"yaml", "json"} {
		r := uprev(t, "get", "holds", "-o", format, "-n", ns, kubeconfigFlag)
		g.Expect(r.code).To(Equal(0), r.stderr)
		g.Expect(unprintable(r.stdout)).To(BeEmpty(), "-o %s printed control characters:\n%q", format, r.stdout)
		var list struct {
			Items []holdRecord `json:"items"`
		}
		if format == "json" {
			g.Expect(json.Unmarshal([]byte(r.stdout), &list)).To(Succeed(), r.stdout)
		} else {
			g.Expect(yaml.Unmarshal([]byte(r.stdout), &list)).To(Succeed(), r.stdout)
		}
		g.Expect(list.Items).To(HaveLen(1))
		g.Expect(list.Items[0]).To(And(
			HaveField("Policy", hold.Policy), HaveField("Version", hold.Version), HaveField("RevertedIn", hold.RevertedIn), HaveField("Reason", hold.Reason),
		), "-o %s decodes to the values written", format)
	}
}

// TestWatchGetsNoControlCharacters: a hold with control characters that
// appears while `uprev get holds --watch` runs is printed escaped.
func TestWatchGetsNoControlCharacters(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	createWithStatus(t, newFluxAutomation(ns, "tenant", uprevv1.Hold{Policy: ns + "/web", Version: "1.0.0", RevertedIn: webRevert}))
	ctx, cancel := context.WithCancel(t.Context())
	var stdout, stderr syncbuf.Buffer
	done := make(chan int)
	go func() {
		done <- Execute(ctx, []string{"get", "holds", "-w", "-n", ns, kubeconfigFlag}, Options{
			IOStreams: genericiooptions.IOStreams{In: &bytes.Buffer{}, Out: &stdout, ErrOut: &stderr},
			Clock:     clocktesting.NewFakeClock(now),
		})
	}()
	g.Eventually(stdout.String).WithTimeout(10 * time.Second).Should(MatchRegexp(`^AUTOMATION .*\ntenant .*\n$`))

	flux := &iacv1.ImageUpdateAutomation{}
	flux.Namespace, flux.Name = ns, "tenant"
	get(t, flux)
	flux.Annotations[uprevv1.HoldsAnnotation] = uprevv1.EncodeHolds([]uprevv1.Hold{{Policy: ns + hostilePolicy, Version: hostileVersion, RevertedIn: hostileCommit}})
	g.Expect(k8s.Update(t.Context(), flux)).To(Succeed())
	g.Eventually(stdout.String).WithTimeout(10*time.Second).Should(ContainSubstring(`1.0.0\x1b[2J\x1b[H`), "the new hold's row")
	cancel()
	g.Eventually(done).Should(Receive(Equal(0)))
	g.Expect(unprintable(stdout.String())).To(BeEmpty(), "--watch printed control characters:\n%q", stdout.String())
	g.Expect(stderr.String()).To(BeEmpty())
}
