// Package plan computes what the next UpdateAutomation run would change in a
// checkout, without writing anything: the values each marker would get, the
// versions held because a person reverted them, and the downgrades refused.
// It backs the `uprev plan` subcommand, which CI jobs run on a checkout
// before anything is pushed.
//
// Compute is pure: it takes a directory, the policies' latest references,
// their orderings and the holds found in Git, and returns a Plan. The
// loaders in this package produce those inputs from a refs file
// (ParseRefsFile), from ImagePolicies in a cluster (ListPolicies) and from a
// checkout's history (ReadHolds).
//
// The guard applies the same rules as the UpdateAutomation controller: a
// change to a held version is refused, and, unless downgrades are allowed, so
// is a change to a version the policy ranks below the one in Git.
package plan
