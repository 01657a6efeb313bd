package v1alpha1

// Finalizer is the finalizer uprev puts on the objects whose deletion it
// cleans up after: a Sync's applied objects, an automation's kept clone.
const Finalizer = "uprev.dev/finalizer"

// Reasons of the Ready, Reconciling and Stalled conditions of uprev's kinds.
const (
	// InvalidSpecReason: the spec cannot work as written.
	InvalidSpecReason = "InvalidSpec"
	// SecretNotFoundReason: a referenced Secret (registry, Git, signing
	// key, kubeconfig) is missing; retried until it appears.
	SecretNotFoundReason = "SecretNotFound"
	// KubeConfigRefusedReason: a target's kubeconfig would run a plugin,
	// read a file or skip TLS verification, which the manager's flags do
	// not allow.
	KubeConfigRefusedReason = "KubeConfigRefused"
	// AuthenticationFailedReason: the credentials were refused.
	AuthenticationFailedReason = "AuthenticationFailed"
	// GitOperationFailedReason: a fetch, commit or push failed.
	GitOperationFailedReason = "GitOperationFailed"
	// BadCommitReason: the branch's tip holds a tree entry that is not a
	// valid path (`..`, `.git`, a name with a slash); nothing of it was
	// checked out, and the next run at the interval looks at the tip again.
	BadCommitReason = "BadCommit"
	// GitTimeoutReason: the Git server (named in the message) did not
	// answer within spec.git.timeout; retried with backoff.
	GitTimeoutReason = "GitTimeout"
	// GitSlotsBusyReason (Reconciling): the object's Git server or its
	// namespace already holds its share (half) of the workers of its kind
	// in Git work; the object runs again when a share is given back, its
	// Ready condition left as it was.
	GitSlotsBusyReason = "GitSlotsBusy"
	// UpdateFailedReason: files could not be rewritten.
	UpdateFailedReason = "UpdateFailed"
	// BuildFailedReason: the manifests could not be built.
	BuildFailedReason = "BuildFailed"
	// ApplyFailedReason: a target refused the revision.
	ApplyFailedReason = "ApplyFailed"
	// HealthCheckFailedReason: applied objects did not become healthy in time.
	HealthCheckFailedReason = "HealthCheckFailed"
	// HealthWaitCancelledReason: a health wait was cut short because a new
	// revision, reconcile request or spec arrived; the next run follows.
	HealthWaitCancelledReason = "HealthWaitCancelled"
	// StatusWriteFailedReason: a Sync target's record (its applied
	// revision, health and inventory) could not be written; the Sync is
	// not Ready until every target has recorded the revision.
	StatusWriteFailedReason = "StatusWriteFailed"
	// RolloutStoppedReason: more targets failed the revision than the
	// rollout's maxFailures allows, so later steps do not start.
	RolloutStoppedReason = "RolloutStopped"
	// RolloutInProgressReason: later waves wait for earlier ones.
	RolloutInProgressReason = "RolloutInProgress"
	// ClusterNotProvisionedReason (a SyncTarget's status.reason): the
	// target's Cluster API Cluster has no initialized control plane or no
	// kubeconfig Secret yet; it joins the rollout once it has both.
	ClusterNotProvisionedReason = "ClusterNotProvisioned"
)
