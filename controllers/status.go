package controllers

import (
	"errors"
	"fmt"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	"github.com/fluxcd/pkg/runtime/jitter"
	ctrl "sigs.k8s.io/controller-runtime"
)

// statusObject is an object whose kstatus conditions uprev sets.
type statusObject interface {
	conditions.Setter
	GetGeneration() int64
}

// stalledError marks a configuration error: retrying without a change to
// the object will not help, so the object is marked Stalled and not requeued.
type stalledError struct {
	reason string
	err    error
}

func (e *stalledError) Error() string { return e.err.Error() }
func (e *stalledError) Unwrap() error { return e.err }

// stalled wraps err as a configuration error with the given condition reason.
func stalled(reason string, err error) error {
	return &stalledError{reason: reason, err: err}
}

// stalledf is stalled with a formatted error.
func stalledf(reason, format string, args ...any) error {
	return stalled(reason, fmt.Errorf(format, args...))
}

// transientError is a failure worth retrying with backoff, with the
// condition reason to report meanwhile.
type transientError struct {
	reason string
	err    error
	// retryAfter, when set, is the wait the other side asked for (a rate
	// limit's reset), used instead of the backoff.
	retryAfter time.Duration
	// putOff means the run did not start its work: a share of the workers
	// was taken (see outcome.putOff).
	putOff bool
}

func (e *transientError) Error() string { return e.err.Error() }
func (e *transientError) Unwrap() error { return e.err }

// transient wraps err as a retryable failure with the given condition reason.
func transient(reason string, err error) error {
	return &transientError{reason: reason, err: err}
}

// transientAfter is transient, retried after the wait d rather than with
// backoff.
func transientAfter(reason string, err error, d time.Duration) error {
	return &transientError{reason: reason, err: err, retryAfter: d}
}

// putOffAfter is transientAfter for a run that did not start its work
// because a share of the workers was taken: a requested reconcile stays
// pending for the run that does the work.
func putOffAfter(reason string, err error, d time.Duration) error {
	return &transientError{reason: reason, err: err, retryAfter: d, putOff: true}
}

// silentRetryError is a wait too short to tell anyone about: the run is
// tried again after retryAfter and writes nothing, no status and no event.
type silentRetryError struct {
	err        error
	retryAfter time.Duration
}

func (e *silentRetryError) Error() string { return e.err.Error() }
func (e *silentRetryError) Unwrap() error { return e.err }

// degradedError is a partial failure: the run did what it could and goes on
// at its interval, but is not Ready until the cause is fixed.
type degradedError struct {
	reason string
	err    error
}

func (e *degradedError) Error() string { return e.err.Error() }
func (e *degradedError) Unwrap() error { return e.err }

// degraded wraps err as a partial failure with the given condition reason.
func degraded(reason string, err error) error {
	return &degradedError{reason: reason, err: err}
}

// waitingError means the run did not start its work because what it
// needs is taken by other runs: the object runs again after retryAfter,
// with Reconciling saying why and its Ready condition left as it was.
type waitingError struct {
	reason     string
	err        error
	retryAfter time.Duration
}

func (e *waitingError) Error() string { return e.err.Error() }
func (e *waitingError) Unwrap() error { return e.err }

// waiting wraps err as a wait with the given Reconciling reason, retried
// after about d.
func waiting(reason string, d time.Duration, err error) error {
	return &waitingError{reason: reason, err: err, retryAfter: d}
}

// outcome is how one reconcile ended; the object's conditions, its
// observedGeneration and the controller's result all follow from it.
type outcome struct {
	// err is nil on success.
	err error
	// message describes a success.
	message string
	// requeueAfter is when to run again after a success; 0 means no requeue.
	requeueAfter time.Duration
	// unannounced means a success that is the object's first Ready
	// records no event (see reconciler.eventOnReadyChange).
	unannounced bool
	// deferred means a success that put off the work it was run for, a
	// share of the workers being taken: the object stays Ready as it was.
	deferred bool
}

// putOff tells whether the run put off its work, waiting for a share of
// the workers, a Git slot or a kept clone, rather than doing it or failing
// at it: a reconcile request it was run for is then not handled yet (run
// leaves lastHandledReconcileAt as it was), and the run that does the work
// handles it.
func (o outcome) putOff() bool {
	var wait *waitingError
	var retry *transientError
	return o.deferred || errors.As(o.err, &wait) || (errors.As(o.err, &retry) && retry.putOff)
}

// setConditions writes Ready, Reconciling and Stalled from o and reports
// whether the generation counts as observed (on success or Stalled).
func setConditions(obj statusObject, o outcome) (observed bool) {
	var stall *stalledError
	var retry *transientError
	var partial *degradedError
	var wait *waitingError
	switch {
	case errors.As(o.err, &wait):
		conditions.Delete(obj, meta.StalledCondition)
		conditions.MarkReconciling(obj, wait.reason, "%s", wait.Error())
		return false
	case o.err == nil:
		conditions.Delete(obj, meta.ReconcilingCondition)
		conditions.Delete(obj, meta.StalledCondition)
		conditions.MarkTrue(obj, meta.ReadyCondition, meta.SucceededReason, "%s", o.message)
		return true
	case errors.As(o.err, &stall):
		conditions.Delete(obj, meta.ReconcilingCondition)
		conditions.MarkStalled(obj, stall.reason, "%s", stall.Error())
		conditions.MarkFalse(obj, meta.ReadyCondition, stall.reason, "%s", stall.Error())
		return true
	case errors.As(o.err, &partial):
		conditions.Delete(obj, meta.ReconcilingCondition)
		conditions.Delete(obj, meta.StalledCondition)
		conditions.MarkFalse(obj, meta.ReadyCondition, partial.reason, "%s", partial.Error())
		return true
	case errors.As(o.err, &retry):
		conditions.Delete(obj, meta.StalledCondition)
		conditions.MarkReconciling(obj, meta.ProgressingWithRetryReason, "%s", retry.Error())
		conditions.MarkFalse(obj, meta.ReadyCondition, retry.reason, "%s", retry.Error())
		return false
	default:
		conditions.Delete(obj, meta.StalledCondition)
		conditions.MarkReconciling(obj, meta.ProgressingWithRetryReason, "%s", o.err.Error())
		conditions.MarkFalse(obj, meta.ReadyCondition, meta.FailedReason, "%s", o.err.Error())
		return false
	}
}

// result turns o into what controller-runtime needs: Stalled objects wait for
// a change, transient errors are returned for backoff, successes requeue
// after the jittered interval.
func (o outcome) result() (ctrl.Result, error) {
	var stall *stalledError
	var partial *degradedError
	var retry *transientError
	var wait *waitingError
	switch {
	case errors.As(o.err, &wait):
		return ctrl.Result{RequeueAfter: jitter.JitteredIntervalDuration(wait.retryAfter)}, nil
	case errors.As(o.err, &retry) && retry.retryAfter > 0:
		return ctrl.Result{RequeueAfter: retry.retryAfter}, nil
	case o.err == nil, errors.As(o.err, &partial):
		if o.requeueAfter <= 0 {
			return ctrl.Result{}, nil
		}
		return ctrl.Result{RequeueAfter: jitter.JitteredIntervalDuration(o.requeueAfter)}, nil
	case errors.As(o.err, &stall):
		return ctrl.Result{}, nil
	default:
		return ctrl.Result{}, o.err
	}
}
