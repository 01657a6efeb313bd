// Package e2e holds uprev's end-to-end suite: the whole flow, from a tag
// pushed to an OCI registry to the new version running in the target
// clusters, on real components started by the tests: kube-apiservers with
// etcd (one for the cluster uprev runs in, two more as remote clusters), an
// in-process OCI registry and a Git server per test, and one uprev manager
// with every controller and the webhook receivers, started in TestMain.
//
// There is one test per scenario of examples/, loading that example's
// manifests from disk, and the latency benchmarks of docs/benchmarks.md
// (`go test -run '^$' -bench . -benchtime 3x ./test/e2e/`). See docs/e2e.md.
package e2e
