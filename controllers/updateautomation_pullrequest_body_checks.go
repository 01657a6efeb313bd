package controllers

import (
	"context"
	"fmt"
	"time"

	imagev1 "github.com/fluxcd/image-reflector-controller/api/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	uprevv1 "github.com/uprev-dev/uprev/api/v1alpha1"
	"github.com/uprev-dev/uprev/internal/notes"
)

// checkedLines are the body's lines on what uprev checked of version, the
// new version of pol: when the scans first saw it and how long ago, and
// what each ReleaseGate selecting pol reports of it (see gateLines).
func (r *UpdateAutomationReconciler) checkedLines(ctx context.Context, pol *imagev1.ImagePolicy, version string) []string {
	var out []string
	if seen := r.firstSeen(ctx, pol, version); !seen.IsZero() {
		out = append(out, fmt.Sprintf("First seen: %s (%s ago)", seen.UTC().Format(time.RFC3339), releaseAge(r.Clock.Now().Sub(seen))))
	}
	return append(out, gateLines(ctx, r.Client, pol, version)...)
}

// gateLines say what the ReleaseGates selecting pol checked of version
// (notes.GateChecks). Gates that cannot be listed say nothing: the body
// is no place to fail.
func gateLines(ctx context.Context, c client.Reader, pol *imagev1.ImagePolicy, version string) []string {
	var list uprevv1.ReleaseGateList
	if err := c.List(ctx, &list, client.InNamespace(pol.Namespace)); err != nil {
		return nil
	}
	return notes.GateChecks(list.Items, pol.Name, version, func(rg *uprevv1.ReleaseGate) bool { return gateSelects(rg, pol) })
}

// firstSeen is when the image scans first saw tag of pol's image, zero
// when not known.
func (r *UpdateAutomationReconciler) firstSeen(ctx context.Context, pol *imagev1.ImagePolicy, tag string) time.Time {
	if r.Tags == nil {
		return time.Time{}
	}
	repo, err := allowedRepository(ctx, r.Client, pol, r.NoCrossNamespaceRefs)
	if err != nil {
		return time.Time{}
	}
	seen, err := r.Tags.SeenTags(repoKey(repo))
	if err != nil {
		return time.Time{}
	}
	for _, t := range seen {
		if t.Name == tag {
			return t.FirstSeen
		}
	}
	return time.Time{}
}

// releaseAge says an age in days, hours, or minutes under an hour.
func releaseAge(d time.Duration) string {
	switch {
	case d < time.Hour:
		return fmt.Sprintf("%d min", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%d h", int(d.Hours()))
	}
	return fmt.Sprintf("%d days", int(d.Hours()/24))
}
