package controllers

import (
	"maps"
	"slices"

	imagev1 "github.com/fluxcd/image-reflector-controller/api/v1"
	"github.com/fluxcd/pkg/runtime/conditions"

	uprevv1 "github.com/uprev-dev/uprev/api/v1alpha1"
	"github.com/uprev-dev/uprev/internal/gitrepo"
	"github.com/uprev-dev/uprev/internal/guard"
	"github.com/uprev-dev/uprev/internal/source"
	"github.com/uprev-dev/uprev/internal/update"
)

// revisions are the tips of an automation's branches, as status records
// them.
type revisions struct {
	// source is the checkout branch's tip, `<branch>@sha1:<commit>`.
	source string
	// push is the push branch's tip when it differs and exists, else "".
	push string
}

// revisionsOf returns the tips a session fetched, or pushed.
func revisionsOf(s *gitrepo.Session) revisions {
	return revisions{source: s.Revision(), push: s.PushRevision()}
}

// unchanged reports whether a run has nothing new to write, so that, as in
// Flux, it does no rewrite walk: the last run succeeded for this generation,
// and the branch tips, the policies it selects, the holds in force and the
// CRD artifacts are all what that run saw. Anything else — someone's push,
// a new tag, a released hold, a spec change, a failed last run — makes a
// full run. A group's run (pullRequestGroups) always makes one.
func unchanged(auto *uprevv1.UpdateAutomation, run *automationRun, tips revisions) bool {
	prev := &auto.Status
	return run.group == nil && conditions.IsReady(auto) &&
		prev.ObservedGeneration == auto.Generation &&
		prev.ObservedSourceRevision == tips.source && tips.source != "" &&
		prev.ObservedPushRevision == tips.push &&
		maps.Equal(prev.ObservedPolicies, observedPolicies(run.policies, run.sources)) &&
		slices.Equal(prev.Holds, holdStatus(run.rules.Held())) &&
		slices.EqualFunc(prev.CRDs, run.crds, func(st uprevv1.CRDBundleStatus, b *crdBundle) bool {
			return st.Policy == b.policy.String() && st.Path == b.spec.Path && st.Digest == b.digest
		})
}

// observedPolicies returns each policy's latest ref by name, as status
// records them, and each ReleaseSource's URL and version by
// ReleaseSource/name, with a digest of its pinned assets (so that a re-pinned asset is a
// change too).
func observedPolicies(policies map[update.PolicyKey]*imagev1.ImagePolicy, sources map[update.PolicyKey]*uprevv1.ReleaseSource) map[string]uprevv1.ImageRef {
	out := make(map[string]uprevv1.ImageRef, len(policies)+len(sources))
	for key, pol := range policies {
		ref := pol.Status.LatestRef
		out[key.Name] = uprevv1.ImageRef{Name: ref.Name, Tag: ref.Tag, Digest: ref.Digest}
	}
	for key, rs := range sources {
		latest := rs.Status.Latest
		pinned := make([]string, 0, len(latest.Assets))
		for _, a := range latest.Assets {
			pinned = append(pinned, a.Name+"="+a.URL+"@"+a.SHA256)
		}
		out[update.SourceKind+"/"+key.Name] = uprevv1.ImageRef{Name: source.RedactURL(sourceURL(rs)), Tag: latest.Version, Digest: tagsRevision(pinned)}
	}
	return out
}

// holdStatus returns the holds in force, as status records them.
func holdStatus(held []guard.Hold) []uprevv1.Hold {
	var out []uprevv1.Hold
	for _, h := range held {
		out = append(out, uprevv1.Hold{Policy: h.Policy, Version: h.Version, RevertedIn: h.RevertedIn, Reason: h.Reason})
	}
	return out
}
