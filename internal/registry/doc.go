// Package registry is uprev's access to OCI registries for ImageRepository
// scanning, with the semantics of Flux's image-reflector-controller
// (image.toolkit.fluxcd.io/v1): list the tags of an image, filter them with
// the exclusion list, and look up the digest of one tag.
//
// A Scanner is made once per process. It holds what every scan shares: the
// per-host (and per-proxy) concurrency and rate limits, the retry policy for 429 Too Many
// Requests and 5xx gateway answers (honouring Retry-After, with exponential
// backoff when it is absent), and the Prometheus metrics. From it, a Client
// is made per ImageRepository with that object's access settings: pull
// secrets (dockerconfigjson), a TLS secret, a proxy secret, insecure HTTP and
// a timeout. Secrets are passed as their data maps; this package does not
// talk to Kubernetes.
//
// Errors a caller decides on wrap ErrUnauthorized, ErrNotFound, ErrTransient,
// ErrInvalidConfig or ErrTagListTooLarge. A cloud provider's short-lived
// credentials are obtained by the caller and passed in
// Access.CloudCredentials, with the registry host they were issued for in
// Access.CloudRegistry: they are offered to that host only, and never over
// plain HTTP, a custom CA or a proxy (CheckCloudSettings).
//
// What a registry can make a Client do is bounded: every call has a
// deadline (Access.Timeout, or DefaultTimeout), tag lists are bounded in
// tags, bytes and pages and page only on the registry's own host, error
// answers are read up to 64 KiB and quoted in one short line, and
// ScannerOptions.DenyCIDRs refuses connections to denied address ranges
// when they are dialled (internal/outbound).
//
// # Tag store
//
// Store keeps the scanned tags of each repository between scans and across
// restarts, in a directory: one small file per repository, named by a hash
// of its key, replaced atomically (written to a temporary file and renamed
// over the old one) and read only when asked for. Nothing is kept in
// memory between calls, so the memory of the controller does not grow with
// the number of repositories or tags: a thousand repositories of a thousand
// tags are ten megabytes on disk and nothing on the heap. An in-memory map
// would hold all of them for the life of the process and lose them on every
// restart, which then rescans every registry at once; an embedded database
// (Flux used BadgerDB) brings its own caches, compaction and background
// goroutines for what is a key-to-blob mapping that the file system already
// does well. A reader never sees a partly written file. Files are not
// synced, since a scan rebuilds them: a power loss may cut the newest one
// short, which its trailing tag count reveals, and Tags then reports the
// repository as not stored rather than return part of a list.
package registry
