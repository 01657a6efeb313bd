// Package guard owns the write-back rules that the UpdateAutomation
// controller and `uprev plan` apply alike:
//
//   - holds: a commit in git's revert form (`This reverts commit <sha>.`)
//     whose target carries Uprev-Update trailers holds each reverted
//     `<policy> <version>`; a revert of the revert ends the hold; holds are
//     read on the checkout branch and on the push branch; the annotation
//     uprev.dev/release-holds releases them (ReadHolds, Releases);
//   - no downgrade: a change to a version the policy ranks below the one in
//     Git is refused unless downgrades are allowed;
//   - the CRD skip: the CRDs shipped with a version are written only when
//     the version itself may be.
//
// Refusals are typed (Refusal, RefusalKind), so callers tell a held version
// from a refused downgrade without reading messages.
//
// The package knows nothing of Kubernetes clients or of how Git is read:
// holds are read through the History interface, which internal/gitrepo
// implements for kept clones and for checkouts.
package guard
