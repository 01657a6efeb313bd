package plan

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	uprevv1 "github.com/uprev-dev/uprev/api/v1alpha1"
	"github.com/uprev-dev/uprev/internal/update"
)

// Gated is the newest version a ReleaseGate holds back from a policy, as
// the gate's status reports it: the policy's latestRef, which the plan
// writes, is the newest version that passes every gate.
type Gated struct {
	// Policy is the policy held back.
	Policy update.PolicyKey
	// Gate names the ReleaseGate.
	Gate string
	// Waiting is the version and why it waits.
	Waiting uprevv1.WaitingVersion
}

// ListGated reads the ReleaseGates in namespace (all namespaces when
// empty) and returns, for each policy and gate, the newest version the
// gate holds back, sorted by policy and gate.
func ListGated(ctx context.Context, c client.Reader, namespace string) ([]Gated, error) {
	var list uprevv1.ReleaseGateList
	if err := c.List(ctx, &list, client.InNamespace(namespace)); err != nil {
		return nil, fmt.Errorf("listing release gates: %w", err)
	}
	var gated []Gated
	for _, rg := range list.Items {
		for _, p := range rg.Status.Policies {
			if len(p.Waiting) > 0 {
				gated = append(gated, Gated{Policy: update.PolicyKey{Namespace: rg.Namespace, Name: p.Name}, Gate: rg.Name, Waiting: p.Waiting[0]})
			}
		}
	}
	slices.SortFunc(gated, func(a, b Gated) int {
		return cmp.Or(cmp.Compare(a.Policy.String(), b.Policy.String()), cmp.Compare(a.Gate, b.Gate))
	})
	return gated, nil
}

// line is the plan line of g:
//
//	gated: fleet/agent 1.5.1 (promotion at ReleaseGate prod: eu-staging runs 1.4.2)
func (g Gated) line() string {
	w := g.Waiting
	detail := w.Reason
	if w.EligibleAt != nil {
		detail += ", until " + w.EligibleAt.UTC().Format(time.RFC3339)
	}
	return fmt.Sprintf("gated: %s %s (%s at ReleaseGate %s: %s)", g.Policy, w.Tag, w.Gate, g.Gate, detail)
}
