package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	uprevv1 "github.com/uprev-dev/uprev/api/v1alpha1"
)

// waitHandled waits until the controller handled the reconcile request
// token of the object at key and, for a Sync rolled out in waves, until
// its last wave is done; then it prints the Ready message, or fails when
// the object is not Ready. When --timeout passes first, the error says
// where the object stands.
func (o *objectVerbOptions) waitHandled(ctx context.Context, out io.Writer, c client.Client, k objectKind, key client.ObjectKey, token string) error {
	obj := k.newObject()
	handled := false
	// A read that fails is tried again at the next poll (an API server
	// that is busy), and named if --timeout passes; only a deleted object
	// ends the wait at once. Reads take the command's context, not the
	// poll's: the client's rate limiter refuses to wait past the poll's
	// deadline, which would fail the last read of a wait that is about to
	// say where the object stands.
	var lastErr error
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, o.timeout, true, func(context.Context) (bool, error) {
		if err := c.Get(ctx, key, obj); err != nil {
			if apierrors.IsNotFound(err) {
				return false, lookupError(err, k.kind, key.Namespace, key.Name)
			}
			lastErr = err
			return false, nil
		}
		lastErr = nil
		last, conditions := k.status(obj)
		handled = last == token
		return handled && !rollingOut(conditions), nil
	})
	_, conditions := k.status(obj)
	ready, message := readyCells(conditions)
	if err != nil {
		if ctx.Err() == nil && wait.Interrupted(err) {
			msg := fmt.Sprintf("%s/%s: %s after %s", k.resource, key.Name, standing(handled, conditions), o.timeout)
			if lastErr != nil {
				msg += fmt.Sprintf(" (the last read failed: %v)", lastErr)
			}
			return errors.New(msg)
		}
		return fmt.Errorf("waiting for %s/%s to be reconciled: %w", k.resource, key.Name, err)
	}
	if ready != string(metav1.ConditionTrue) {
		return fmt.Errorf("%s/%s is not ready: %s", k.resource, key.Name, message)
	}
	_, err = fmt.Fprintf(out, "%s/%s reconciled: %s\n", k.resource, key.Name, message)
	return err
}

// rollingOut tells whether conditions say a rollout is under way: a
// Sync whose later waves wait for earlier ones.
func rollingOut(conditions []metav1.Condition) bool {
	c := findCondition(conditions, meta.ReadyCondition)
	return c != nil && c.Status == metav1.ConditionFalse && c.Reason == uprevv1.RolloutInProgressReason
}

// standing says where an object that --wait gave up on stands: the
// request not handled yet (and what the controller says it waits for),
// or the rollout under way.
func standing(handled bool, conditions []metav1.Condition) string {
	if !handled {
		msg := "the controller has not handled the request"
		if c := findCondition(conditions, meta.ReconcilingCondition); c != nil && c.Status == metav1.ConditionTrue {
			msg += " (" + c.Reason + ": " + c.Message + ")"
		}
		return msg
	}
	_, message := readyCells(conditions)
	return "still rolling out: " + message
}
