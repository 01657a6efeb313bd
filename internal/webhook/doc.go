// Package webhook receives push notifications from registries and Git
// servers and asks the matching objects to reconcile now, instead of at
// their next interval.
//
// A receiver is addressed by kind and namespace:
//
//	POST /hooks/registry/<namespace>   registry push → ImageRepositories
//	POST /hooks/git/<namespace>        Git push → Syncs and UpdateAutomations;
//	                                   tag push, release event → ReleaseSources
//
// Every request is authenticated with the token in the Secret
// `uprev-webhook` (key `token`) of that namespace, by one of: a GitHub-style
// HMAC-SHA256 signature of the body (X-Hub-Signature-256), a GitLab token
// (X-Gitlab-Token), a bearer token (Authorization), or, for senders that set
// no headers (Docker Hub), a path key: /hooks/<kind>/<namespace>/<key> with
// key = hex(HMAC-SHA256(token, "<kind>/<namespace>")).
//
// An authenticated payload names what was pushed or released
// (ParseRegistryPush, ParseGitPush, ParseRelease); each object of the namespace that reads it gets Flux's
// reconcile request annotation (reconcile.fluxcd.io/requestedAt), which the
// controllers react to. Requests that are not authenticated or not
// understood trigger nothing.
package webhook
