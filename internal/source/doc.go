// Package source reads the versions of releases from where they are
// published beyond OCI registries: a classic Helm repository's index.yaml,
// GitHub's (or a compatible) releases API, a Git repository's tags, and a
// JSON document such as a release feed. Select picks one with ImagePolicy's
// own rules (internal/policy), so the same spec gives the same answer as for
// image tags.
//
// It knows nothing of Kubernetes: credentials come in as a Secret's data
// map, errors come out wrapping the sentinels below (or a *RateLimitError),
// so a controller can tell configuration errors from transient ones.
//
// Every request is bounded: a deadline (Access.Timeout, default
// DefaultTimeout), a size bound on every answer (Options.MaxBytes, default
// DefaultMaxBytes), redirects only to the same host (so credentials never
// leave it), and connections only to addresses the operator allows
// (Options.DenyCIDRs, the manager's --registry-deny-cidrs). A Client
// remembers each answer's ETag and Last-Modified, so a scan of an unchanged
// source costs one conditional request answered 304 Not Modified.
package source
