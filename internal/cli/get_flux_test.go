package cli

import (
	"fmt"
	"strings"
	"testing"
	"time"

	iacv1 "github.com/fluxcd/image-automation-controller/api/v1"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	uprevv1 "github.com/uprev-dev/uprev/api/v1alpha1"
)

// TestGetFluxAutomations lists Flux's ImageUpdateAutomations, whose last
// push uprev writes into Flux's status.
func TestGetFluxAutomations(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	pushed := metav1.NewTime(now.Add(-5 * time.Minute))
	flux := newFluxAutomation(ns, "flux-system", uprevv1.Hold{Policy: ns + "/web", Version: "3.0.0", RevertedIn: webRevert})
	flux.Status = iacv1.ImageUpdateAutomationStatus{
		LastPushCommit: pushCommit, LastPushTime: &pushed,
		Conditions: []metav1.Condition{ready(metav1.ConditionTrue, "Succeeded", "no change; 1 held")},
	}
	createWithStatus(t, flux)
	r := uprev(t, "get", "iua", "-o", "wide", "-n", ns, kubeconfigFlag)
	g.Expect(r).To(Equal(result{stdout: table(
		"NAME          READY   SUSPENDED   LAST COMMIT   HOLDS   STATUS              AGE   SOURCE                      PUSH BRANCH    LAST PUSH",
		"flux-system   True    False       3f1c0d9a2b    1       no change; 1 held   3d    GitRepository/flux-system   flux/updates   5m",
	)}))
	r = uprev(t, "get", "imageupdateautomations", "-o", "name", "-n", ns, kubeconfigFlag)
	g.Expect(r).To(Equal(result{stdout: "imageupdateautomation.image.toolkit.fluxcd.io/flux-system\n"}))
}

// policyColumn pads cell to the width of the POLICY column of the holds
// of namespace ns, whose widest cell is <ns>/agent: the namespace differs
// from one run of the test to the next.
func policyColumn(ns, cell string) string {
	return cell + strings.Repeat(" ", len(ns+"/agent")+3-len(cell))
}

// TestGetHoldsOfFluxAutomations shows the holds of Flux
// ImageUpdateAutomations as the manager publishes them in an annotation:
// past the annotation's bound, a row counts the holds it leaves out; an
// annotation that cannot be read is an error naming the object.
func TestGetHoldsOfFluxAutomations(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	var holds []uprevv1.Hold
	for i := range uprevv1.MaxPublishedHolds + 2 {
		holds = append(holds, uprevv1.Hold{Policy: fmt.Sprintf("%s/p%03d", ns, i), Version: "1.0.0", RevertedIn: webRevert})
	}
	createWithStatus(t, newFluxAutomation(ns, "many", holds...))

	r := uprev(t, "get", "holds", "many", "--no-headers", "-n", ns, kubeconfigFlag)
	g.Expect(r.code).To(Equal(0), r.stderr)
	lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
	g.Expect(lines).To(HaveLen(uprevv1.MaxPublishedHolds + 1))
	g.Expect(lines[0]).To(MatchRegexp(`^many +ImageUpdateAutomation +` + ns + `/p000 +1\.0\.0 +fedcba9876 +False +\(reverted\)$`))
	g.Expect(lines[uprevv1.MaxPublishedHolds]).To(MatchRegexp(`^many +ImageUpdateAutomation +\(2 more, not published\)$`))
	r = uprev(t, "get", "iua", "many", "-n", ns, kubeconfigFlag)
	g.Expect(r.stdout).To(MatchRegexp(`\nmany +Unknown +False +102 +3d\n$`))
	r = uprev(t, "get", "holds", "many", "-o", "json", "-n", ns, kubeconfigFlag)
	g.Expect(r.stdout).To(HaveSuffix(`        {
            "automation": "many",
            "automationKind": "ImageUpdateAutomation",
            "namespace": "` + ns + `",
            "omitted": 2,
            "released": false
        }
    ],
    "kind": "List",
    "metadata": {
        "resourceVersion": ""
    }
}
`))

	broken := newFluxAutomation(ns, "broken")
	broken.Annotations = map[string]string{uprevv1.HoldsAnnotation: "{not json"}
	createWithStatus(t, broken)
	r = uprev(t, "get", "holds", "broken", "-n", ns, kubeconfigFlag)
	g.Expect(r.code).To(Equal(1))
	g.Expect(r.stderr).To(HavePrefix("uprev get holds: ImageUpdateAutomation " + ns + "/broken: reading annotation " + uprevv1.HoldsAnnotation + ": "))
}
