// Package plan computes what the next UpdateAutomation run would change in a
// checkout, without writing anything: the values each marker would get, the
// versions held because a person reverted them, and the downgrades refused.
// It backs the `uprev plan` subcommand, which CI jobs run on a checkout
// before anything is pushed.
//
// Compute is pure: it takes a directory and the guard's input (the
// policies' latest references and orderings, the holds found in Git, the
// released holds, whether downgrades are allowed) and returns a Plan. The
// loaders in this package produce those inputs from a refs file
// (ReadRefsFile), from ImagePolicies and ReleaseSources in a cluster
// (ListPolicies, ListSources) and from a
// checkout's history (ReadHolds). Plan.Notes adds what a pull request body
// says of the image updates (internal/notes), for `uprev plan --notes`.
//
// The rules are not this package's: Compute applies internal/guard's, as the
// UpdateAutomation controller does, so a change to a held version is
// refused, and, unless downgrades are allowed, so is a change to a version
// the policy ranks below the one in Git.
package plan
